//! `exec` and `portForward` steps: SPDY sessions opened through the case's
//! API client (so any backend's authentication and TLS apply), then driven
//! as client-go's executor and port forwarder drive them.

use bytes::Bytes;
use http::{Request, StatusCode, header};
use hyper_util::rt::TokioIo;
use nodeconform_stream::spdy::{self, Session};
use nodeconform_stream::{client, portforward, remotecommand, upgrade};
use tokio::time::Instant;

use super::observe::{DEFAULT_WITHIN, retry};
use crate::case::{ExecStep, PortForwardStep};

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
        let (session, protocol) = session(client, &path, &remotecommand::PROTOCOLS).await?;
        let stdin = step.stdin.clone().map(Bytes::from);
        let out = client::exec_on(session, protocol, stdin)
            .await
            .map_err(|e| e.to_string())?;
        let code = out
            .exit_code()
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
