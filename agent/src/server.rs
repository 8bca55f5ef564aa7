//! The agent's HTTP server on 127.0.0.1: `/healthz` and Prometheus `/metrics`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tracing::Instrument;

use crate::metrics::Metrics;

/// Binds `addr` (127.0.0.1 unless asked otherwise) and serves until shutdown; returns the bound address.
pub async fn spawn(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let task = accept_loop(listener, shutdown, move |stream| {
        let metrics = metrics.clone();
        async move {
            let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move { Ok::<_, Infallible>(route(&req, &metrics)) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
    Ok((local, task))
}

/// Accepts connections on `listener` until `shutdown` changes and serves each with
/// `serve` in a task of its own (both of the agent's servers: this one and
/// [`crate::kubelet_server`]). A failed accept is skipped; connections already accepted
/// run to their end.
pub(crate) fn accept_loop<F, Fut>(
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
    serve: F,
) -> tokio::task::JoinHandle<()>
where
    F: Fn(TcpStream) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let accept = async move {
        loop {
            let stream = tokio::select! {
                s = listener.accept() => match s {
                    Ok((s, _)) => s,
                    Err(_) => continue,
                },
                _ = shutdown.changed() => return,
            };
            tokio::spawn(serve(stream).in_current_span());
        }
    };
    tokio::spawn(accept.in_current_span())
}

fn route<B>(req: &Request<B>, metrics: &Metrics) -> Response<Full<Bytes>> {
    let (status, body, content_type) = match req.uri().path() {
        "/healthz" => (StatusCode::OK, "ok".to_owned(), "text/plain"),
        "/metrics" => (
            StatusCode::OK,
            metrics.render(),
            "text/plain; version=0.0.4",
        ),
        _ => (StatusCode::NOT_FOUND, "not found".to_owned(), "text/plain"),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() {
        let m = Metrics::default();
        let req = Request::builder().uri("/healthz").body(()).unwrap();
        assert_eq!(route(&req, &m).status(), StatusCode::OK);
        let req = Request::builder().uri("/metrics").body(()).unwrap();
        assert_eq!(route(&req, &m).status(), StatusCode::OK);
        let req = Request::builder().uri("/x").body(()).unwrap();
        assert_eq!(route(&req, &m).status(), StatusCode::NOT_FOUND);
    }
}
