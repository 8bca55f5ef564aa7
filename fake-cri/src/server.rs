//! Starting and stopping fake-cri: the CRI socket and the control socket.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use nodeconform_cri::{ImageServiceServer, RuntimeServiceServer};
use tokio::net::UnixListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::UnixListenerStream;

use crate::authority::Normalized;
use crate::control::{self, Control};
use crate::error::StartError;
use crate::images::Catalog;
use crate::runtime::{CgroupDriver, Config, Runtime};
use crate::service::Cri;
use crate::streaming::Streaming;

/// gRPC messages up to 16 MiB, as the kubelet allows.
const MAX_MESSAGE: usize = 16 << 20;

/// Configures and starts a [`FakeCri`].
#[derive(Debug, Default, Clone)]
pub struct Builder {
    socket: Option<PathBuf>,
    control_socket: Option<PathBuf>,
    config: Config,
}

impl Builder {
    /// The CRI socket path (required).
    pub fn socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.socket = Some(path.into());
        self
    }

    /// Also serve the JSON control API on this socket.
    pub fn control_socket(mut self, path: impl Into<PathBuf>) -> Self {
        self.control_socket = Some(path.into());
        self
    }

    /// How long every image pull takes (default: none).
    pub fn image_pull_delay(mut self, delay: Duration) -> Self {
        self.config.image_pull_delay = delay;
        self
    }

    /// The cgroup driver `RuntimeConfig` reports (default: cgroupfs, like containerd).
    pub fn cgroup_driver(mut self, driver: CgroupDriver) -> Self {
        self.config.cgroup_driver = driver;
        self
    }

    /// The directory reported as the image and container filesystems' mountpoint.
    pub fn state_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.state_dir = Some(dir.into());
        self
    }

    /// What fake-cri knows of particular images: their `USER`, which tags
    /// name one image (default: nothing, every image derived from its name).
    pub fn image_catalog(mut self, catalog: Catalog) -> Self {
        self.config.image_catalog = catalog;
        self
    }

    /// The directory the host paths of CRI requests (log directories and
    /// paths, mounts' host paths) are taken from, as if the client were
    /// chrooted there (default `/`). E.g. `/proc/PID/root` for a client in a
    /// mount namespace of its own.
    pub fn host_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.config.host_root = Some(dir.into());
        self.config.defer_host_root = false;
        self
    }

    /// No host root yet: it is set once the client runs
    /// ([`FakeCri::set_host_root_to_process`]). Until then the requests that
    /// name host paths (`RunPodSandbox`, `CreateContainer`) wait, at most
    /// [`crate::HOST_ROOT_WAIT`], then fail with `UNAVAILABLE`.
    pub fn defer_host_root(mut self) -> Self {
        self.config.defer_host_root = true;
        self
    }

    /// Binds the sockets (mode 0600) and starts serving.
    pub async fn start(self) -> Result<FakeCri, StartError> {
        let socket = self.socket.ok_or(StartError::NoSocket)?;
        let runtime = Arc::new(Runtime::new(self.config));
        let (shutdown, _) = watch::channel(false);

        let listener = bind(&socket)?;
        // Bind both sockets before serving either, so a failed start leaves
        // nothing behind.
        let control_listener = match self.control_socket.as_deref().map(bind).transpose() {
            Ok(listener) => listener,
            Err(error) => {
                drop(listener);
                let _ = std::fs::remove_file(&socket);
                return Err(error);
            }
        };
        let (streaming, streaming_task) =
            match Streaming::start(Arc::clone(&runtime), shutdown.subscribe()).await {
                Ok(started) => started,
                Err(source) => {
                    drop((listener, control_listener));
                    let _ = std::fs::remove_file(&socket);
                    return Err(StartError::Streaming(source));
                }
            };
        let cri = Cri {
            runtime: Arc::clone(&runtime),
            streaming,
        };
        let grpc = tonic::transport::Server::builder()
            .add_service(
                RuntimeServiceServer::new(cri.clone())
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            )
            .add_service(
                ImageServiceServer::new(cri)
                    .max_decoding_message_size(MAX_MESSAGE)
                    .max_encoding_message_size(MAX_MESSAGE),
            )
            .serve_with_incoming_shutdown(
                UnixListenerStream::new(listener).map_ok(Normalized::new),
                stopped(shutdown.subscribe()),
            );
        let mut tasks = vec![
            streaming_task,
            tokio::spawn(async move {
                if let Err(error) = grpc.await {
                    tracing::error!(%error, "CRI server failed");
                }
            }),
        ];

        let control = Control::new(Arc::clone(&runtime));
        if let Some(listener) = control_listener {
            let app = control::router(control.clone());
            let stop = stopped(shutdown.subscribe());
            tasks.push(tokio::spawn(async move {
                if let Err(error) = axum::serve(listener, app)
                    .with_graceful_shutdown(stop)
                    .await
                {
                    tracing::error!(%error, "control server failed");
                }
            }));
        }
        tracing::info!(socket = %socket.display(), control = ?self.control_socket, "fake-cri serving");
        Ok(FakeCri {
            socket,
            control_socket: self.control_socket,
            runtime,
            control,
            shutdown,
            tasks,
        })
    }
}

