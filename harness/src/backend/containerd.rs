//! A real runtime for one node: containerd + runc, with a CNI bridge, in namespaces
//! the harness makes for the node, and the node's images loaded from archives.
//!
//! Everything of it is the node's own, so nodes side by side cannot see each other (two
//! agents on one containerd remove each other's pods) and nothing is left on the host:
//!
//! - **files**: containerd's root, state, socket, configuration and log, and the CNI
//!   configuration, under the node's directory (`containerd/`);
//! - **network**: a namespace of the node's ([`super::netns`]) with only its loopback;
//!   the bridge and the pods' addresses (10.88.0.0/16) live there, and no route leads
//!   off the machine. The agent runs inside too, reaching the API server through a
//!   forwarder on the namespace's loopback;
//! - **mounts**: a mount namespace of the node's ([`super::mount_ns`]), with its own
//!   `/run` (containerd's pod network namespaces, runc's state), `/var/log` and
//!   `/var/lib` (the CNI plugins' leases), so every mount containerd makes (image
//!   layers, `/dev/shm`, the pods' namespaces) ends with the namespace. The agent
//!   joins it: containerd bind-mounts volumes by the agent's host paths;
//! - **processes**: at [`Containerd::stop`] every pod sandbox is stopped and removed
//!   through the CRI, then containerd ends; a shim still left is killed.
//!
//! containerd 1.6 (Debian's) with `restrict_oom_score_adj`: a process without
//! CAP_SYS_RESOURCE (a container sandbox such as this machine's) cannot lower an
//! `oom_score_adj`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nodeconform_cri::v1;
use nodeconform_cri::v1::runtime_service_client::RuntimeServiceClient;

use super::mount_ns::HostPaths;
use super::netns::NetNs;
use crate::images::registry::{self, Registry};

/// How long containerd has to serve the CRI after it starts.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// The sandbox image: kubelet 1.28's default, and the reference agent's.
pub const SANDBOX_IMAGE: &str = "registry.k8s.io/pause:3.9";
/// The pods' subnet on the node's bridge.
pub const POD_SUBNET: &str = "10.88.0.0/16";

/// Why a node's containerd cannot run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A program it needs is missing.
    #[error(
        "`{program}` was not found on PATH (Debian: apt-get install containerd runc containernetworking-plugins)"
    )]
    Missing {
        /// The program.
        program: &'static str,
    },
    /// A program an environment variable names is not there.
    #[error("{var} names {}, which does not exist", path.display())]
    Given {
        /// The variable.
        var: &'static str,
        /// The missing file or directory.
        path: PathBuf,
    },
    /// A file or directory of the node could not be made.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The node's namespaces could not be made.
    #[error("preparing the node's mount namespace")]
    MountNs(#[from] super::mount_ns::Error),
    /// containerd did not serve the CRI in time, or exited.
    #[error("containerd did not start ({reason}); its log ends:\n{log}")]
    NotStarted {
        /// Why.
        reason: String,
        /// The end of containerd's log.
        log: String,
    },
    /// An image archive could not be imported.
    #[error("importing {} into containerd: {output}", archive.display())]
    Import {
        /// The archive.
        archive: PathBuf,
        /// What `ctr` printed.
        output: String,
    },
}

/// The environment variable naming a directory with another containerd (`containerd`,
/// `containerd-shim-runc-v2`, `ctr`), such as a containerd 2.x built outside nodeconform.
pub const CONTAINERD_DIR_ENV: &str = "NODECONFORM_CONTAINERD_DIR";
/// The environment variable naming another runc binary.
pub const RUNC_ENV: &str = "NODECONFORM_RUNC";

/// Where the programs are: Debian's packages put them on PATH, the CNI plugins in
/// `/usr/lib/cni`; [`CONTAINERD_DIR_ENV`] and [`RUNC_ENV`] name others.
#[derive(Debug, Clone)]
pub struct Programs {
    /// `containerd`.
    pub containerd: PathBuf,
    /// `ctr`, for importing image archives.
    pub ctr: PathBuf,
    /// The directory containerd finds its shim in first, when it is not on PATH.
    pub shim_dir: Option<PathBuf>,
    /// `runc`, which the shim runs (its `BinaryName`).
    pub runc: PathBuf,
    /// The CNI plugins' directory.
    pub cni_bin_dir: PathBuf,
}

