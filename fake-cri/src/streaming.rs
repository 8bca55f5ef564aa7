//! The CRI streaming server: `Exec`, `Attach` and `PortForward` answer with
//! a URL on it, as containerd's does (`k8s.io/kubelet/pkg/cri/streaming`):
//! plain HTTP on 127.0.0.1 and a port of its own, one path per request kind
//! and a single-use token that expires after a minute. The kubelet proxies
//! `kubectl exec`/`attach`/`port-forward` there; `crictl` connects directly.
//!
//! The protocols are [`nodeconform_stream`]'s: remote commands run in the
//! container's interpreter, forwarded ports connect to the pod's address,
//! where the simulated servers listen.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use nodeconform_cri::v1;
use nodeconform_stream::remotecommand::{self, Options, Outcome};
use nodeconform_stream::{portforward, upgrade, websocket};
use rand::RngExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tonic::Status;

use crate::runtime::Runtime;
use crate::script::{Input, Output, Stream};

/// How long a URL stays valid (containerd's `CacheTTL`).
const TOKEN_TTL: Duration = Duration::from_secs(60);
/// How many URLs may wait at once (`MaxInFlight`).
const MAX_IN_FLIGHT: usize = 1000;

type Body = Full<Bytes>;

/// A request waiting for its client to connect.
#[derive(Debug, Clone)]
enum Cached {
    Exec(v1::ExecRequest),
    Attach(v1::AttachRequest),
    PortForward(v1::PortForwardRequest),
}

impl Cached {
    fn path(&self) -> &'static str {
        match self {
            Cached::Exec(_) => "exec",
            Cached::Attach(_) => "attach",
            Cached::PortForward(_) => "portforward",
        }
    }
}

/// The streaming server's handle: hands out URLs.
#[derive(Debug)]
pub(crate) struct Streaming {
    addr: SocketAddr,
    cache: Mutex<HashMap<String, (Cached, Instant)>>,
}