async fn stopped(mut shutdown: watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

/// Binds a unix socket with mode 0600. An existing socket file is replaced
/// only when nothing listens on it.
fn bind(path: &Path) -> Result<UnixListener, StartError> {
    let err = |source| StartError::Bind {
        path: path.to_owned(),
        source,
    };
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(StartError::SocketInUse {
                    path: path.to_owned(),
                });
            }
            std::fs::remove_file(path).map_err(err)?;
        }
        Ok(_) => {
            return Err(StartError::NotASocket {
                path: path.to_owned(),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let listener = UnixListener::bind(path).map_err(err)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    Ok(listener)
}

/// A running fake-cri. Dropping it stops serving; [`FakeCri::shutdown`]
/// also waits for the servers to finish and removes the sockets.
#[derive(Debug)]
pub struct FakeCri {
    socket: PathBuf,
    control_socket: Option<PathBuf>,
    runtime: Arc<Runtime>,
    control: Control,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl FakeCri {
    /// Starts configuring a fake-cri.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The CRI endpoint as a kubelet takes it: `unix:///path/to/socket`.
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The CRI socket path.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The control socket path, if one was asked for.
    pub fn control_socket_path(&self) -> Option<&Path> {
        self.control_socket.as_deref()
    }

    /// In-process fault injection.
    pub fn control(&self) -> &Control {
        &self.control
    }

    /// Takes the host paths of later requests from `dir` (see
    /// [`Builder::host_root`]). Containers created before keep theirs.
    pub fn set_host_root(&self, dir: impl Into<PathBuf>) {
        self.runtime.host_root.set(dir.into());
    }

    /// Takes the host paths of later requests from the root of process `pid`
    /// (its mount namespace), for as long as that process lives: once it has
    /// exited, paths under it fail (`No such process`), even when a later
    /// process gets the same id. Returns the root's path.
    pub fn set_host_root_to_process(&self, pid: u32) -> std::io::Result<PathBuf> {
        self.runtime.host_root.set_process(pid)
    }

    /// Stops serving, ends every simulated process and removes the sockets.
    pub async fn shutdown(mut self) {
        self.stop();
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        self.remove_sockets();
    }

    fn stop(&self) {
        self.shutdown.send_replace(true);
        // Event streams never end by themselves; close them so the graceful
        // shutdown does not wait for subscribers.
        self.runtime.close_streams();
        self.runtime.abort_all();
    }

    fn remove_sockets(&self) {
        for path in std::iter::once(&self.socket).chain(&self.control_socket) {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for FakeCri {
    fn drop(&mut self) {
        if !self.tasks.is_empty() {
            self.stop();
            self.remove_sockets();
        }
    }
}
