//! `exec` and `portForward` steps, and logs read over WebSocket: SPDY
//! sessions or WebSockets opened through the case's API client (so any
//! backend's authentication and TLS apply), then driven as client-go's
//! executor and port forwarder, or upstream's websocket tests, drive them.

use bytes::Bytes;
use http::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use nodeconform_stream::spdy::{self, Session};
use nodeconform_stream::{client, portforward, remotecommand, upgrade, websocket};
use tokio::time::Instant;

use super::observe::{DEFAULT_WITHIN, retry};
use crate::case::{ExecStep, PortForwardStep};

/// Sends an upgrade request through `client`; anything but a `101` is the error.
async fn send_upgrade(
    client: &kube::Client,
    request: Request<kube::client::Body>,
) -> Result<http::Response<kube::client::Body>, String> {
    let response = client.send(request).await.map_err(|e| e.to_string())?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = response.status();
        let body = response
            .into_body()
            .collect_bytes()
            .await
            .unwrap_or_default();
        return Err(format!(
            "the upgrade was refused: {status}: {}",
            String::from_utf8_lossy(&body).trim_end()
        ));
    }
    Ok(response)
}

/// Opens a SPDY session on `path_and_query` through `client`.
async fn session(
    client: &kube::Client,
    path_and_query: &str,
    protocols: &[&str],
) -> Result<(Session, String), String> {
    let mut request = Request::post(path_and_query)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, spdy::UPGRADE);
    for p in protocols {
        request = request.header(upgrade::PROTOCOL_HEADER, *p);
    }
    let request = request
        .body(kube::client::Body::from(Vec::new()))
        .map_err(|e| e.to_string())?;
    let response = send_upgrade(client, request).await?;
    let protocol = response
        .headers()
        .get(upgrade::PROTOCOL_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| format!("upgrading: {e}"))?;
    Ok((Session::client(TokioIo::new(upgraded)).0, protocol))
}