impl Streaming {
    /// Binds 127.0.0.1 on a free port and serves until `shutdown`.
    pub(crate) async fn start(
        runtime: Arc<Runtime>,
        mut shutdown: watch::Receiver<bool>,
    ) -> std::io::Result<(Arc<Self>, tokio::task::JoinHandle<()>)> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let streaming = Arc::new(Self {
            addr: listener.local_addr()?,
            cache: Mutex::new(HashMap::new()),
        });
        let server = Arc::clone(&streaming);
        let task = tokio::spawn(async move {
            loop {
                let conn = tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((conn, _)) => conn,
                        Err(_) => continue,
                    },
                    _ = shutdown.wait_for(|stop| *stop) => return,
                };
                let (server, runtime) = (Arc::clone(&server), Arc::clone(&runtime));
                let service = service_fn(move |req| {
                    let (server, runtime) = (Arc::clone(&server), Arc::clone(&runtime));
                    async move { Ok::<_, Infallible>(server.serve(req, runtime)) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), service)
                        .with_upgrades(),
                );
            }
        });
        Ok((streaming, task))
    }

    fn insert(&self, request: Cached) -> Result<String, Status> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        cache.retain(|_, (_, at)| now.duration_since(*at) < TOKEN_TTL);
        if cache.len() >= MAX_IN_FLIGHT {
            return Err(Status::resource_exhausted(
                "maximum number of in-flight requests exceeded",
            ));
        }
        let token: [u8; 8] = rand::rng().random();
        let token: String = token.iter().map(|b| format!("{b:02x}")).collect();
        let url = format!("http://{}/{}/{token}", self.addr, request.path());
        cache.insert(token, (request, now));
        Ok(url)
    }

    fn consume(&self, token: &str) -> Option<Cached> {
        let mut cache = self.cache.lock().unwrap_or_else(|e| e.into_inner());
        let (request, at) = cache.remove(token)?;
        (at.elapsed() < TOKEN_TTL).then_some(request)
    }

    /// The URL of an `Exec` (upstream's `validateExecRequest` first).
    pub(crate) fn exec(&self, request: v1::ExecRequest) -> Result<String, Status> {
        check_channels(
            &request.container_id,
            request.tty,
            request.stdin,
            request.stdout,
            request.stderr,
            "or",
        )?;
        self.insert(Cached::Exec(request))
    }

    /// The URL of an `Attach`.
    pub(crate) fn attach(&self, request: v1::AttachRequest) -> Result<String, Status> {
        check_channels(
            &request.container_id,
            request.tty,
            request.stdin,
            request.stdout,
            request.stderr,
            "and",
        )?;
        self.insert(Cached::Attach(request))
    }

    /// The URL of a `PortForward`.
    pub(crate) fn port_forward(&self, request: v1::PortForwardRequest) -> Result<String, Status> {
        if request.pod_sandbox_id.is_empty() {
            return Err(Status::invalid_argument("missing required pod_sandbox_id"));
        }
        self.insert(Cached::PortForward(request))
    }

    fn serve<B>(&self, mut req: Request<B>, runtime: Arc<Runtime>) -> Response<Body> {
        let mut segments = req.uri().path().trim_start_matches('/').splitn(2, '/');
        let (kind, token) = (
            segments.next().unwrap_or_default(),
            segments.next().unwrap_or_default(),
        );
        let cached = match self.consume(token) {
            Some(cached)
                if cached.path() == kind
                    && matches!(*req.method(), http::Method::GET | http::Method::POST) =>
            {
                cached
            }
            _ => return text(StatusCode::NOT_FOUND, "404 page not found\n"),
        };
        let carrier = if upgrade::is_websocket(&req) {
            // `wsstream`'s channel protocols, which containerd's streaming
            // server serves beside SPDY (never `v5`: that is kube-apiserver's).
            let protocols: &[&str] = match cached {
                Cached::PortForward(_) => &PORT_FORWARD_WEBSOCKET_PROTOCOLS,
                _ => &remotecommand::WEBSOCKET_PROTOCOLS,
            };
            websocket::accept(&mut req, protocols).map(Carrier::WebSocket)
        } else {
            let protocols: &[&str] = match cached {
                Cached::PortForward(_) => &portforward::PROTOCOLS,
                _ => &remotecommand::PROTOCOLS,
            };
            upgrade::spdy(&mut req, protocols).map(Carrier::Spdy)
        };
        let carrier = match carrier {
            Ok(carrier) => carrier,
            Err(refusal) => return refusal.response(),
        };
        let response = match &carrier {
            Carrier::Spdy(upgrade) => upgrade.response(),
            Carrier::WebSocket(upgrade) => upgrade.response(),
        };
        match cached {
            Cached::Exec(request) => {
                let options = options(request.stdin, request.stdout, request.stderr, request.tty);
                tokio::spawn(async move {
                    if let Ok(channels) = carrier.channels(options).await {
                        exec(&runtime, &request, channels).await;
                    }
                });
            }
            Cached::Attach(request) => {
                let options = options(request.stdin, request.stdout, request.stderr, request.tty);
                tokio::spawn(async move {
                    if let Ok(channels) = carrier.channels(options).await {
                        attach(&runtime, &request, channels).await;
                    }
                });
            }
            Cached::PortForward(request) => {
                let id = request.pod_sandbox_id.clone();
                let dial = dialer(runtime, id.clone());
                match carrier {
                    Carrier::Spdy(upgrade) => {
                        tokio::spawn(portforward::serve(upgrade, id, dial));
                    }
                    Carrier::WebSocket(upgrade) => {
                        // Over WebSocket the ports are the request's.
                        let ports = request.port.iter().filter_map(|p| u16::try_from(*p).ok());
                        let ports = ports.collect();
                        tokio::spawn(portforward::serve_websocket(upgrade, ports, id, dial));
                    }
                }
            }
        }
        response
    }
}

/// An accepted upgrade, over either carrier.
enum Carrier {
    Spdy(upgrade::Upgrade),
    WebSocket(websocket::Upgrade),
}

impl Carrier {
    /// A remote command's channels, once the client is connected.
    async fn channels(
        self,
        options: Options,
    ) -> Result<remotecommand::Channels, remotecommand::Error> {
        match self {
            Carrier::Spdy(upgrade) => remotecommand::accept(upgrade, options).await,
            Carrier::WebSocket(upgrade) => remotecommand::accept_websocket(upgrade, options).await,
        }
    }
}

