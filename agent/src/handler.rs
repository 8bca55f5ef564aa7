//! The network actions probes and lifecycle hooks share (`pkg/probe/http`, `pkg/probe/tcp`,
//! `pkg/probe/grpc` and `NewRequestForHTTPGetAction`): one HTTP GET built from an
//! `httpGet` action — its scheme, host (the pod's IP when unset), named or numbered port,
//! path and headers, the kubelet's `User-Agent` and `Accept` unless the action sets them —
//! a TCP connect, and a gRPC health check, each failing in the words of Go's clients.
//!
//! A probe follows redirects to the same host (at most 10) and takes a 2xx as success, a
//! redirect elsewhere as a success with a warning (`Probe terminated redirects`) and
//! anything else as failure; a lifecycle hook takes any response as success. `https`
//! is checked as far as the connection: the agent speaks no TLS to pods.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, HTTPGetAction};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// What the kubelet calls the requests it sends (`kube-probe/1.36`, `kube-lifecycle/1.36`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A probe.
    Probe,
    /// A lifecycle hook.
    Lifecycle,
}

impl Purpose {
    fn user_agent(self) -> &'static str {
        match self {
            Purpose::Probe => "kube-probe/1.36",
            Purpose::Lifecycle => "kube-lifecycle/1.36",
        }
    }
}

/// What an HTTP GET got back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// A response with this status code (after same-host redirects).
    Status(u16),
    /// A redirect to another host, not followed: a probe's `Warning`, with the response's
    /// body (at most 10 KiB, as the kubelet reads).
    OtherHost(u16, String),
}

/// One `httpGet` action made concrete (`NewRequestForHTTPGetAction`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    scheme: String,
    host: String,
    port: u16,
    path: String,
    headers: Vec<(String, String)>,
}

impl HttpGet {
    /// The request `action` of `container` asks for; the pod's IP is the host unless the
    /// action names one. `Err` is the kubelet's reason it cannot be made.
    pub fn new(
        action: &HTTPGetAction,
        container: &Container,
        pod_ip: Option<&str>,
    ) -> Result<Self, String> {
        let host = action
            .host
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| pod_ip.map(str::to_owned))
            .ok_or_else(|| "failed to find networking container: the pod has no IP".to_owned())?;
        let port = resolve_port(&action.port, container)?;
        let scheme = action
            .scheme
            .as_deref()
            .unwrap_or("HTTP")
            .to_ascii_lowercase();
        let path = action.path.clone().unwrap_or_default();
        let path = if path.is_empty() || path.starts_with('/') {
            path
        } else {
            format!("/{path}")
        };
        let headers = action
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        Ok(Self {
            scheme,
            host,
            port,
            path,
            headers,
        })
    }

    /// `host:port`, bracketed for IPv6.
    fn host_port(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL as Go prints it in errors.
    pub fn url(&self) -> String {
        format!("{}://{}{}", self.scheme, self.host_port(), self.path)
    }

    /// The request's path as written (empty when the action has none).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Sends the GET, following redirects to the same host; `Err` is Go's client error.
    pub async fn send(&self, purpose: Purpose) -> Result<Response, String> {
        let mut path = self.path.clone();
        for _ in 0..=10 {
            let (code, location, body) = self.exchange(&path, purpose).await?;
            let Some(location) = location.filter(|_| (300..400).contains(&code)) else {
                return Ok(Response::Status(code));
            };
            match self.same_host_path(&location) {
                Some(next) => path = next,
                None => return Ok(Response::OtherHost(code, body)),
            }
        }
        Err(format!("Get {:?}: stopped after 10 redirects", self.url()))
    }

    /// A `Location` as a path on this host, or `None` for another host.
    fn same_host_path(&self, location: &str) -> Option<String> {
        if location.starts_with('/') {
            return Some(location.to_owned());
        }
        let rest = location.split_once("://").map(|(_, r)| r)?;
        let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        let host = authority.rsplit_once(':').map_or(authority, |(h, _)| h);
        (host.trim_matches(['[', ']']) == self.host).then(|| path.to_owned())
    }

    /// One request and the response's status code, `Location` and body.
    async fn exchange(
        &self,
        path: &str,
        purpose: Purpose,
    ) -> Result<(u16, Option<String>, String), String> {
        let url = format!("{}://{}{}", self.scheme, self.host_port(), path);
        let mut stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| {
                format!(
                    "Get {url:?}: dial tcp {}: {}",
                    self.host_port(),
                    dial_error(&e)
                )
            })?;
        if self.scheme == "https" {
            return Ok((200, None, String::new()));
        }
        let has = |name: &str| {
            self.headers
                .iter()
                .any(|(n, _)| n.eq_ignore_ascii_case(name))
        };
        let host = self
            .headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("Host"))
            .map_or_else(|| self.host_port(), |(_, v)| v.clone());
        let target = if path.is_empty() { "/" } else { path };
        let mut request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n");
        if !has("User-Agent") {
            request.push_str(&format!("User-Agent: {}\r\n", purpose.user_agent()));
        }
        if !has("Accept") {
            request.push_str("Accept: */*\r\n");
        }
        for (name, value) in &self.headers {
            // An empty Accept removes it; Host went into the request line's header.
            let empty_accept = name.eq_ignore_ascii_case("Accept") && value.is_empty();
            if !empty_accept && !name.eq_ignore_ascii_case("Host") {
                request.push_str(&format!("{name}: {value}\r\n"));
            }
        }
        request.push_str("Connection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?;
        let (head, body) = read_response(&mut stream)
            .await
            .map_err(|e| format!("Get {url:?}: {e}"))?;
        let mut lines = head.lines();
        let code = lines
            .next()
            .filter(|l| l.starts_with("HTTP/"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse::<u16>().ok())
            .ok_or_else(|| format!("Get {url:?}: malformed HTTP response"))?;
        let location = header(&head, "Location").map(str::to_owned);
        Ok((code, location, body))
    }
}

