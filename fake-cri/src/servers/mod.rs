//! The servers of the images upstream's node tests run, simulated on the pod's address.
//!
//! fake-cri runs no processes, so a container whose program is a server (agnhost's
//! `liveness`, `test-webserver`, `netexec`, `serve-hostname` and `grpc-health-checking`;
//! nginx and httpd) gets the server's observable part instead: it listens on the sandbox's
//! IP — an address in 127.0.0.0/8, never one off the host — and answers as the image does,
//! for exactly as long as the container runs. A liveness probe against a container that
//! has stopped is refused, as on a real node; one against agnhost `liveness` fails once its
//! `/healthz` turns to 500 after 10 s. A port another container of the pod already holds
//! makes the container exit 1, as the server's `ListenAndServe` would.

use std::net::IpAddr;
use std::time::Instant;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::AbortHandle;

use crate::logs::LogFile;

pub(crate) mod client;
mod netexec;

/// A server a container's program is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Server {
    /// agnhost `liveness`: `/healthz` is 200 for 10 s after the start, then 500;
    /// `/redirect?loc=` redirects (port 8080).
    Liveness,
    /// agnhost `test-webserver`, nginx, httpd: 200 for any path.
    Web { port: u16 },
    /// agnhost `netexec`: `/echo`, `/dial`, `/clientip`, `/hostname`, `/serverport`,
    /// `/healthz` and `/` (HTTP port), each request logged.
    Netexec { port: u16 },
    /// agnhost `serve-hostname`: the pod's host name on any path.
    ServeHostname { port: u16 },
    /// agnhost `grpc-health-checking`: `grpc.health.v1.Health` serving (gRPC port).
    GrpcHealth { port: u16 },
}

impl Server {
    /// The servers a container of `image` running `argv` (the CRI command and args) is:
    /// none for a program that is not one of them (a shell, `pause`, …).
    pub(crate) fn of(image: &str, argv: &[String]) -> Vec<Server> {
        let repository = image.split(['@']).next().unwrap_or(image);
        let name = repository.rsplit('/').next().unwrap_or(repository);
        let name = name.split(':').next().unwrap_or(name);
        let base = |s: &String| s.rsplit('/').next().unwrap_or(s).to_owned();
        match name {
            "agnhost" => {
                // The image's entrypoint is `/agnhost`; a pod gives the subcommand as args.
                let args: Vec<&String> = argv.iter().skip_while(|a| base(a) == "agnhost").collect();
                let Some(sub) = args.first() else {
                    return Vec::new();
                };
                let flag = |name: &str, default: u16| port_flag(&args, name).unwrap_or(default);
                match sub.as_str() {
                    "liveness" => vec![Server::Liveness],
                    "test-webserver" => vec![Server::Web {
                        port: flag("port", 80),
                    }],
                    "netexec" => vec![Server::Netexec {
                        port: flag("http-port", 8080),
                    }],
                    "serve-hostname" => vec![Server::ServeHostname {
                        port: flag("port", 9376),
                    }],
                    "grpc-health-checking" => vec![Server::GrpcHealth {
                        port: flag("port", 5000),
                    }],
                    _ => Vec::new(),
                }
            }
            "nginx" | "httpd" => {
                let is_server = argv.first().is_none_or(|a| {
                    matches!(base(a).as_str(), "nginx" | "httpd" | "httpd-foreground")
                });
                if is_server {
                    vec![Server::Web { port: 80 }]
                } else {
                    Vec::new()
                }
            }
            // cri-tools' nginx for host-network pods, on a port the host leaves free.
            name if name.starts_with("hostnet-nginx") => vec![Server::Web { port: 12003 }],
            _ => Vec::new(),
        }
    }

    fn port(&self) -> u16 {
        match self {
            Server::Liveness => 8080,
            Server::Web { port }
            | Server::Netexec { port }
            | Server::ServeHostname { port }
            | Server::GrpcHealth { port } => *port,
        }
    }
}

/// `--name=N` or `--name N` among `args`.
fn port_flag(args: &[&String], name: &str) -> Option<u16> {
    let long = format!("--{name}");
    args.iter().enumerate().find_map(|(i, a)| {
        if let Some(v) = a.strip_prefix(&format!("{long}=")) {
            return v.parse().ok();
        }
        (**a == long)
            .then(|| args.get(i + 1).and_then(|v| v.parse().ok()))
            .flatten()
    })
}

/// Servers listening for a running container; dropping it stops them.
#[derive(Debug, Default)]
pub(crate) struct Running(Vec<AbortHandle>);

