//! The client side of the streaming protocols, as `kubectl` and `crictl`
//! drive them over SPDY: the upgrade request, then the streams of a remote
//! command or of a forwarded port. Used by tests and by the harness to check
//! servers the way real clients use them.

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::remotecommand;
use crate::spdy::{self, Session};
use crate::upgrade::PROTOCOL_HEADER;

/// Why a streaming request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP exchange failed.
    #[error("HTTP: {0}")]
    Http(#[from] hyper::Error),
    /// The request could not be built.
    #[error("building the request: {0}")]
    Request(#[from] http::Error),
    /// The server answered without upgrading.
    #[error("upgrade refused: {status}: {body}")]
    Refused {
        /// Its status.
        status: StatusCode,
        /// Its body.
        body: String,
    },
    /// The session ended early.
    #[error(transparent)]
    Closed(#[from] spdy::Closed),
}

/// What a remote command gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Output {
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// The error stream's content: a `Status` as JSON under v4.
    pub error: String,
    /// The negotiated protocol.
    pub protocol: String,
}

impl Output {
    /// The exit code the v4 status reports (0 for success).
    pub fn exit_code(&self) -> Option<i32> {
        let status: serde_json::Value = serde_json::from_str(&self.error).ok()?;
        if status["status"] == "Success" {
            return Some(0);
        }
        status
            .pointer("/details/causes")?
            .as_array()?
            .iter()
            .find(|c| c["reason"] == "ExitCode")?["message"]
            .as_str()?
            .parse()
            .ok()
    }
}

/// Sends an upgrade request for `path_and_query` over `io` and starts the
/// session. `host` is the `Host` header.
pub async fn upgrade<IO>(
    io: IO,
    host: &str,
    path_and_query: &str,
    protocols: &[&str],
) -> Result<(Session, String), Error>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (upgraded, protocol) = upgrade_raw(io, host, path_and_query, protocols).await?;
    Ok((Session::client(TokioIo::new(upgraded)).0, protocol))
}

/// The SPDY upgrade of [`upgrade`], without starting a session: the raw
/// upgraded connection and the negotiated protocol (for a tunnel).
pub async fn upgrade_raw<IO>(
    io: IO,
    host: &str,
    path_and_query: &str,
    protocols: &[&str],
) -> Result<(hyper::upgrade::Upgraded, String), Error>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(conn.with_upgrades());
    let mut request = Request::post(path_and_query)
        .header(header::HOST, host)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, spdy::UPGRADE);
    for p in protocols {
        request = request.header(PROTOCOL_HEADER, *p);
    }
    let response = sender
        .send_request(request.body(Empty::<Bytes>::new())?)
        .await?;
    if response.status() != StatusCode::SWITCHING_PROTOCOLS {
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        return Err(Error::Refused {
            status,
            body: String::from_utf8_lossy(&body).into_owned(),
        });
    }
    let protocol = response
        .headers()
        .get(PROTOCOL_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    Ok((hyper::upgrade::on(response).await?, protocol))
}

fn headers(pairs: &[(&'static str, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (name, value) in pairs {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    h
}

async fn drain(mut inbound: mpsc::UnboundedReceiver<Bytes>) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(chunk) = inbound.recv().await {
        out.extend_from_slice(&chunk);
    }
    out
}

/// Runs a remote command (an `exec` or `attach` URL) with `stdin` (none
/// when `None`), stdout and stderr, and collects its output.
pub async fn exec<IO>(
    io: IO,
    host: &str,
    path_and_query: &str,
    stdin: Option<Bytes>,
) -> Result<Output, Error>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (session, protocol) = upgrade(io, host, path_and_query, &remotecommand::PROTOCOLS).await?;
    exec_on(session, protocol, stdin).await
}

/// [`exec`] on a session already upgraded with `protocol` negotiated: the
/// error, stdin (if any), stdout and stderr streams, as client-go opens them.
pub async fn exec_on(
    session: Session,
    protocol: String,
    stdin: Option<Bytes>,
) -> Result<Output, Error> {
    let open = |kind: &'static str| session.open(headers(&[("streamtype", kind.to_owned())]));
    let error = open("error").await?;
    let input = match stdin {
        Some(_) => Some(open("stdin").await?),
        None => None,
    };
    let stdout = open("stdout").await?;
    let stderr = open("stderr").await?;
    if let (Some(input), Some(data)) = (input, stdin) {
        let writer = input.writer();
        writer.write(data).await?;
        writer.close().await?;
    }
    let (stdout, stderr, error) = tokio::join!(
        drain(stdout.split().0),
        drain(stderr.split().0),
        drain(error.split().0)
    );
    session.close().await;
    Ok(Output {
        stdout,
        stderr,
        error: String::from_utf8_lossy(&error).into_owned(),
        protocol,
    })
}

/// Forwards one connection to `port` (a `portforward` URL): sends `request`,
/// closes the sending side and returns what came back, and the error
/// stream's text.
pub async fn forward_once<IO>(
    io: IO,
    host: &str,
    path_and_query: &str,
    port: u16,
    request: Bytes,
) -> Result<(Vec<u8>, String), Error>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (session, _) = upgrade(io, host, path_and_query, &crate::portforward::PROTOCOLS).await?;
    forward_once_on(session, port, request).await
}

/// [`forward_once`] on a session already upgraded to `portforward.k8s.io`.
pub async fn forward_once_on(
    session: Session,
    port: u16,
    request: Bytes,
) -> Result<(Vec<u8>, String), Error> {
    let with = |kind: &str| {
        headers(&[
            ("streamtype", kind.to_owned()),
            ("port", port.to_string()),
            ("requestid", "0".to_owned()),
        ])
    };
    let error = session.open(with("error")).await?;
    let data = session.open(with("data")).await?;
    let (inbound, writer) = data.split();
    writer.write(request).await?;
    writer.close().await?;
    let (response, error) = tokio::join!(drain(inbound), drain(error.split().0));
    session.close().await;
    Ok((response, String::from_utf8_lossy(&error).into_owned()))
}
