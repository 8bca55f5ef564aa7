//! The upgrade-aware proxy (apimachinery's `UpgradeAwareHandler`, as the
//! kubelet's `proxyStream` and kube-apiserver's exec/attach/port-forward
//! handlers use it): the client's upgrade request is sent on to the backend
//! with its headers; a `101` is passed back and the two upgraded connections
//! are spliced, byte for byte, whatever protocol they speak; any other answer
//! is passed back as it is.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, header};
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tracing::Instrument;

/// The backend could not be asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The HTTP exchange with the backend failed.
    #[error("error dialing backend: {0}")]
    Backend(#[from] hyper::Error),
    /// The request could not be rebuilt.
    #[error("building the backend request: {0}")]
    Request(#[from] http::Error),
}

/// Headers that belong to one hop and are not passed on (Go's
/// `hopHeaders`); an upgrade keeps `Connection` and `Upgrade`.
pub const HOP_HEADERS: [&str; 9] = [
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Sends upgrade request `req` to the backend over `backend` as
/// `path_and_query` with `Host: authority`, and answers with the backend's
/// answer; after a `101` the connections are spliced in a task of their own.
pub async fn upgrade<B, IO>(
    mut req: Request<B>,
    backend: IO,
    authority: &str,
    path_and_query: &str,
) -> Result<Response<Bytes>, Error>
where
    IO: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let client_upgrade = hyper::upgrade::on(&mut req);
    let mut forwarded = Request::builder()
        .method(req.method().clone())
        .uri(path_and_query);
    for (name, value) in req.headers() {
        let hop = HOP_HEADERS.contains(&name.as_str())
            && name != header::CONNECTION
            && name != header::UPGRADE;
        if name == header::HOST || hop {
            continue;
        }
        forwarded = forwarded.header(name, value);
    }
    forwarded = forwarded.header(
        header::HOST,
        HeaderValue::from_str(authority).unwrap_or(HeaderValue::from_static("localhost")),
    );
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(backend)).await?;
    tokio::spawn(conn.with_upgrades().in_current_span());
    let mut response = sender
        .send_request(forwarded.body(Empty::<Bytes>::new())?)
        .await?;
    let status = response.status();
    let headers = response.headers().clone();
    let body = if status == http::StatusCode::SWITCHING_PROTOCOLS {
        let backend_upgrade = hyper::upgrade::on(&mut response);
        tokio::spawn(
            async move {
                let (client, backend) = match tokio::join!(client_upgrade, backend_upgrade) {
                    (Ok(client), Ok(backend)) => (client, backend),
                    _ => return,
                };
                let (mut client, mut backend) = (TokioIo::new(client), TokioIo::new(backend));
                let _ = tokio::io::copy_bidirectional(&mut client, &mut backend).await;
            }
            .in_current_span(),
        );
        Bytes::new()
    } else {
        response.into_body().collect().await?.to_bytes()
    };
    let mut answer = Response::new(body);
    *answer.status_mut() = status;
    *answer.headers_mut() = headers;
    Ok(answer)
}
