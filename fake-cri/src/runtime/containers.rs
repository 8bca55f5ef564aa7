//! Containers: create, start, stop, remove, and their status.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nodeconform_cri::v1;
use tokio::sync::{broadcast, mpsc, watch};

use super::process;
use super::state::{Runtime, State, invalid, lock, matches_labels, new_id, now};
use crate::container::{Container, Lifecycle};
use crate::error::{Error, Result};
use crate::host_root::Root;
use crate::logs::LogFile;
use crate::sandbox::SandboxState;
use crate::script::{Input, Mount, Outcome, Output, Program, Shell, Signal, Stream};

impl Runtime {
    pub(crate) fn create_container(
        &self,
        sandbox_id: &str,
        config: Option<v1::ContainerConfig>,
        root: &Root,
    ) -> Result<String> {
        const RPC: &str = "CreateContainer";
        let config = config.ok_or_else(|| invalid(RPC, "config is required"))?;
        let metadata = config
            .metadata
            .clone()
            .ok_or_else(|| invalid(RPC, "config.metadata is required"))?;
        if metadata.name.is_empty() {
            return Err(invalid(RPC, "config.metadata.name must not be empty"));
        }
        let image_spec = config
            .image
            .as_ref()
            .map(|i| i.image.clone())
            .unwrap_or_default();
        if image_spec.is_empty() {
            return Err(invalid(RPC, "config.image.image must not be empty"));
        }
        // containerd's user spec: a group needs a user (an image's `USER`
        // does not count).
        let security = config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref());
        if let Some(group) = security.and_then(|s| s.run_as_group.as_ref())
            && security.is_some_and(|s| s.run_as_user.is_none() && s.run_as_username.is_empty())
        {
            return Err(invalid(
                RPC,
                format!("user group \"{}\" is specified without user", group.value),
            ));
        }
        let argv: Vec<String> = config.command.iter().chain(&config.args).cloned().collect();
        let program = Program::from_argv(&argv).map_err(|source| Error::Script {
            container: metadata.name.clone(),
            source,
        })?;
        // The interpreter reads and writes through mounts: a mount must say
        // which host path it shows.
        if let Some(i) = config.mounts.iter().position(|m| m.host_path.is_empty()) {
            return Err(invalid(
                RPC,
                format!("mounts[{i}].host_path must not be empty"),
            ));
        }
        let image = lock(&self.images)
            .find(&image_spec)
            .cloned()
            .ok_or_else(|| Error::ImageNotPresent {
                image: image_spec.clone(),
            })?;
        // The host paths, resolved on the host before taking the state.
        let log_directory = self
            .state()
            .sandboxes
            .get(sandbox_id)
            .map(|s| s.config.log_directory.clone())
            .unwrap_or_default();
        let log_file = (!log_directory.is_empty() && !config.log_path.is_empty())
            .then(|| root.resolve_for(RPC, &Path::new(&log_directory).join(&config.log_path)))
            .transpose()?;
        let mounts = config
            .mounts
            .iter()
            .map(|m| {
                let host_path = root.resolve_for(RPC, Path::new(&m.host_path))?;
                Ok(Mount::new(&m.container_path, host_path, m.readonly))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut state = self.state();
        let sandbox = state
            .sandboxes
            .get(sandbox_id)
            .ok_or_else(|| Error::SandboxNotFound {
                id: sandbox_id.to_owned(),
            })?;
        if sandbox.state != SandboxState::Ready {
            return Err(Error::WrongState {
                object: "pod sandbox",
                id: sandbox_id.to_owned(),
                state: "SANDBOX_NOTREADY",
                action: "create containers in it",
            });
        }
        let pod = sandbox.metadata();
        let reserved_name = format!(
            "k8s_{}_{}_{}_{}_{}",
            metadata.name, pod.name, pod.namespace, pod.uid, metadata.attempt
        );
        if let Some(owner) = state.names.get(&reserved_name) {
            return Err(Error::NameReserved {
                name: reserved_name,
                owner: owner.clone(),
            });
        }
        let log_path = (!sandbox.config.log_directory.is_empty() && !config.log_path.is_empty())
            .then(|| PathBuf::from(&sandbox.config.log_directory).join(&config.log_path));
        // The kubelet gives each container its own PID namespace (CONTAINER)
        // unless the pod shares one; protobuf's default (POD) means shared.
        let pid_mode = config
            .linux
            .as_ref()
            .and_then(|l| l.security_context.as_ref())
            .and_then(|s| s.namespace_options.as_ref())
            .map_or(v1::NamespaceMode::Pod as i32, |o| o.pid);
        let pid1 = pid_mode == v1::NamespaceMode::Container as i32
            || pid_mode == v1::NamespaceMode::Target as i32;
        let context = process::context(&config, mounts, sandbox, &image);
        let id = new_id();
        state.names.insert(reserved_name.clone(), id.clone());
        let image_name = image.repo_tags.first().cloned().unwrap_or(image_spec);
        // By the image's name: a kubelet names the image by its ID (`sha256:…`).
        let servers = crate::servers::Server::of(&image_name, &argv);
        let container = Container {
            id: id.clone(),
            sandbox_id: sandbox_id.to_owned(),
            image_name,
            image_ref: image
                .repo_digests
                .first()
                .cloned()
                .unwrap_or_else(|| image.id.clone()),
            image_id: image.id.clone(),
            log_path,
            log_file,
            program: Arc::new(program),
            servers,
            pid1,
            context,
            state: Lifecycle::Created,
            created_at: now(),
            started_at: 0,
            finished_at: 0,
            exit_code: 0,
            reason: String::new(),
            message: String::new(),
            resources: config.linux.as_ref().map(|l| v1::ContainerResources {
                linux: l.resources.clone(),
                windows: None,
            }),
            reserved_name,
            signals: None,
            exited: watch::channel(false).0,
            stdin: None,
            attached: broadcast::channel(64).0,
            task: None,
            config,
        };
        state.containers.insert(id.clone(), container);
        self.emit(
            &state,
            &id,
            sandbox_id,
            v1::ContainerEventType::ContainerCreatedEvent,
        );
        Ok(id)
    }

    pub(crate) fn start_container(self: &Arc<Self>, id: &str) -> Result<()> {
        let mut state = self.state();
        let (sandbox_ready, ip) = {
            let container = state
                .containers
                .get(id)
                .ok_or_else(|| Error::ContainerNotFound { id: id.to_owned() })?;
            if !container.state.can_start() {
                return Err(Error::WrongState {
                    object: "container",
                    id: id.to_owned(),
                    state: container.state.name(),
                    action: "start it",
                });
            }
            let sandbox = state.sandboxes.get(&container.sandbox_id);
            let ip = sandbox.map_or(std::net::IpAddr::from([127, 0, 0, 1]), |s| s.address());
            (sandbox.map(|s| s.state == SandboxState::Ready), ip)
        };
        let Some(true) = sandbox_ready else {
            return Err(Error::WrongState {
                object: "container",
                id: id.to_owned(),
                state: "in a stopped sandbox",
                action: "start it",
            });
        };
        let Some(container) = state.containers.get_mut(id) else {
            return Err(Error::ContainerNotFound { id: id.to_owned() });
        };
        let (tx, mut rx) = mpsc::unbounded_channel();
        container.state = Lifecycle::Running;
        container.started_at = now();
        container.signals = Some(tx);
        let mut stdin = None;
        if container.config.stdin {
            let (tx, rx) = mpsc::unbounded_channel();
            container.stdin = Some(tx);
            stdin = Some(Input::new(rx));
        }
        let log = LogFile::new(container.log_file.clone()).attached(container.attached.clone());
        log.create();
        let (context, program, pid1) = (
            container.context.clone(),
            Arc::clone(&container.program),
            container.pid1,
        );
        let servers = container.servers.clone();
        let runtime = Arc::clone(self);
        let container_id = id.to_owned();
        let task = tokio::spawn(async move {
            let mut log = log;
            // The servers live exactly as long as the process: dropped when it ends or the
            // task is aborted.
            let started = crate::servers::start(&servers, ip, &context.hostname, &log).await;
            let listening = match started {
                Ok(listening) => listening,
                Err(line) => {
                    log.write(Stream::Stderr, line.as_bytes());
                    runtime.container_exited(&container_id, Outcome::exited(1));
                    return;
                }
            };
            let mut shell = Shell::main(context, &mut log, &mut rx, pid1);
            if let Some(stdin) = stdin.as_mut() {
                shell = shell.with_stdin(stdin);
            }
            let outcome = shell.run(&program).await;
            drop(listening);
            runtime.container_exited(&container_id, outcome);
        });
        container.task = Some(task.abort_handle());
        let sandbox_id = container.sandbox_id.clone();
        self.emit(
            &state,
            id,
            &sandbox_id,
            v1::ContainerEventType::ContainerStartedEvent,
        );
        Ok(())
    }

    pub(super) fn container_exited(&self, id: &str, outcome: Outcome) {
        let mut state = self.state();
        let Some(container) = state.containers.get_mut(id) else {
            return;
        };
        if container.state != Lifecycle::Running {
            return;
        }
        container.finish(outcome, now());
        let sandbox_id = container.sandbox_id.clone();
        self.emit(
            &state,
            id,
            &sandbox_id,
            v1::ContainerEventType::ContainerStoppedEvent,
        );
    }

    /// Sends `signal` to a running container and waits until it exits, at most
    /// `timeout`. Returns whether it is no longer running.
    pub(super) async fn signal_and_wait(
        &self,
        id: &str,
        signal: Signal,
        timeout: Option<Duration>,
    ) -> bool {
        let (signals, mut exited) = {
            let state = self.state();
            match state.containers.get(id) {
                Some(c) if c.state == Lifecycle::Running => {
                    (c.signals.clone(), c.exited.subscribe())
                }
                _ => return true,
            }
        };
        if let Some(signals) = signals {
            let _ = signals.send(signal);
        }
        let wait = exited.wait_for(|exited| *exited);
        match timeout {
            // An error means the container is gone (removed or runtime restarted).
            Some(timeout) => tokio::time::timeout(timeout, wait).await.is_ok(),
            None => {
                let _ = wait.await;
                true
            }
        }
    }

    /// SIGTERM, then SIGKILL when `timeout` seconds pass (at once for 0).
    /// Stopping a container that is not running succeeds.
    pub(crate) async fn stop_container(&self, id: &str, timeout: i64) -> Result<()> {
        if !self.state().containers.contains_key(id) {
            return Err(Error::ContainerNotFound { id: id.to_owned() });
        }
        if timeout > 0 {
            let grace = Duration::from_secs(u64::try_from(timeout).unwrap_or(u64::MAX));
            if self.signal_and_wait(id, Signal::Term, Some(grace)).await {
                return Ok(());
            }
        }
        self.signal_and_wait(id, Signal::Kill { oom: false }, None)
            .await;
        Ok(())
    }

    /// Removes a container, killing it first if it runs (as containerd does).
    /// Removing an unknown container succeeds.
    pub(crate) async fn remove_container(&self, id: &str) -> Result<()> {
        self.signal_and_wait(id, Signal::Kill { oom: false }, None)
            .await;
        let mut state = self.state();
        self.remove_locked(&mut state, id);
        Ok(())
    }

    pub(super) fn remove_locked(&self, state: &mut State, id: &str) {
        let Some(sandbox_id) = state.containers.get(id).map(|c| c.sandbox_id.clone()) else {
            return;
        };
        // The event carries the sandbox's remaining containers, so send it after removal.
        if let Some(container) = state.containers.remove(id) {
            if let Some(task) = &container.task {
                task.abort();
            }
            state.names.remove(&container.reserved_name);
        }
        self.emit(
            state,
            id,
            &sandbox_id,
            v1::ContainerEventType::ContainerDeletedEvent,
        );
    }

    pub(crate) fn list_containers(
        &self,
        filter: Option<v1::ContainerFilter>,
    ) -> Vec<v1::Container> {
        let filter = filter.unwrap_or_default();
        let state = self.state();
        state
            .containers
            .values()
            .filter(|c| c.id.starts_with(&filter.id))
            .filter(|c| c.sandbox_id.starts_with(&filter.pod_sandbox_id))
            .filter(|c| {
                filter
                    .state
                    .as_ref()
                    .is_none_or(|w| c.state.to_cri() as i32 == w.state)
            })
            .filter(|c| matches_labels(c.labels(), &filter.label_selector))
            .map(Container::to_cri)
            .collect()
    }

    pub(crate) fn container_status(&self, id: &str) -> Result<v1::ContainerStatus> {
        self.with_container(id, Container::status)
    }

    pub(super) fn with_container<T>(&self, id: &str, f: impl FnOnce(&Container) -> T) -> Result<T> {
        let state = self.state();
        state
            .containers
            .get(id)
            .map(f)
            .ok_or_else(|| Error::ContainerNotFound { id: id.to_owned() })
    }

    pub(super) fn running_container<T>(
        &self,
        id: &str,
        action: &'static str,
        f: impl FnOnce(&Container) -> T,
    ) -> Result<T> {
        self.with_container(id, |c| {
            if c.state == Lifecycle::Running {
                Ok(f(c))
            } else {
                Err(Error::WrongState {
                    object: "container",
                    id: id.to_owned(),
                    state: c.state.name(),
                    action,
                })
            }
        })?
    }

    /// Fails unless container `id` exists and runs (`action` says what
    /// was asked of it).
    pub(crate) fn running_container_exists(&self, id: &str, action: &'static str) -> Result<()> {
        self.running_container(id, action, |_| ())
    }

    pub(crate) fn update_resources(
        &self,
        id: &str,
        resources: v1::ContainerResources,
    ) -> Result<()> {
        let mut state = self.state();
        let container = state
            .containers
            .get_mut(id)
            .ok_or_else(|| Error::ContainerNotFound { id: id.to_owned() })?;
        container.resources = Some(resources);
        Ok(())
    }

    pub(crate) fn reopen_log(&self, id: &str) -> Result<()> {
        // The log file is opened per write; reopening means recreating it.
        let log =
            self.running_container(id, "reopen its log", |c| LogFile::new(c.log_file.clone()))?;
        log.create();
        Ok(())
    }
}