/// The WebSocket protocols of port forwarding at a runtime's streaming server.
const PORT_FORWARD_WEBSOCKET_PROTOCOLS: [&str; 3] =
    ["", "v4.channel.k8s.io", "v4.base64.channel.k8s.io"];

/// Connects to a port of sandbox `id`, on its address.
fn dialer(
    runtime: Arc<Runtime>,
    id: String,
) -> impl Fn(
    u16,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<TcpStream>> + Send>>
+ Send
+ Sync
+ 'static {
    move |port| {
        let address = runtime.sandbox_address(&id);
        Box::pin(async move {
            let ip = address.map_err(|e| std::io::Error::other(e.to_string()))?;
            TcpStream::connect((ip, port)).await.map_err(|e| {
                std::io::Error::new(e.kind(), format!("dial tcp {ip}:{port}: connect: {e}"))
            })
        })
    }
}

/// Runs an exec on its channels and reports the outcome.
async fn exec(runtime: &Runtime, request: &v1::ExecRequest, mut channels: remotecommand::Channels) {
    let outcome = run_exec(runtime, request, &mut channels).await;
    channels.finish(outcome).await;
}

/// Attaches to a container on its channels and reports the outcome.
async fn attach(
    runtime: &Arc<Runtime>,
    request: &v1::AttachRequest,
    mut channels: remotecommand::Channels,
) {
    let stdin = channels.stdin.take();
    let outcome = runtime
        .attach(
            &request.container_id,
            stdin,
            channels.output(false),
            channels.output(true),
        )
        .await;
    channels.finish(outcome).await;
}

/// Upstream's checks of an exec or attach request's channels.
fn check_channels(
    container: &str,
    tty: bool,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    join: &str,
) -> Result<(), Status> {
    if container.is_empty() {
        return Err(Status::invalid_argument("missing required container_id"));
    }
    if tty && stderr {
        return Err(Status::invalid_argument(
            "tty and stderr cannot both be true",
        ));
    }
    if !stdin && !stdout && !stderr {
        return Err(Status::invalid_argument(format!(
            "one of stdin, stdout, {join} stderr must be set"
        )));
    }
    Ok(())
}

fn options(stdin: bool, stdout: bool, stderr: bool, tty: bool) -> Options {
    Options {
        stdin,
        stdout,
        stderr: stderr && !tty,
        tty,
    }
}

/// Runs an exec with its output sent on the streams as it is written.
async fn run_exec(
    runtime: &Runtime,
    request: &v1::ExecRequest,
    channels: &mut remotecommand::Channels,
) -> Outcome {
    let mut stdin = channels.stdin.take().map(Input::new);
    let (tx, mut rx) = mpsc::unbounded_channel::<(Stream, Vec<u8>)>();
    let (stdout, stderr) = (channels.output(false), channels.output(true));
    let pump = tokio::spawn(async move {
        while let Some((stream, data)) = rx.recv().await {
            let writer = match stream {
                Stream::Stdout => stdout.as_ref(),
                Stream::Stderr => stderr.as_ref(),
            };
            if let Some(writer) = writer {
                let _ = writer.write(data).await;
            }
        }
    });
    let mut output = Sender(tx);
    let result = runtime
        .exec(
            "Exec",
            &request.container_id,
            &request.cmd,
            &mut output,
            stdin.as_mut(),
        )
        .await;
    drop(output);
    let _ = pump.await;
    match result {
        Ok(code) => Outcome::Exited {
            command: request.cmd.clone(),
            code,
        },
        Err(error) => Outcome::Failed(format!("error executing command in container: {error}")),
    }
}

/// An [`Output`] that hands what is written to the pump.
struct Sender(mpsc::UnboundedSender<(Stream, Vec<u8>)>);

impl Output for Sender {
    fn write(&mut self, stream: Stream, data: &[u8]) {
        let _ = self.0.send((stream, data.to_vec()));
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp
}
