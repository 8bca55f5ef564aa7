//! The running server: [`Builder`] configures and starts it on 127.0.0.1, [`ApiServer`] is
//! the handle (URL, kubeconfig, a `kube::Client`, fault hooks, shutdown). The server runs
//! on a thread of its own with a single-threaded tokio runtime; connections are served by
//! hyper (HTTP/1.1 and HTTP/2), optionally behind rustls.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

use crate::handlers::{self, Context};
use crate::registry::Registry;
use crate::version::Version;
use crate::{garbage_collector, kubeconfig, node_lifecycle, scheduler, tls};

/// Errors starting or using the server handle.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server thread could not be started.
    #[error("starting the server thread")]
    Thread(#[source] std::io::Error),
    /// The listening socket could not be bound.
    #[error("binding 127.0.0.1:{port}")]
    Bind {
        /// The requested port (0: any free one).
        port: u16,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Making the TLS identity failed.
    #[error("setting up TLS")]
    Tls(#[from] tls::Error),
    /// The client reaching kubelets could not be configured.
    #[error("setting up the kubelet client")]
    KubeletClient(#[source] tokio_rustls::rustls::Error),
    /// Seeding the initial objects failed.
    #[error("creating the initial objects")]
    Seed(#[from] crate::status::Error),
    /// The generated kubeconfig could not be loaded into a client.
    #[error("building a kube client from the generated kubeconfig")]
    Kubeconfig(#[from] kube::config::KubeconfigError),
    /// The kube client could not be built.
    #[error("building a kube client")]
    Client(#[from] kube::Error),
    /// Writing the kubeconfig file failed.
    #[error("writing the kubeconfig to {path}")]
    WriteKubeconfig {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// Configures an [`ApiServer`]; [`ApiServer::builder`] makes one.
#[derive(Debug, Clone)]
pub struct Builder {
    port: u16,
    tls: bool,
    token: Option<String>,
    node_lifecycle: Option<Duration>,
    event_window: usize,
    bookmark_interval: Duration,
    kubelet_address_types: Vec<String>,
    scheduler_node: Option<String>,
    garbage_collector: bool,
    metrics_api: bool,
    version: Version,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            port: 0,
            tls: false,
            token: None,
            node_lifecycle: None,
            event_window: 10_000,
            bookmark_interval: Duration::from_secs(10),
            kubelet_address_types: crate::kubelet_client::DEFAULT_ADDRESS_TYPES
                .map(String::from)
                .to_vec(),
            scheduler_node: None,
            garbage_collector: false,
            metrics_api: false,
            version: Version::NEWEST,
        }
    }
}

impl Builder {
    /// The port on 127.0.0.1 (default 0: a free one).
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// Serve HTTPS with a certificate made at start; its CA goes into the kubeconfig.
    pub fn tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Require `Authorization: Bearer <token>` (401 without it); `None` (default) accepts all.
    pub fn token(mut self, token: Option<String>) -> Self {
        self.token = token;
        self
    }

    /// Run the node-lifecycle rule with this grace period (upstream 40 s); `None` (default) is off.
    pub fn node_lifecycle(mut self, grace: Option<Duration>) -> Self {
        self.node_lifecycle = grace;
        self
    }

    /// How many events per resource are kept for watch replay (default 10,000); a watch
    /// from an older version gets 410 Gone.
    pub fn event_window(mut self, events: usize) -> Self {
        self.event_window = events;
        self
    }

    /// The node address types tried in order to reach a kubelet for `pods/log`
    /// (`--kubelet-preferred-address-types`; default `InternalIP,ExternalIP,Hostname`, as
    /// kubeadm configures kube-apiserver).
    pub fn kubelet_preferred_address_types(mut self, types: Vec<String>) -> Self {
        self.kubelet_address_types = types;
        self
    }

    /// Play a minimal scheduler for a one-node cluster: bind every pod created without
    /// `spec.nodeName` to `node` through `pods/binding`, as kube-scheduler does (see
    /// [`crate::scheduler`]). Off by default: clients set `nodeName` themselves.
    pub fn bind_unscheduled_pods_to(mut self, node: impl Into<String>) -> Self {
        self.scheduler_node = Some(node.into());
        self
    }

    /// Play kube-controller-manager's garbage collector for deletions that wait for it:
    /// orphan or delete an owner's dependents, then remove its `orphan` or
    /// `foregroundDeletion` finalizer (see [`crate::garbage_collector`]). Off by default, as
    /// on a kube-apiserver without controllers, where such objects stay.
    pub fn garbage_collector(mut self, on: bool) -> Self {
        self.garbage_collector = on;
        self
    }

    /// Serve `metrics.k8s.io/v1beta1` as metrics-server adds it, from the nodes'
    /// `/metrics/resource` (see [`crate::metrics_api`]), so `kubectl top` works. Off by
    /// default, as on a kube-apiserver without metrics-server.
    pub fn metrics_api(mut self, on: bool) -> Self {
        self.metrics_api = on;
        self
    }

    /// The release to answer as (`--emulate-version`; default [`Version::NEWEST`]): its
    /// `/version` and the rules that differ between releases (see [`Version`]).
    pub fn emulate_version(mut self, version: Version) -> Self {
        self.version = version;
        self
    }

    /// How often an idle watch with `allowWatchBookmarks` gets a `BOOKMARK` (default 10 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval.max(Duration::from_millis(10));
        self
    }

    /// Binds, seeds the initial namespaces and starts serving on a thread of its own (a
    /// single-threaded tokio runtime), so the server neither depends on nor competes with
    /// the caller's runtime: a test that blocks its own thread cannot stall the server.
    pub async fn start(self) -> Result<ApiServer, Error> {
        let bind_err = |source| Error::Bind {
            port: self.port,
            source,
        };
        let listener = std::net::TcpListener::bind(("127.0.0.1", self.port)).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let identity = if self.tls {
            Some(tls::generate()?)
        } else {
            None
        };
        let ca_pem = identity.as_ref().map(|i| i.ca_pem.clone());
        let scheme = if self.tls { "https" } else { "http" };
        let url = format!("{scheme}://{addr}");
        let kubeconfig = kubeconfig::render(&url, ca_pem.as_deref(), self.token.as_deref());
        let (closer, _) = tokio::sync::watch::channel(0u64);
        let (stop, _) = tokio::sync::watch::channel(0u64);
        let ctx = Arc::new(Context {
            registry: Registry::new(self.event_window, ca_pem.unwrap_or_default(), self.version)?,
            token: self.token.clone(),
            address: addr.to_string(),
            closer,
            bookmark_interval: self.bookmark_interval,
            kubelet: crate::kubelet_client::KubeletClient::new(self.kubelet_address_types.clone())
                .map_err(Error::KubeletClient)?,
            metrics: self
                .metrics_api
                .then(crate::metrics_api::MetricsServer::default),
        });
        // Written as kube-apiserver's own controller writes it (its manager
        // is the binary and version: `kube-apiserver-1.36.2`).
        let controller = crate::managed_fields::Writer::named(format!(
            "kube-apiserver-{}",
            self.version.git_version().trim_start_matches('v')
        ));
        ctx.registry.create_mode(
            &crate::resources::SERVICES,
            "default",
            crate::service::master(addr.port()),
            false,
            &controller,
        )?;
        let acceptor = identity.map(|i| i.acceptor);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Error::Thread)?;
        let (server_ctx, stop_rx, grace) = (ctx.clone(), stop.subscribe(), self.node_lifecycle);
        let scheduler_node = self.scheduler_node.clone();
        let garbage_collector = self.garbage_collector;
        let thread = std::thread::Builder::new()
            .name("nodeconform-apiserver".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = match TcpListener::from_std(listener) {
                        Ok(l) => l,
                        Err(e) => {
                            return tracing::error!(error = %e, "cannot serve the bound socket");
                        }
                    };
                    let lifecycle = grace.map(|grace| {
                        tokio::spawn(node_lifecycle::run(
                            server_ctx.clone(),
                            grace,
                            stop_rx.clone(),
                        ))
                    });
                    let scheduler = scheduler_node.map(|node| {
                        tokio::spawn(scheduler::run(server_ctx.clone(), node, stop_rx.clone()))
                    });
                    let collector = garbage_collector.then(|| {
                        tokio::spawn(garbage_collector::run(server_ctx.clone(), stop_rx.clone()))
                    });
                    accept_loop(listener, acceptor, server_ctx, stop_rx).await;
                    for task in [lifecycle, scheduler, collector].into_iter().flatten() {
                        let _ = task.await;
                    }
                })
            })
            .map_err(Error::Thread)?;
        let parsed = kube::config::Kubeconfig::from_yaml(&kubeconfig)?;
        let config = kube::Config::from_custom_kubeconfig(parsed, &Default::default()).await?;
        let client = kube::Client::try_from(config)?;
        tracing::info!(%url, "nodeconform-apiserver serving");
        Ok(ApiServer {
            url,
            addr,
            kubeconfig,
            client,
            ctx,
            stop,
            thread: Some(thread),
        })
    }
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: Option<TlsAcceptor>,
    ctx: Arc<Context>,
    mut stop: tokio::sync::watch::Receiver<u64>,
) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    connections.spawn(serve_connection(stream, acceptor.clone(), ctx.clone()));
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    connections.abort_all();
    while connections.join_next().await.is_some() {}
}