impl Drop for Running {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Starts `servers` on `ip` for a container of a pod named `hostname`, logging to `log`
/// what the server logs; `Err` is the line the server would log before exiting (the
/// port is taken).
pub(crate) async fn start(
    servers: &[Server],
    ip: IpAddr,
    hostname: &str,
    log: &LogFile,
) -> Result<Running, String> {
    let mut running = Running::default();
    for server in servers {
        let listener = TcpListener::bind((ip, server.port()))
            .await
            .map_err(|e| format!("listen tcp {ip}:{}: bind: {e}\n", server.port()))?;
        let task = match server {
            Server::GrpcHealth { .. } => tokio::spawn(grpc_health(listener)),
            _ => {
                let router = router(server, hostname, log);
                let app = router.into_make_service_with_connect_info::<std::net::SocketAddr>();
                tokio::spawn(async move {
                    let _ = axum::serve(listener, app).await;
                })
            }
        };
        running.0.push(task.abort_handle());
    }
    Ok(running)
}

/// The HTTP routes of `server`.
fn router(server: &Server, hostname: &str, log: &LogFile) -> Router {
    let hostname = hostname.to_owned();
    match server {
        Server::Liveness => Router::new()
            .route("/healthz", get(liveness_healthz))
            .route("/redirect", get(redirect))
            .with_state(Instant::now()),
        Server::Netexec { port } => netexec::router(&hostname, *port, log.clone()),
        Server::ServeHostname { .. } => Router::new().fallback(move || async move { hostname }),
        // (gRPC health has no HTTP routes: `start` serves it with tonic.)
        Server::Web { .. } | Server::GrpcHealth { .. } => {
            Router::new().fallback(|| async { "Hello from the simulated web server\n" })
        }
    }
}

/// agnhost `liveness`: healthy for the first 10 seconds.
async fn liveness_healthz(State(started): State<Instant>) -> Response {
    let elapsed = started.elapsed();
    if elapsed.as_secs_f64() > 10.0 {
        let body = format!("error: {:.6}", elapsed.as_secs_f64());
        (StatusCode::INTERNAL_SERVER_ERROR, body).into_response()
    } else {
        (StatusCode::OK, "ok").into_response()
    }
}

/// agnhost `liveness`'s `/redirect?loc=`: a 302 to `loc`, with the body Go's `http.Redirect`
/// writes for a GET.
async fn redirect(Query(q): Query<std::collections::HashMap<String, String>>) -> Response {
    match q.get("loc") {
        Some(loc) => {
            let escaped = loc
                .replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
                .replace('"', "&#34;")
                .replace('\'', "&#39;");
            let body = format!("<a href=\"{escaped}\">Found</a>.\n\n");
            let headers = [
                (header::LOCATION, loc.clone()),
                (header::CONTENT_TYPE, "text/html; charset=utf-8".to_owned()),
            ];
            (StatusCode::FOUND, headers, body).into_response()
        }
        None => (StatusCode::BAD_REQUEST, "Missing loc parameter").into_response(),
    }
}

/// agnhost `grpc-health-checking`: the health service, serving.
async fn grpc_health(listener: TcpListener) {
    let (_reporter, service) = tonic_health::server::health_reporter();
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    let _ = tonic::transport::Server::builder()
        .add_service(service)
        .serve_with_incoming(incoming)
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn servers_are_known_by_image_and_program() {
        let agnhost = "registry.k8s.io/e2e-test-images/agnhost:2.53";
        assert_eq!(
            Server::of(agnhost, &argv(&["liveness"])),
            [Server::Liveness]
        );
        assert_eq!(
            Server::of(agnhost, &argv(&["/agnhost", "netexec", "--http-port=8081"])),
            [Server::Netexec { port: 8081 }]
        );
        assert_eq!(
            Server::of(agnhost, &argv(&["test-webserver", "--port", "8000"])),
            [Server::Web { port: 8000 }]
        );
        assert_eq!(Server::of(agnhost, &argv(&["pause"])), []);
        assert_eq!(Server::of("nginx:1.25", &[]), [Server::Web { port: 80 }]);
        assert_eq!(
            Server::of("docker.io/library/httpd:2.4.38-alpine", &[]),
            [Server::Web { port: 80 }]
        );
        assert_eq!(Server::of("nginx", &argv(&["sh", "-c", "sleep 1"])), []);
        assert_eq!(Server::of("busybox:1.36", &argv(&["liveness"])), []);
    }

    #[tokio::test]
    async fn a_server_answers_while_running_and_a_taken_port_fails() {
        let ip: IpAddr = "127.0.0.1".parse().unwrap();
        let port = {
            let l = std::net::TcpListener::bind((ip, 0)).unwrap();
            l.local_addr().unwrap().port()
        };
        let log = LogFile::new(None);
        let running = start(&[Server::Netexec { port }], ip, "pod-a", &log)
            .await
            .unwrap();
        let get = |path: &'static str| async move {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut s = tokio::net::TcpStream::connect((ip, port)).await?;
            s.write_all(
                format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
            )
            .await?;
            let mut out = String::new();
            s.read_to_string(&mut out).await?;
            Ok::<_, std::io::Error>(out)
        };
        let echoed = get("/echo?msg=poststart").await.unwrap();
        assert!(
            echoed.starts_with("HTTP/1.1 200") && echoed.ends_with("poststart"),
            "{echoed}"
        );
        assert!(get("/hostname").await.unwrap().ends_with("pod-a"));
        let taken = start(&[Server::Netexec { port }], ip, "pod-b", &log)
            .await
            .unwrap_err();
        assert!(
            taken.starts_with(&format!("listen tcp 127.0.0.1:{port}: bind:")),
            "{taken}"
        );
        drop(running);
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(get("/").await.is_err(), "stopped with its container");
    }
}
