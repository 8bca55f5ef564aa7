//! agnhost `netexec`: the HTTP endpoints upstream's tests use. Each request is
//! logged as netexec's `log.Printf` logs it (to stderr: the container's log),
//! so a test that reads a handler pod's log sees the requests a hook made.
//! `/dial` makes the request it is asked for, from the pod, to an address on
//! this host (see [`client`](super::client)).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::client;
use crate::logs::LogFile;
use crate::script::Stream;

/// What netexec's handlers share.
#[derive(Clone)]
struct Netexec {
    hostname: String,
    port: u16,
    log: LogFile,
}

type Params = Query<HashMap<String, String>>;

/// The routes of a netexec server on `port` of a pod named `hostname`.
pub(super) fn router(hostname: &str, port: u16, log: LogFile) -> Router {
    let netexec = Netexec {
        hostname: hostname.to_owned(),
        port,
        log,
    };
    netexec.log(&format!("Started HTTP server on port {port}"));
    Router::new()
        .route("/echo", get(echo))
        .route("/dial", get(dial))
        .route("/clientip", get(client_ip))
        .route(
            "/hostname",
            get(|State(n): State<Netexec>| async move {
                n.log("GET /hostname");
                n.hostname.clone()
            }),
        )
        .route(
            "/serverport",
            get(|State(n): State<Netexec>| async move {
                n.log("GET /serverport");
                n.port.to_string()
            }),
        )
        .route(
            "/healthz",
            get(|State(n): State<Netexec>| async move {
                n.log("GET /healthz");
                StatusCode::OK
            }),
        )
        // Go's `/` pattern takes every path no other route has.
        .fallback(|State(n): State<Netexec>| async move {
            n.log("GET /");
            format!("NOW: {}", chrono::Utc::now())
        })
        .with_state(netexec)
}

impl Netexec {
    /// A line as Go's standard logger writes it.
    fn log(&self, line: &str) {
        let time = chrono::Utc::now().format("%Y/%m/%d %H:%M:%S");
        self.log
            .append(Stream::Stderr, format!("{time} {line}\n").as_bytes());
    }
}

fn param<'a>(query: &'a HashMap<String, String>, name: &str) -> &'a str {
    query.get(name).map_or("", String::as_str)
}

/// Go's `http.Error`: the message and a newline, as plain text.
fn http_error(status: StatusCode, message: String) -> Response {
    (status, format!("{message}\n")).into_response()
}

/// `/echo?msg=M&code=C`: M, with status C when given.
async fn echo(State(n): State<Netexec>, Query(q): Params) -> Response {
    let (msg, code) = (param(&q, "msg"), param(&q, "code"));
    n.log(&format!("GET /echo?msg={msg}&code={code}"));
    if code.is_empty() {
        return msg.to_owned().into_response();
    }
    match code
        .parse::<u16>()
        .ok()
        .and_then(|c| StatusCode::from_u16(c).ok())
    {
        Some(status) => (status, msg.to_owned()).into_response(),
        None => {
            format!("argument 'code' must be an integer or empty, got {code:?}\n").into_response()
        }
    }
}

/// `/clientip`: the client's address and port.
async fn client_ip(State(n): State<Netexec>, ConnectInfo(peer): ConnectInfo<SocketAddr>) -> String {
    n.log("GET /clientip");
    peer.to_string()
}

/// `/dial?host=H&port=P&request=R&tries=N`: GETs `http://H:P/R` N times and
/// answers `{"responses": […]}` and/or `{"errors": […]}`. HTTP only: the
/// UDP and SCTP servers are not simulated.
async fn dial(State(n): State<Netexec>, Query(q): Params) -> Response {
    let (host, port, request) = (param(&q, "host"), param(&q, "port"), param(&q, "request"));
    let (protocol, tries) = (param(&q, "protocol"), param(&q, "tries"));
    n.log(&format!(
        "GET /dial?host={host}&protocol={protocol}&port={port}&request={request}&tries={tries}"
    ));
    let tries = match tries {
        "" => 1,
        tries => match tries.parse::<usize>() {
            Ok(tries) => tries,
            Err(_) => {
                return http_error(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "tries parameter is invalid. strconv.Atoi: parsing {tries:?}: invalid syntax"
                    ),
                );
            }
        },
    };
    if request.is_empty() {
        return http_error(
            StatusCode::BAD_REQUEST,
            "request parameter not specified. <nil>".to_owned(),
        );
    }
    if !matches!(protocol.to_ascii_lowercase().as_str(), "" | "http") {
        return http_error(
            StatusCode::BAD_REQUEST,
            format!("unsupported protocol. {protocol} (fake-cri simulates netexec's HTTP only)"),
        );
    }
    let ip = host.trim_start_matches('[').trim_end_matches(']');
    let addr = match (ip.parse::<IpAddr>(), port.parse::<u16>()) {
        (Ok(ip), Ok(port)) => SocketAddr::new(ip, port),
        // No name is resolved: a pod has no DNS here.
        _ => {
            return http_error(
                StatusCode::BAD_REQUEST,
                format!(
                    "host and/or port param are invalid. address {host}:{port}: not an IP address and port (fake-cri resolves no names)"
                ),
            );
        }
    };
    let target = format!("/{request}");
    let (mut responses, mut errors, mut last) = (Vec::new(), Vec::new(), String::new());
    for _ in 0..tries {
        match client::get(addr, &target, "Go-http-client/1.1", Duration::from_secs(5)).await {
            Ok(reply) => {
                last = String::from_utf8_lossy(&reply.body).into_owned();
                responses.push(last.clone());
            }
            Err(error) => {
                last.clear();
                errors.push(go_error(addr, &target, &error));
            }
        }
    }
    // As netexec: the responses only when the last try got a non-empty one.
    let mut output = serde_json::Map::new();
    if !last.is_empty() {
        output.insert("responses".into(), responses.into());
    }
    if !errors.is_empty() {
        output.insert("errors".into(), errors.into());
    }
    serde_json::Value::Object(output)
        .to_string()
        .into_response()
}

/// How Go's HTTP client words a failed `Get`.
fn go_error(addr: SocketAddr, target: &str, error: &client::GetError) -> String {
    let url = format!("http://{addr}{target}");
    let cause = match error {
        client::GetError::Connect(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!("dial tcp {addr}: connect: connection refused")
        }
        client::GetError::Connect(e) => format!("dial tcp {addr}: {e}"),
        client::GetError::Timeout => {
            "context deadline exceeded (Client.Timeout exceeded while awaiting headers)".to_owned()
        }
        other => other.to_string(),
    };
    format!("Get {url:?}: {cause}")
}
