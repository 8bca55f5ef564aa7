//! Containers: their lifecycle and their CRI views.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use nodeconform_cri::v1;
use tokio::sync::{broadcast, mpsc, watch};

use crate::script::{Context, Outcome, Program, Signal, Stream};

/// A container's lifecycle. A container starts once and exits once; a
/// restart is a new container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Created,
    Running,
    Exited,
}

impl Lifecycle {
    pub(crate) fn to_cri(self) -> v1::ContainerState {
        match self {
            Self::Created => v1::ContainerState::ContainerCreated,
            Self::Running => v1::ContainerState::ContainerRunning,
            Self::Exited => v1::ContainerState::ContainerExited,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        self.to_cri().as_str_name()
    }

    /// Only a created container can start.
    pub(crate) fn can_start(self) -> bool {
        match self {
            Self::Created => true,
            Self::Running | Self::Exited => false,
        }
    }
}

/// A container and its simulated process.
#[derive(Debug)]
pub(crate) struct Container {
    pub id: String,
    pub sandbox_id: String,
    pub config: v1::ContainerConfig,
    /// The image as resolved at create time: (name shown in status, image ref, image id).
    pub image_name: String,
    pub image_ref: String,
    pub image_id: String,
    /// The log path as the client named it (`log_directory` + `log_path`).
    pub log_path: Option<PathBuf>,
    /// Where fake-cri writes it: `log_path` resolved under the host root.
    pub log_file: Option<PathBuf>,
    pub program: Arc<Program>,
    /// The servers its program is (simulated on the pod's address while it runs).
    pub servers: Vec<crate::servers::Server>,
    /// PID 1 of its own PID namespace: ignores SIGTERM without a trap.
    pub pid1: bool,
    /// What its processes see: files, environment, host name, user.
    pub context: Context,
    pub state: Lifecycle,
    pub created_at: i64,
    pub started_at: i64,
    pub finished_at: i64,
    pub exit_code: i32,
    pub reason: String,
    pub message: String,
    pub resources: Option<v1::ContainerResources>,
    pub reserved_name: String,
    /// Delivers signals to the running process.
    pub signals: Option<mpsc::UnboundedSender<Signal>>,
    /// Flips to `true` when the process has exited.
    pub exited: watch::Sender<bool>,
    /// The running process's standard input (`stdin: true`), written by
    /// `Attach` clients; dropped to end it.
    pub stdin: Option<mpsc::UnboundedSender<bytes::Bytes>>,
    /// The running process's output, to `Attach` clients as it is written.
    pub attached: broadcast::Sender<(Stream, Bytes)>,
    pub task: Option<tokio::task::AbortHandle>,
}

impl Container {
    pub(crate) fn metadata(&self) -> v1::ContainerMetadata {
        self.config.metadata.clone().unwrap_or_default()
    }

    pub(crate) fn name(&self) -> String {
        self.metadata().name
    }

    pub(crate) fn labels(&self) -> &HashMap<String, String> {
        &self.config.labels
    }

    fn image_spec(&self) -> v1::ImageSpec {
        v1::ImageSpec {
            image: self.image_name.clone(),
            annotations: self
                .config
                .image
                .as_ref()
                .map(|i| i.annotations.clone())
                .unwrap_or_default(),
            user_specified_image: self
                .config
                .image
                .as_ref()
                .map(|i| i.image.clone())
                .unwrap_or_default(),
            runtime_handler: String::new(),
            // Only image volumes carry the digest here.
            image_ref: String::new(),
        }
    }

    /// Records the end of the process: exit code, reason and the
    /// termination message.
    pub(crate) fn finish(&mut self, outcome: Outcome, now: i64) {
        self.state = Lifecycle::Exited;
        self.finished_at = now;
        self.exit_code = outcome.exit_code;
        // containerd's reasons: OOMKilled, Completed for 0, Error otherwise.
        self.reason = if outcome.oom_killed {
            "OOMKilled"
        } else if outcome.exit_code == 0 {
            "Completed"
        } else {
            "Error"
        }
        .to_owned();
        self.signals = None;
        self.task = None;
        self.deliver_termination_message();
        self.exited.send_replace(true);
    }

    /// The kubelet reads the termination message from the host file it
    /// mounted at `terminationMessagePath`; a real runtime's container writes
    /// into that mount. Without such a mount (a CRI client that does not
    /// mount it) the message goes into `ContainerStatus.message`.
    fn deliver_termination_message(&mut self) {
        let path = self
            .config
            .annotations
            .get("io.kubernetes.container.terminationMessagePath")
            .map_or("/dev/termination-log", String::as_str);
        let content = {
            let files = self
                .context
                .files
                .memory()
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            files.get(path).cloned()
        };
        let Some(content) = content else { return };
        let mount = self
            .context
            .files
            .mount_at(path)
            .filter(|m| !m.readonly)
            .map(|m| m.host_path.clone());
        match mount {
            Some(host) => {
                // Only ever write into a regular file the client created for this.
                if host.is_file()
                    && let Err(error) = std::fs::write(&host, &content)
                {
                    tracing::warn!(path = %host.display(), %error, "cannot write termination message");
                }
            }
            None => self.message = String::from_utf8_lossy(&content).into_owned(),
        }
    }

    pub(crate) fn to_cri(&self) -> v1::Container {
        v1::Container {
            id: self.id.clone(),
            pod_sandbox_id: self.sandbox_id.clone(),
            metadata: Some(self.metadata()),
            image: Some(self.image_spec()),
            image_ref: self.image_ref.clone(),
            state: self.state.to_cri() as i32,
            created_at: self.created_at,
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            image_id: self.image_id.clone(),
        }
    }

    pub(crate) fn status(&self) -> v1::ContainerStatus {
        v1::ContainerStatus {
            id: self.id.clone(),
            metadata: Some(self.metadata()),
            state: self.state.to_cri() as i32,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
            exit_code: self.exit_code,
            image: Some(self.image_spec()),
            image_ref: self.image_ref.clone(),
            reason: self.reason.clone(),
            message: self.message.clone(),
            labels: self.config.labels.clone(),
            annotations: self.config.annotations.clone(),
            mounts: self.config.mounts.clone(),
            log_path: self
                .log_path
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default(),
            resources: self.resources.clone(),
            image_id: self.image_id.clone(),
            user: None,
            stop_signal: self.config.stop_signal,
        }
    }
}
