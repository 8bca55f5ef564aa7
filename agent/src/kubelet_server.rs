//! The agent's kubelet endpoint (the kubelet's port 10250 server): HTTPS with a
//! self-signed certificate made at start, on 127.0.0.1 unless asked otherwise,
//! serving `GET /containerLogs/{namespace}/{pod}/{container}` ([`crate::pod_logs`]),
//! `/exec`, `/attach` and `/portForward` ([`crate::streaming`]), `/stats/summary`
//! ([`crate::stats_summary`]), `/pods` and `/healthz`. Its port is the Node's `daemonEndpoints.kubeletEndpoint.Port`,
//! where the API server sends `kubectl logs`.
//!
//! Like a kubelet with anonymous authentication and `AlwaysAllow`, it does not
//! authenticate its clients: bind it beyond loopback only on a trusted network.
//! The `/healthz` and `/metrics` server ([`crate::server`]) stays plain HTTP, as
//! the kubelet's port 10248 is.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::rustls::{self, ServerConfig};
use tokio_stream::StreamExt;
use tokio_stream::wrappers::ReceiverStream;
use tracing::Instrument;

use k8s_openapi::api::core::v1::Pod;

use crate::pod_logs::{self, Context, Query};
use crate::{server, stats_summary, streaming};

/// Errors starting the server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The self-signed certificate could not be made.
    #[error("making the serving certificate")]
    Certificate(#[from] rcgen::Error),
    /// rustls refused the configuration.
    #[error("building the TLS configuration")]
    Tls(#[from] rustls::Error),
    /// The address could not be bound.
    #[error("binding {addr}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Binds `addr` and serves until shutdown; returns the bound address.
pub async fn spawn(
    addr: SocketAddr,
    node_ip: IpAddr,
    ctx: Context,
    shutdown: watch::Receiver<bool>,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), Error> {
    let acceptor = acceptor(addr.ip(), node_ip)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Bind { addr, source })?;
    let local = listener
        .local_addr()
        .map_err(|source| Error::Bind { addr, source })?;
    let ctx = Arc::new(ctx);
    let stop = shutdown.clone();
    let task = server::accept_loop(listener, shutdown, move |stream| {
        let (acceptor, ctx, stop) = (acceptor.clone(), ctx.clone(), stop.clone());
        async move {
            let Ok(tls) = acceptor.accept(stream).await else {
                return;
            };
            let service = service_fn(move |req| {
                let (ctx, stop) = (ctx.clone(), stop.clone());
                async move { Ok::<_, Infallible>(route(&ctx, req, stop).await) }
            });
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection_with_upgrades(TokioIo::new(tls), service)
                .await;
        }
    });
    Ok((local, task))
}

/// A self-signed certificate for the bound address, the node IP, `127.0.0.1`
/// and `localhost` (the kubelet's own when it has no `tlsCertFile`).
fn acceptor(bound: IpAddr, node_ip: IpAddr) -> Result<TlsAcceptor, Error> {
    let mut names = vec!["localhost".to_owned(), "127.0.0.1".to_owned()];
    for ip in [bound, node_ip] {
        if !ip.is_unspecified() && !names.contains(&ip.to_string()) {
            names.push(ip.to_string());
        }
    }
    let cert = rcgen::generate_simple_self_signed(names)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.signing_key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(vec![CertificateDer::from(cert.cert.der().to_vec())], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

async fn route<B>(
    ctx: &Context,
    req: Request<B>,
    shutdown: watch::Receiver<bool>,
) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    if let Some(target) = streaming::Target::parse(&segments, req.uri().query()) {
        if req.method() != Method::GET && req.method() != Method::POST {
            return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed".into());
        }
        return match streaming::serve(ctx, req, target).await {
            Ok(resp) => resp.map(|b| Full::new(b).boxed_unsync()),
            Err(err) => {
                tracing::debug!(%path, error = %err, "streaming request refused");
                text(err.code(), err.to_string())
            }
        };
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed".into());
    }
    if path == "/healthz" {
        return text(StatusCode::OK, "ok".into());
    }
    if path == "/pods" || path == "/pods/" {
        return pods(ctx).await;
    }
    if path == "/metrics/resource" {
        return match crate::resource_metrics::render(&ctx.runtime).await {
            Ok(metrics) => {
                let mut resp = text(StatusCode::OK, metrics);
                resp.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static(
                        "text/plain; version=0.0.4; charset=utf-8",
                    ),
                );
                resp
            }
            Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
        };
    }
    if path == "/stats/summary" {
        return match stats_summary::summary(&ctx.runtime, &ctx.node_name, ctx.started).await {
            Ok(summary) => json(&summary),
            Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
        };
    }
    let ["containerLogs", namespace, pod, container] = segments.as_slice() else {
        return text(StatusCode::NOT_FOUND, "404 page not found\n".into());
    };
    match container_logs(ctx, req.uri().query(), namespace, pod, container, shutdown).await {
        Ok(resp) => resp,
        Err(err) => {
            tracing::debug!(%namespace, %pod, %container, error = %err, "container logs refused");
            let code = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::BAD_REQUEST);
            text(code, err.to_string())
        }
    }
}

/// Streams a container's log; the reading task ends with the log, the client
/// or the agent.
async fn container_logs(
    ctx: &Context,
    query: Option<&str>,
    namespace: &str,
    pod: &str,
    container: &str,
    shutdown: watch::Receiver<bool>,
) -> Result<Response<Body>, pod_logs::Error> {
    let query = Query::parse(query)?;
    let opened = pod_logs::open(ctx, namespace, pod, container, &query).await?;
    let (tx, rx) = mpsc::channel::<Bytes>(8);
    let runtime = ctx.runtime.clone();
    let id = opened.container_id;
    let running = move || {
        let (runtime, id) = (runtime.clone(), id.clone());
        async move { matches!(runtime.container_log(&id).await, Ok(Some(log)) if log.running) }
    };
    tokio::spawn(opened.log.stream(tx, running, shutdown).in_current_span());
    let body =
        StreamBody::new(ReceiverStream::new(rx).map(|b| Ok::<_, Infallible>(Frame::data(b))));
    let mut resp = Response::new(BodyExt::boxed_unsync(body));
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain"),
    );
    Ok(resp)
}

/// `GET /pods`: the pods bound to this node, as a `PodList` (the kubelet
/// answers from its pod manager; the agent asks the API server).
async fn pods(ctx: &Context) -> Response<Body> {
    let api: kube::Api<Pod> = kube::Api::all(ctx.client.clone());
    let params =
        kube::api::ListParams::default().fields(&format!("spec.nodeName={}", ctx.node_name));
    match api.list(&params).await {
        Ok(list) => json(&serde_json::json!({
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": list.items,
        })),
        Err(err) => text(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()),
    }
}

fn json(value: &serde_json::Value) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(value.to_string())).boxed_unsync());
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    resp
}

fn text(code: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *resp.status_mut() = code;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