fn on_path(program: &'static str) -> Result<PathBuf, Error> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .ok_or(Error::Missing { program })
}

impl Programs {
    /// Finds containerd, ctr, runc and the CNI plugins (bridge, host-local, loopback).
    pub fn find() -> Result<Self, Error> {
        // A path an environment variable names must be there: no silent fall-back to
        // the programs on PATH.
        let given = |var: &'static str| match std::env::var_os(var) {
            Some(path) if !path.is_empty() => {
                let path = PathBuf::from(path);
                if path.exists() {
                    Ok(Some(path))
                } else {
                    Err(Error::Given { var, path })
                }
            }
            _ => Ok(None),
        };
        let (containerd, ctr, shim_dir) = match given(CONTAINERD_DIR_ENV)? {
            Some(dir) => {
                let program = |name: &'static str| {
                    let path = dir.join(name);
                    if path.is_file() {
                        Ok(path)
                    } else {
                        Err(Error::Given {
                            var: CONTAINERD_DIR_ENV,
                            path,
                        })
                    }
                };
                program("containerd-shim-runc-v2")?;
                (program("containerd")?, program("ctr")?, Some(dir))
            }
            None => (on_path("containerd")?, on_path("ctr")?, None),
        };
        let runc = match given(RUNC_ENV)? {
            Some(runc) => runc,
            None => on_path("runc")?,
        };
        let cni_bin_dir = ["/usr/lib/cni", "/opt/cni/bin"]
            .iter()
            .map(PathBuf::from)
            .find(|d| d.join("bridge").is_file() && d.join("host-local").is_file())
            .ok_or(Error::Missing {
                program: "the CNI bridge plugin",
            })?;
        Ok(Self {
            containerd,
            ctr,
            shim_dir,
            runc,
            cni_bin_dir,
        })
    }
}

/// What a node's containerd is started with.
#[derive(Debug, Clone)]
pub struct Options<'a> {
    /// The programs.
    pub programs: &'a Programs,
    /// The node's directory; containerd's files go to `containerd/` below it.
    pub dir: &'a Path,
    /// The image archives to import ([`crate::images::Archives::to_import`]).
    pub images: &'a [PathBuf],
    /// The registry of those archives, which the node's containerd pulls from.
    pub registry: Option<&'a Registry>,
}

/// A node's running containerd.
pub struct Containerd {
    child: tokio::process::Child,
    socket: PathBuf,
    netns: Arc<NetNs>,
    log: PathBuf,
}

/// containerd's configuration for one node.
fn config(dir: &Path, programs: &Programs) -> String {
    let d = dir.display();
    format!(
        r#"version = 2
root = "{d}/root"
state = "{d}/state"
# Plugins a node of the harness's never uses: other snapshotters, tracing, and /opt/containerd.
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing",
  "io.containerd.internal.v1.opt",
]

[grpc]
  address = "{d}/containerd.sock"

[ttrpc]
  address = "{d}/containerd.sock.ttrpc"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{SANDBOX_IMAGE}"
  # No CAP_SYS_RESOURCE in a container sandbox: a negative oom_score_adj cannot be set.
  restrict_oom_score_adj = true
  # The streaming server (exec, attach, port-forward) on the node namespace's loopback, at
  # containerd's usual port: below the ephemeral range, where the agent's port (the same
  # number as its forwarder's free port on the host) and the API server's are.
  stream_server_address = "127.0.0.1"
  stream_server_port = "10010"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = "{runc}"
  [plugins."io.containerd.grpc.v1.cri".registry]
    # hosts.toml per registry: the harness's registry of the image archives (none without).
    config_path = "{d}/certs.d"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni}"
    conf_dir = "{d}/cni"
    max_conf_num = 1