async fn serve_connection(stream: TcpStream, acceptor: Option<TlsAcceptor>, ctx: Arc<Context>) {
    let _ = stream.set_nodelay(true);
    let service = service_fn(move |req| {
        let ctx = ctx.clone();
        async move { Ok::<_, std::convert::Infallible>(handlers::handle(ctx, req).await) }
    });
    let builder = auto::Builder::new(TokioExecutor::new());
    let result = match acceptor {
        None => {
            builder
                .serve_connection_with_upgrades(TokioIo::new(stream), service)
                .await
        }
        Some(acceptor) => match acceptor.accept(stream).await {
            Ok(tls) => {
                builder
                    .serve_connection_with_upgrades(TokioIo::new(tls), service)
                    .await
            }
            Err(e) => {
                tracing::debug!(error = %e, "TLS handshake failed");
                return;
            }
        },
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}

/// A running API server double.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use k8s_openapi::api::core::v1::Pod;
/// let api = nodeconform_apiserver::ApiServer::builder().start().await?;
/// let pods: kube::Api<Pod> = kube::Api::namespaced(api.client(), "default");
/// println!("{} pods at {}", pods.list(&Default::default()).await?.items.len(), api.url());
/// api.shutdown().await;
/// # Ok(()) }
/// ```
pub struct ApiServer {
    url: String,
    addr: SocketAddr,
    kubeconfig: String,
    client: kube::Client,
    ctx: Arc<Context>,
    stop: tokio::sync::watch::Sender<u64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ApiServer {
    /// A builder with the defaults: 127.0.0.1, a free port, plain HTTP, no auth, no node lifecycle.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The base URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A kubeconfig (YAML) for this server, with its CA and token when those are on.
    pub fn kubeconfig(&self) -> String {
        self.kubeconfig.clone()
    }

    /// Writes [`ApiServer::kubeconfig`] to `path` (mode 0600: it may hold the token).
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let err = |source| Error::WriteKubeconfig {
            path: path.to_path_buf(),
            source,
        };
        std::fs::write(path, &self.kubeconfig).map_err(err)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
        }
        Ok(())
    }

    /// A `kube::Client` configured from the kubeconfig.
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Fault injection: ends every open watch now, as a server restart or a proxy timeout
    /// would; clients resume from their last `resourceVersion`.
    pub fn close_watches(&self) {
        self.ctx.closer.send_modify(|n| *n += 1);
    }

    /// Fault injection: forgets the event history (like an etcd compaction), so a watch
    /// resuming from any earlier version gets 410 Gone.
    pub fn compact(&self) {
        self.ctx.registry.store.compact();
    }

    /// The current global `resourceVersion`.
    pub fn resource_version(&self) -> u64 {
        self.ctx.registry.store.rv()
    }

    /// Stops serving: ends watches, closes connections and the server thread, and waits
    /// for it (the port is free when this returns).
    pub async fn shutdown(mut self) {
        self.signal_stop();
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    fn signal_stop(&self) {
        self.stop.send_modify(|n| *n += 1);
        self.ctx.closer.send_modify(|n| *n += 1);
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}
