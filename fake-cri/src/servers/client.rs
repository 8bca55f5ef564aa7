//! HTTP requests made from inside a pod — `curl` in a container, netexec's
//! `/dial` — to addresses on this host only: a pod's peers are on loopback
//! addresses, and nothing a case runs may send a packet off the host.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;

/// An HTTP response.
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub body: Bytes,
}

/// Why a request got no response.
#[derive(Debug, thiserror::Error)]
pub(crate) enum GetError {
    /// The address is not on this host; no packet was sent.
    #[error("{0} is not on this host (fake-cri reaches only 127.0.0.0/8 and ::1)")]
    OffHost(std::net::IpAddr),
    /// The connection failed (refused: nothing listens there).
    #[error("{0}")]
    Connect(std::io::Error),
    /// No complete response in time.
    #[error("timed out")]
    Timeout,
    /// The server broke HTTP.
    #[error("{0}")]
    Http(#[from] hyper::Error),
}

/// `GET target` (a path and query) from `addr` with this `User-Agent`.
pub(crate) async fn get(
    addr: SocketAddr,
    target: &str,
    user_agent: &str,
    timeout: Duration,
) -> Result<Reply, GetError> {
    if !addr.ip().is_loopback() {
        return Err(GetError::OffHost(addr.ip()));
    }
    let request = async {
        let stream = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(GetError::Connect)?;
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        let connection = tokio::spawn(connection);
        let request = http::Request::get(target)
            .header(http::header::HOST, addr.to_string())
            .header(http::header::USER_AGENT, user_agent)
            .body(Empty::<Bytes>::new())
            .map_err(|e| GetError::Connect(std::io::Error::other(e)))?;
        let response = sender.send_request(request).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        connection.abort();
        Ok(Reply { status, body })
    };
    tokio::time::timeout(timeout, request)
        .await
        .map_err(|_| GetError::Timeout)?
}