"#,
        cni = programs.cni_bin_dir.display(),
        runc = programs.runc.display(),
    )
}

/// The pod network: a bridge with host-local addresses, in the node's namespace.
fn cni_config() -> String {
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "nodeconform",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "ranges": [[{{"subnet": "{POD_SUBNET}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }}
  ]
}}
"#
    )
}

/// The last lines of a file, for an error message.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

impl Containerd {
    /// Starts the node's containerd in namespaces of its own, waits until it serves the
    /// CRI, and loads the images.
    pub async fn start(options: Options<'_>) -> Result<Self, Error> {
        let io = |what: String| move |source| Error::Io { what, source };
        let dir = options.dir.join("containerd");
        for sub in ["", "cni", "root", "state"] {
            let path = dir.join(sub);
            std::fs::create_dir_all(&path).map_err(io(format!("creating {}", path.display())))?;
        }
        let config_path = dir.join("config.toml");
        std::fs::write(&config_path, config(&dir, options.programs))
            .map_err(io(format!("writing {}", config_path.display())))?;
        // Each registry the archives name is mirrored by the harness's registry.
        for (host, port) in options
            .registry
            .iter()
            .flat_map(|r| r.hosts().iter().map(|host| (host, r.port())))
        {
            let path = dir.join("certs.d").join(host);
            std::fs::create_dir_all(&path).map_err(io(format!("creating {}", path.display())))?;
            let path = path.join("hosts.toml");
            std::fs::write(&path, registry::hosts_toml(port))
                .map_err(io(format!("writing {}", path.display())))?;
        }
        let cni_path = dir.join("cni").join("10-nodeconform.conflist");
        std::fs::write(&cni_path, cni_config())
            .map_err(io(format!("writing {}", cni_path.display())))?;
        let netns =
            Arc::new(NetNs::new().map_err(io("making the node's network namespace".into()))?);
        if let Some(registry) = options.registry {
            netns.forward_in(registry.port()).map_err(io(
                "forwarding the registry into the node's namespace".into(),
            ))?;
        }
        let host_paths = HostPaths::prepare(&dir)?.with_private_run();
        let log = dir.join("containerd.log");
        let log_file =
            std::fs::File::create(&log).map_err(io(format!("creating {}", log.display())))?;
        let log_err = log_file
            .try_clone()
            .map_err(io(format!("opening {}", log.display())))?;
        let mut command = tokio::process::Command::new(&options.programs.containerd);
        command
            .arg("--config")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(log_file)
            .stderr(log_err)
            .kill_on_drop(true);
        if let Some(shim_dir) = &options.programs.shim_dir {
            // containerd looks its shim up on PATH.
            let path = std::env::var_os("PATH").unwrap_or_default();
            let dirs = std::iter::once(shim_dir.clone()).chain(std::env::split_paths(&path));
            if let Ok(path) = std::env::join_paths(dirs) {
                command.env("PATH", path);
            }
        }
        netns.enter_in_child(&mut command);
        host_paths.apply(&mut command);
        let child = command.spawn().map_err(io(format!(
            "starting {}",
            options.programs.containerd.display()
        )))?;
        let mut containerd = Self {
            child,
            socket: dir.join("containerd.sock"),
            netns,
            log,
        };
        if let Err(error) = containerd.wait_serving().await {
            containerd.kill().await;
            return Err(error);
        }
        if let Err(error) = containerd.import(options.programs, options.images).await {
            containerd.stop().await;
            return Err(error);
        }
        Ok(containerd)
    }

    /// The CRI endpoint (`unix://…`).
    pub fn endpoint(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// The node's network namespace.
    pub fn netns(&self) -> &Arc<NetNs> {
        &self.netns
    }

    /// containerd's process id (its mount namespace is the node's).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    fn not_started(&self, reason: String) -> Error {
        Error::NotStarted {
            reason,
            log: tail(&self.log, 15),
        }
    }