/// Runs an `exec` step.
pub async fn exec(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    step: &ExecStep,
    case_deadline: Instant,
) -> Result<(), String> {
    let mut query = form_urlencoded::Serializer::new(String::new());
    for arg in &step.command {
        query.append_pair("command", arg);
    }
    if let Some(container) = &step.container {
        query.append_pair("container", container);
    }
    if step.stdin.is_some() {
        query.append_pair("stdin", "true");
    }
    query.append_pair("stdout", "true");
    query.append_pair("stderr", "true");
    let path = format!(
        "/api/v1/namespaces/{namespace}/pods/{pod}/exec?{}",
        query.finish()
    );
    let within = step.within.map_or(DEFAULT_WITHIN, |d| d.get());
    retry(within, case_deadline, || async {
        let stdin = step.stdin.clone().map(Bytes::from);
        let out = match &step.websocket {
            Some(protocol) => websocket_exec(client, &path, protocol, stdin).await?,
            None => {
                let (session, protocol) = session(client, &path, &remotecommand::PROTOCOLS).await?;
                client::exec_on(session, protocol, stdin)
                    .await
                    .map_err(|e| e.to_string())?
            }
        };
        let code = exit_code(&out)
            .ok_or_else(|| format!("no exit status: the error stream says {:?}", out.error))?;
        let want = step.exit_code.unwrap_or(0);
        if code != want {
            return Err(format!(
                "exit code {code}, expected {want} (stdout {:?}, stderr {:?})",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for (what, want, got) in [
            ("stdout", &step.stdout, &out.stdout),
            ("stderr", &step.stderr, &out.stderr),
        ] {
            if let Some(problem) = want
                .as_ref()
                .and_then(|w| w.mismatch(what, &String::from_utf8_lossy(got)))
            {
                return Err(problem);
            }
        }
        Ok(())
    })
    .await
}

/// The exit code an exec's error stream reports: the v4 status, or under
/// the older protocols nothing for success and the failure's text.
fn exit_code(out: &client::Output) -> Option<i32> {
    if out.error.is_empty() {
        return Some(0);
    }
    out.exit_code().or_else(|| {
        out.error
            .rsplit_once("exit code ")
            .and_then(|(_, code)| code.trim().parse().ok())
    })
}

/// A WebSocket to `path` through `client`, offering `protocol`: the socket
/// and the protocol the server chose.
async fn websocket(
    client: &kube::Client,
    path: &str,
    protocol: &str,
) -> Result<(Socket, String), String> {
    use tokio_tungstenite::tungstenite::handshake::client::generate_key;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    let key = generate_key();
    let request = Request::get(path)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(header::SEC_WEBSOCKET_VERSION, "13")
        .header(header::SEC_WEBSOCKET_KEY, key.as_str())
        .header(header::SEC_WEBSOCKET_PROTOCOL, protocol)
        .body(kube::client::Body::from(Vec::new()))
        .map_err(|e| e.to_string())?;
    let response = send_upgrade(client, request).await?;
    let header_of = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    let accept = header_of(header::SEC_WEBSOCKET_ACCEPT);
    if accept != derive_accept_key(key.as_bytes()) {
        return Err(format!("bad Sec-WebSocket-Accept {accept:?}"));
    }
    let negotiated = header_of(header::SEC_WEBSOCKET_PROTOCOL);
    let upgraded = hyper::upgrade::on(response)
        .await
        .map_err(|e| format!("upgrading: {e}"))?;
    let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
        TokioIo::new(upgraded),
        tokio_tungstenite::tungstenite::protocol::Role::Client,
        None,
    )
    .await;
    Ok((socket, negotiated))
}

type Socket = tokio_tungstenite::WebSocketStream<TokioIo<hyper::upgrade::Upgraded>>;

/// A container's log read over WebSocket (`binary.k8s.io` or
/// `base64.binary.k8s.io`): every message's bytes until the server closes.
pub async fn websocket_log(
    client: &kube::Client,
    path: &str,
    protocol: &str,
) -> Result<String, String> {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let (mut socket, negotiated) = websocket(client, path, protocol).await?;
    let base64 = negotiated.starts_with("base64.");
    let mut log = Vec::new();
    while let Some(message) = socket.next().await {
        let message = message.map_err(|e| e.to_string())?;
        if let Message::Close(_) = message {
            break;
        }
        if let Some(data) = websocket::payload(&message, base64).map_err(|e| e.to_string())? {
            log.extend_from_slice(&data);
        }
    }
    Ok(String::from_utf8_lossy(&log).into_owned())
}

/// An exec over WebSocket with channel protocol `protocol`, through
/// `client`: stdin on channel 0 (then v5's close signal), stdout, stderr and
/// the error stream from channels 1 to 3, read until the server closes.
async fn websocket_exec(
    client: &kube::Client,
    path: &str,
    protocol: &str,
    stdin: Option<Bytes>,
) -> Result<client::Output, String> {
    use futures::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let (mut socket, negotiated) = websocket(client, path, protocol).await?;
    let base64 = negotiated.contains("base64");
    if let Some(data) = stdin {
        let message = websocket::encode(0, &data, base64);
        socket.send(message).await.map_err(|e| e.to_string())?;
        if negotiated == "v5.channel.k8s.io" {
            socket
                .send(Message::binary(vec![255u8, 0]))
                .await
                .map_err(|e| e.to_string())?;
        }
    }
    let mut channels = vec![Vec::new(); 5];
    while let Some(message) = socket.next().await {
        let message = message.map_err(|e| e.to_string())?;
        if let Message::Close(_) = message {
            break;
        }
        let Some((channel, data)) =
            websocket::decode(&message, base64).map_err(|e| e.to_string())?
        else {
            continue;
        };
        if let Some(buffer) = channels.get_mut(usize::from(channel)) {
            buffer.extend_from_slice(&data);
        }
    }
    Ok(client::Output {
        stdout: std::mem::take(&mut channels[1]),
        stderr: std::mem::take(&mut channels[2]),
        error: String::from_utf8_lossy(&channels[3]).into_owned(),
        protocol: negotiated,
    })
}

/// Runs a `portForward` step.
pub async fn port_forward(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    step: &PortForwardStep,
    case_deadline: Instant,
) -> Result<(), String> {
    let path = format!("/api/v1/namespaces/{namespace}/pods/{pod}/portforward");
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: localhost:{}\r\nUser-Agent: nodeconform\r\nConnection: close\r\n\r\n",
        step.path.as_deref().unwrap_or("/"),
        step.port
    );
    let within = step.within.map_or(DEFAULT_WITHIN, |d| d.get());
    retry(within, case_deadline, || async {
        let (session, _) = session(client, &path, &portforward::PROTOCOLS).await?;
        let (response, error) =
            client::forward_once_on(session, step.port, Bytes::from(request.clone()))
                .await
                .map_err(|e| e.to_string())?;
        if !error.is_empty() {
            return Err(format!("port {}: {error}", step.port));
        }
        let (status, body) = parse_response(&response)?;
        let want = step.status.unwrap_or(200);
        if status != want {
            return Err(format!("status {status}, expected {want} (body {body:?})"));
        }
        match step
            .body
            .as_ref()
            .and_then(|b| b.mismatch("the body", &body))
        {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    })
    .await
}

/// The status and body of an HTTP/1.1 response read to its end (chunked
/// bodies decoded).
fn parse_response(raw: &[u8]) -> Result<(u16, String), String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not an HTTP response: {text:?}"))?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {head:?}"))?;
    let chunked = head.lines().any(|l| {
        l.to_ascii_lowercase()
            .replace(' ', "")
            .starts_with("transfer-encoding:chunked")
    });
    if !chunked {
        return Ok((status, body.to_owned()));
    }
    let mut rest = body;
    let mut decoded = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 || tail.len() < size {
            break;
        }
        decoded.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    Ok((status, decoded))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn responses_plain_and_chunked() {
        let plain = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi";
        assert_eq!(parse_response(plain).unwrap(), (200, "hi".into()));
        let chunked = b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        assert_eq!(parse_response(chunked).unwrap(), (404, "abcde".into()));
        assert!(parse_response(b"garbage").is_err());
    }
}