/// `maxRespBodyLength`: what the kubelet reads of a body.
const MAX_BODY: usize = 10 << 10;

/// The response's status line and headers (up to the blank line, at most 16 KiB), and its
/// body as far as `Content-Length` says (at most [`MAX_BODY`]; none when it gives no length).
async fn read_response(stream: &mut tokio::net::TcpStream) -> std::io::Result<(String, String)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 1024];
    let end = loop {
        if let Some(at) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 || data.len() > 16 * 1024 {
            if data.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "EOF",
                ));
            }
            break data.len();
        }
        data.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&data[..end]).into_owned();
    let want = header(&head, "Content-Length")
        .and_then(|l| l.parse::<usize>().ok())
        .unwrap_or(0)
        .min(MAX_BODY);
    let mut body = data.get(end + 4..).unwrap_or_default().to_vec();
    while body.len() < want {
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&buf[..n]);
    }
    body.truncate(want);
    Ok((head, String::from_utf8_lossy(&body).into_owned()))
}

/// A header's value in a response head.
fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim())
}

/// `ResolveContainerPort`: a number, or the name of one of the container's ports (a name
/// that is none is tried as a number).
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    let number = match port {
        IntOrString::Int(n) => Ok(i64::from(*n)),
        IntOrString::String(s) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(s.as_str()))
            .map(|p| i64::from(p.container_port))
            .or_else(|| s.parse::<i64>().ok())
            .ok_or_else(|| format!("port {s} not found")),
    }?;
    u16::try_from(number)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("invalid port number: {number}"))
}

/// `tcp.DoTCPProbe`: a connection within `timeout`.
pub async fn tcp_connect(host: &str, port: u16, timeout: Duration) -> Result<(), String> {
    let addr = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    match tokio::time::timeout(timeout, tokio::net::TcpStream::connect((host, port))).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(format!("dial tcp {addr}: {}", dial_error(&error))),
        Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
    }
}

/// The kubelet's gRPC prober (`pkg/probe/grpc`): `grpc.health.v1.Health/Check` of
/// `service` at `host:port`, with its messages. Like its blocking dial, a refused
/// connection is retried until `timeout`.
pub async fn grpc_check(
    host: &str,
    port: i32,
    service: &str,
    timeout: Duration,
) -> Result<(), String> {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let addr = format!("{host}:{port}");
    let within = format!("{}s", timeout.as_secs());
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| format!("error: failed to connect service at {addr:?}: {e}"))?;
    let deadline = Instant::now() + timeout;
    let channel = loop {
        match tokio::time::timeout_at(deadline, endpoint.connect()).await {
            Ok(Ok(channel)) => break channel,
            Ok(Err(_)) if Instant::now() + Duration::from_millis(100) < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => {
                return Err(format!(
                    "timeout: failed to connect service {addr:?} within {within}: context deadline exceeded"
                ));
            }
        }
    };
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    match tokio::time::timeout_at(deadline, HealthClient::new(channel).check(request)).await {
        Err(_) => Err(format!(
            "timeout: health rpc did not complete within {within}"
        )),
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => Err(format!(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
            status.message()
        )),
        Ok(Err(status)) => Err(format!(
            "error: health rpc probe failed: {}",
            status.message()
        )),
        Ok(Ok(response)) => match response.into_inner().status() {
            ServingStatus::Serving => Ok(()),
            other => Err(format!(
                "service unhealthy (responded with {:?})",
                other.as_str_name()
            )),
        },
    }
}

