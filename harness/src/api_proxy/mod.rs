//! A fault-injecting proxy between a node's agent and its API server: the `fault: {api: …}`
//! steps of the cases.
//!
//! A case that `requires: [api-faults]` gets one on its node ([`crate::backend::node`]):
//! the agent's kubeconfig (or, for the in-process reference agent, its client) points at
//! the proxy on 127.0.0.1, and the proxy sends every request on through the harness's own
//! client of the cluster (`kube::Client::send`: its server, CA and credentials) and streams
//! the answer back. So the faults reach the node's agent and nothing else — not the other
//! cases' nodes, not the harness's own reads of what the agent did — and the same cases
//! run on the embedded API server double and on a kube-apiserver.
//!
//! [`rules`] decides what happens to a request: forwarded later (latency), answered with
//! an error as kube-apiserver answers it (429 with `Retry-After`, 5xx `Status`), its
//! connection closed (reset), or, for a watch, `410 Expired`. [`ApiProxy::end_watches`]
//! ends every open watch mid-stream (as an API server's restart or a load balancer's
//! timeout does) and [`ApiProxy::restart`] plays a restart that keeps the server's state:
//! open watches end and every connection is closed at once until it is up again.

pub mod rules;
#[cfg(all(test, feature = "embedded"))]
mod tests;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, Full, StreamBody, combinators::UnsyncBoxBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::time::Instant;

use rules::Rules;
pub use rules::{Action, Class, Scope, Verb};

/// The error type of the bodies the proxy answers with.
type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Body = UnsyncBoxBody<Bytes, BoxError>;

/// Errors of the proxy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Its listening socket on 127.0.0.1 could not be bound.
    #[error("binding the API proxy's socket on 127.0.0.1")]
    Bind(#[source] std::io::Error),
    /// Its kubeconfig could not be written.
    #[error("writing the API proxy's kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A client of the proxy could not be built.
    #[error("a client of the API proxy at {url}")]
    Client {
        /// The proxy's URL.
        url: String,
        /// The cause.
        #[source]
        source: Box<kube::Error>,
    },
}

/// What the serving task and the connections share with the handle.
struct Shared {
    upstream: kube::Client,
    /// Held only to read or change the rules, never across an `.await`.
    rules: Mutex<Rules>,
    /// Bumped to end every open watch.
    watches: watch::Sender<u64>,
    /// Until when the server is down (a restart): connections are closed at once.
    down_until: watch::Sender<Option<Instant>>,
}

impl Shared {
    fn is_down(&self) -> bool {
        self.down_until
            .borrow()
            .is_some_and(|until| Instant::now() < until)
    }
}

/// A running proxy; stopped when dropped.
pub struct ApiProxy {
    url: http::Uri,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
}

impl ApiProxy {
    /// Starts a proxy on a free port of 127.0.0.1 that sends every request on through
    /// `upstream`.
    pub async fn start(upstream: kube::Client) -> Result<ApiProxy, Error> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(Error::Bind)?;
        let addr = listener.local_addr().map_err(Error::Bind)?;
        let shared = Arc::new(Shared {
            upstream,
            rules: Mutex::new(Rules::default()),
            watches: watch::channel(0).0,
            down_until: watch::channel(None).0,
        });
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(serve(listener, shared.clone(), stopped));
        let url = http::Uri::builder()
            .scheme("http")
            .authority(addr.to_string())
            .path_and_query("/")
            .build()
            .map_err(|e| Error::Bind(std::io::Error::other(e)))?;
        Ok(ApiProxy { url, shared, stop })
    }

    /// Its URL, `http://127.0.0.1:<port>/`.
    pub fn url(&self) -> &http::Uri {
        &self.url
    }

    /// A kubeconfig that reaches the cluster through the proxy.
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: proxy\n  cluster:\n    server: {}\nusers:\n- name: agent\n  user: {{}}\ncontexts:\n- name: proxy\n  context:\n    cluster: proxy\n    user: agent\ncurrent-context: proxy\n",
            self.url
        )
    }

    /// Writes [`Self::kubeconfig`] to `path`.
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), Error> {
        std::fs::write(path, self.kubeconfig()).map_err(|source| Error::Kubeconfig {
            path: path.display().to_string(),
            source,
        })
    }

    /// A client of the cluster through the proxy (for an agent in this process).
    pub fn client(&self) -> Result<kube::Client, Error> {
        kube::Client::try_from(kube::Config::new(self.url.clone())).map_err(|source| {
            Error::Client {
                url: self.url.to_string(),
                source: Box::new(source),
            }
        })
    }

    /// Adds a fault rule, in force from now.
    pub fn inject(&self, scope: Scope, action: Action) {
        self.rules().add(scope, action, Instant::now().into_std());
    }

    /// Ends every fault rule (not a restart under way).
    pub fn clear(&self) {
        self.rules().clear();
    }

    /// Ends every open watch now: the client sees its stream end, as when an API
    /// server restarts or a load balancer times the connection out, and watches again.
    pub fn end_watches(&self) {
        self.shared.watches.send_modify(|n| *n += 1);
    }

    /// An API server restart that keeps its state: open watches end, and for `down` every
    /// connection is closed as soon as it is made (and open ones at once).
    pub fn restart(&self, down: Duration) {
        self.shared
            .down_until
            .send_replace(Some(Instant::now() + down));
        self.end_watches();
    }

    fn rules(&self) -> std::sync::MutexGuard<'_, Rules> {
        self.shared
            .rules
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for ApiProxy {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        self.end_watches();
    }
}