    async fn wait_serving(&mut self) -> Result<(), Error> {
        let deadline = tokio::time::Instant::now() + START_TIMEOUT;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(self.not_started(format!("it exited with {status}")));
            }
            if self.socket.exists()
                && let Ok(channel) = nodeconform_cri::connect(&self.endpoint()).await
                && RuntimeServiceClient::new(channel)
                    .version(v1::VersionRequest::default())
                    .await
                    .is_ok()
            {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(self.not_started(format!(
                    "no CRI answer on {} within {}s",
                    self.socket.display(),
                    START_TIMEOUT.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Imports `archives` into the CRI's namespace (`k8s.io`).
    async fn import(&self, programs: &Programs, archives: &[PathBuf]) -> Result<(), Error> {
        for archive in archives {
            let output = tokio::process::Command::new(&programs.ctr)
                .arg("--address")
                .arg(&self.socket)
                .args(["--namespace", "k8s.io", "images", "import"])
                .arg(archive)
                .stdin(Stdio::null())
                .output()
                .await
                .map_err(|source| Error::Io {
                    what: format!("running {}", programs.ctr.display()),
                    source,
                })?;
            if !output.status.success() {
                let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
                text.push_str(&String::from_utf8_lossy(&output.stderr));
                return Err(Error::Import {
                    archive: archive.clone(),
                    output: text.trim().to_owned(),
                });
            }
        }
        Ok(())
    }

    /// Removes every pod sandbox (and so every container) through the CRI.
    async fn remove_pods(&self) {
        let Ok(channel) = nodeconform_cri::connect(&self.endpoint()).await else {
            return;
        };
        let mut client = RuntimeServiceClient::new(channel);
        let Ok(list) = client
            .list_pod_sandbox(v1::ListPodSandboxRequest::default())
            .await
        else {
            return;
        };
        for sandbox in list.into_inner().items {
            let id = sandbox.id;
            let _ = client
                .stop_pod_sandbox(v1::StopPodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                })
                .await;
            if let Err(error) = client
                .remove_pod_sandbox(v1::RemovePodSandboxRequest {
                    pod_sandbox_id: id.clone(),
                })
                .await
            {
                tracing::warn!(sandbox = id, %error, "removing a pod sandbox at the node's end");
            }
        }
    }

    async fn kill(&mut self) {
        let _ = self.child.kill().await;
        kill_shims(&self.socket);
    }

    /// Removes every pod, stops containerd (SIGTERM, SIGKILL after 10 s) and kills any
    /// shim left; the node's namespaces end with their last process. Then its root and
    /// state (the images unpacked, a few hundred megabytes a node) are deleted at once:
    /// a run of hundreds of nodes would otherwise fill the disk before its end. Its log
    /// stays for the report.
    pub async fn stop(mut self) {
        tokio::time::timeout(Duration::from_secs(60), self.remove_pods())
            .await
            .unwrap_or_else(|_| tracing::warn!("removing the node's pods took over 60 s"));
        if let Some(pid) = self.child.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: kill(2) on our child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        if tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
        kill_shims(&self.socket);
        let Some(dir) = self.socket.parent().map(Path::to_owned) else {
            return;
        };
        let removed = tokio::task::spawn_blocking(move || {
            for sub in ["root", "state"] {
                let path = dir.join(sub);
                match std::fs::remove_dir_all(&path) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                        tracing::warn!(path = %path.display(), %error, "removing a stopped node's containerd files");
                    }
                    _ => {}
                }
            }
        });
        let _ = removed.await;
    }
}

/// SIGKILLs every containerd shim of the containerd at `socket` (a shim outlives its
/// containerd by design; its command line names the socket as `-address`).
fn kill_shims(socket: &Path) {
    let wanted = socket.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let mut args = cmdline.split(|b| *b == 0);
        let is_shim = args
            .next()
            .is_some_and(|a| a.ends_with(b"containerd-shim-runc-v2"));
        if is_shim && args.any(|a| a == wanted) {
            // SAFETY: kill(2) of a shim of this node's containerd.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}