/// A connection error as Go's `net` package words the common ones.
fn dial_error(error: &std::io::Error) -> String {
    match error.kind() {
        std::io::ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        std::io::ErrorKind::TimedOut => "i/o timeout".into(),
        _ => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{ContainerPort, HTTPHeader};
    use tokio::net::TcpListener;

    use super::*;

    fn container() -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    #[test]
    fn ports_by_number_and_name() {
        let c = container();
        assert_eq!(resolve_port(&IntOrString::Int(80), &c), Ok(80));
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(resolve_port(&IntOrString::String("81".into()), &c), Ok(81));
        assert_eq!(
            resolve_port(&IntOrString::String("web".into()), &c),
            Err("port web not found".into())
        );
        assert_eq!(
            resolve_port(&IntOrString::Int(70000), &c),
            Err("invalid port number: 70000".into())
        );
    }

    /// A server answering each connection with the next of `responses`, handing back
    /// what each request said.
    async fn server(responses: Vec<String>) -> (u16, tokio::task::JoinHandle<Vec<String>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let mut seen = Vec::new();
            for response in responses {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                seen.push(String::from_utf8_lossy(&buf[..n]).into_owned());
                s.write_all(response.as_bytes()).await.unwrap();
            }
            seen
        });
        (port, task)
    }

    fn action(port: i32, path: &str, headers: &[(&str, &str)]) -> HTTPGetAction {
        HTTPGetAction {
            port: IntOrString::Int(port),
            path: Some(path.into()),
            http_headers: Some(
                headers
                    .iter()
                    .map(|(n, v)| HTTPHeader {
                        name: (*n).into(),
                        value: (*v).into(),
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn requests_carry_the_kubelets_headers_unless_the_action_sets_its_own() {
        let ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".to_owned();
        let (port, seen) = server(vec![ok.clone(), ok]).await;
        let c = container();
        let plain =
            HttpGet::new(&action(port.into(), "healthz", &[]), &c, Some("127.0.0.1")).unwrap();
        assert_eq!(plain.url(), format!("http://127.0.0.1:{port}/healthz"));
        assert_eq!(plain.send(Purpose::Probe).await, Ok(Response::Status(200)));
        let own = action(
            port.into(),
            "/",
            &[("User-Agent", "mine"), ("X-Custom", "v")],
        );
        let own = HttpGet::new(&own, &c, Some("127.0.0.1")).unwrap();
        assert_eq!(
            own.send(Purpose::Lifecycle).await,
            Ok(Response::Status(200))
        );
        let seen = seen.await.unwrap();
        assert!(
            seen[0].starts_with("GET /healthz HTTP/1.1\r\n"),
            "{}",
            seen[0]
        );
        assert!(seen[0].contains("User-Agent: kube-probe/1.36\r\n"));
        assert!(seen[0].contains("Accept: */*\r\n"));
        assert!(seen[1].contains("User-Agent: mine\r\n") && seen[1].contains("X-Custom: v\r\n"));
        assert!(!seen[1].contains("kube-lifecycle"));
    }

    #[tokio::test]
    async fn same_host_redirects_are_followed_and_others_are_not() {
        let (port, seen) = server(vec![
            "HTTP/1.1 302 Found\r\nLocation: /moved\r\nContent-Length: 0\r\n\r\n".into(),
            "HTTP/1.1 301 Moved\r\nLocation: http://example.invalid/x\r\nContent-Length: 5\r\n\r\nmoved"
                .into(),
        ])
        .await;
        let get = HttpGet::new(
            &action(port.into(), "/old", &[]),
            &container(),
            Some("127.0.0.1"),
        )
        .unwrap();
        assert_eq!(
            get.send(Purpose::Probe).await,
            Ok(Response::OtherHost(301, "moved".into()))
        );
        let seen = seen.await.unwrap();
        assert!(seen[1].starts_with("GET /moved HTTP/1.1"), "{}", seen[1]);
    }

    /// A gRPC health service on 127.0.0.1 (never a pod IP: nothing leaves this machine).
    #[tokio::test]
    async fn grpc_probes_ask_the_health_service_and_word_failures_as_the_kubelet() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("up", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("down", tonic_health::ServingStatus::NotServing)
            .await;
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let second = Duration::from_secs(1);
        assert_eq!(grpc_check("127.0.0.1", port, "up", second).await, Ok(()));
        assert_eq!(grpc_check("127.0.0.1", port, "", second).await, Ok(()));
        assert_eq!(
            grpc_check("127.0.0.1", port, "down", second).await,
            Err("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
        assert!(
            grpc_check("127.0.0.1", port, "unknown", second)
                .await
                .unwrap_err()
                .starts_with("error: health rpc probe failed:")
        );
        server.abort();
        // Nothing listens any more: retried until the timeout, as the kubelet's blocking dial.
        let started = Instant::now();
        assert_eq!(
            grpc_check("127.0.0.1", port, "up", second).await,
            Err(format!(
                "timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded"
            ))
        );
        assert!(started.elapsed() >= Duration::from_millis(800));
    }

    #[tokio::test]
    async fn a_closed_port_fails_as_go_words_it() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            l.local_addr().unwrap().port()
        };
        let get = HttpGet::new(
            &action(port.into(), "/x", &[]),
            &container(),
            Some("127.0.0.1"),
        )
        .unwrap();
        assert_eq!(
            get.send(Purpose::Probe).await,
            Err(format!(
                "Get \"http://127.0.0.1:{port}/x\": dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
        assert_eq!(
            tcp_connect("127.0.0.1", port, Duration::from_secs(1)).await,
            Err(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
    }
}