/// Accepts connections until `stop`, closing those made while the server is down.
async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                if shared.is_down() {
                    continue;
                }
                connections.spawn(connection(stream, shared.clone()));
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
}

/// Serves one connection until it ends or the server goes down.
async fn connection(stream: tokio::net::TcpStream, shared: Arc<Shared>) {
    let _ = stream.set_nodelay(true);
    let mut down = shared.down_until.subscribe();
    let service = {
        let shared = shared.clone();
        service_fn(move |request| handle(shared.clone(), request))
    };
    let builder = auto::Builder::new(TokioExecutor::new());
    let serving = builder.serve_connection(TokioIo::new(stream), service);
    tokio::select! {
        _ = serving => {}
        // A restart drops the connection mid-request, as the server's exit does.
        _ = down.wait_for(|until| until.is_some_and(|u| Instant::now() < u)) => {}
    }
}

/// The request's connection is closed without an answer.
#[derive(Debug, thiserror::Error)]
#[error("connection reset by a fault")]
struct Reset;

async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Result<Response<Body>, Reset> {
    if shared.is_down() {
        return Err(Reset);
    }
    let class = Class::of(request.method(), request.uri());
    let action = shared
        .rules
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take(&class, Instant::now().into_std());
    match action {
        None => {}
        Some(Action::Delay(delay)) => tokio::time::sleep(delay).await,
        Some(Action::Error { code, retry_after }) => {
            return Ok(full(rules::error_response(code, retry_after)));
        }
        Some(Action::Reset) => return Err(Reset),
        Some(Action::ExpireWatch) => return Ok(full(rules::expired_watch(request.uri()))),
    }
    Ok(forward(&shared, request, class.verb == Some(Verb::Watch)).await)
}

fn full(response: Response<Bytes>) -> Response<Body> {
    response.map(|body| {
        Full::new(body)
            .map_err(|never| match never {})
            .boxed_unsync()
    })
}

/// Headers that belong to one connection, not to the request (RFC 9110 §7.6.1), and those
/// the harness's client sets itself (its server and credentials).
const NOT_FORWARDED: [http::HeaderName; 6] = [
    http::header::CONNECTION,
    http::header::TRANSFER_ENCODING,
    http::header::UPGRADE,
    http::header::HOST,
    http::header::AUTHORIZATION,
    http::header::CONTENT_LENGTH,
];

/// Sends `request` on and streams the answer back; a watch's answer ends when the
/// watches are ended. An upstream that cannot be reached is a 503 from here, as an
/// aggregator or load balancer in front of kube-apiserver answers.
async fn forward(shared: &Shared, request: Request<Incoming>, watch: bool) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(e) => {
            tracing::debug!(error = %e, "the agent's request body ended early");
            return full(rules::error_response(http::StatusCode::BAD_REQUEST, None));
        }
    };
    let mut outgoing = Request::builder()
        .method(parts.method)
        .uri(parts.uri.path_and_query().map_or("/", |p| p.as_str()));
    for (name, value) in &parts.headers {
        if !NOT_FORWARDED.contains(name) {
            outgoing = outgoing.header(name, value);
        }
    }
    let Ok(outgoing) = outgoing.body(kube::client::Body::from(body.to_vec())) else {
        return full(rules::error_response(http::StatusCode::BAD_REQUEST, None));
    };
    let answer = match shared.upstream.send(outgoing).await {
        Ok(answer) => answer,
        Err(e) => {
            tracing::debug!(error = %e, "the API server did not answer the proxy");
            return full(rules::error_response(
                http::StatusCode::SERVICE_UNAVAILABLE,
                None,
            ));
        }
    };
    let (mut parts, body) = answer.into_parts();
    for name in &NOT_FORWARDED[..3] {
        parts.headers.remove(name);
    }
    let body: Body = if watch {
        until_ended(body, shared.watches.subscribe())
    } else {
        body.map_err(BoxError::from).boxed_unsync()
    };
    Response::from_parts(parts, body)
}

/// `body` until it ends or `ended` changes.
fn until_ended(body: kube::client::Body, ended: watch::Receiver<u64>) -> Body {
    let frames = futures::stream::unfold((body, ended), |(mut body, mut ended)| async move {
        tokio::select! {
            _ = ended.changed() => None,
            frame = body.frame() => match frame? {
                Ok(frame) => Some((Ok::<Frame<Bytes>, BoxError>(frame), (body, ended))),
                Err(e) => Some((Err(BoxError::from(e)), (body, ended))),
            },
        }
    });
    BodyExt::boxed_unsync(StreamBody::new(frames.boxed()))
}
