//! The runtime's state and every operation on it. The gRPC services and the
//! control API are thin layers over [`Runtime`].
//!
//! State lives behind one `std::sync::Mutex`, never held across an `.await`:
//! operations that wait (stop, exec, pull) take what they need, release the
//! lock, and wait on the container's `exited` watch channel.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nodeconform_cri::v1;
use tokio::sync::{broadcast, mpsc, watch};

use crate::container::{Container, Lifecycle};
use crate::error::{Error, Result};
use crate::faults::Faults;
use crate::images::{Catalog, Images, Reference};
use crate::logs::{Captured, LogFile};
use crate::sandbox::{Sandbox, SandboxState};
use crate::script::{Outcome, Program, Shell, Signal};

/// Which cgroup driver `RuntimeConfig` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgroupDriver {
    /// `cgroupfs`: containerd's default.
    #[default]
    Cgroupfs,
    /// `systemd`, as kind configures containerd.
    Systemd,
}

/// Settings of a runtime.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    pub image_pull_delay: Duration,
    pub cgroup_driver: CgroupDriver,
    pub state_dir: Option<PathBuf>,
    pub image_catalog: Catalog,
}

/// The runtime's reported conditions.
#[derive(Debug, Clone)]
pub(crate) struct Conditions {
    pub runtime_ready: bool,
    pub network_ready: bool,
    pub reason: String,
    pub message: String,
}

impl Default for Conditions {
    fn default() -> Self {
        Self {
            runtime_ready: true,
            network_ready: true,
            reason: String::new(),
            message: String::new(),
        }
    }
}

impl Conditions {
    /// Keeps the reason and message while something is not ready (filling in
    /// a default), and clears them once everything is ready again.
    pub(crate) fn default_reason(&mut self, reason: &str, what: &str) {
        if self.runtime_ready && self.network_ready {
            self.reason.clear();
            self.message.clear();
        } else if self.reason.is_empty() {
            self.reason = reason.to_owned();
            self.message = format!("fake-cri: {what} set not ready through the control API");
        }
    }
}

/// Image filesystem usage set through the control API.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ImageFs {
    pub used_bytes: Option<u64>,
    pub capacity_bytes: Option<u64>,
}

#[derive(Debug, Default)]
struct State {
    sandboxes: HashMap<String, Sandbox>,
    containers: HashMap<String, Container>,
    /// Reserved names → the id holding them.
    names: HashMap<String, String>,
    pod_cidr: Option<String>,
    next_ip: u32,
}

/// The simulated container runtime.
#[derive(Debug)]
pub(crate) struct Runtime {
    state: Mutex<State>,
    images: Mutex<Images>,
    conditions: Mutex<Conditions>,
    image_fs: Mutex<ImageFs>,
    pub(crate) faults: Faults,
    events: broadcast::Sender<v1::ContainerEventResponse>,
    /// Bumped on restart and shutdown: open event streams end.
    epoch: watch::Sender<u64>,
    pub(crate) config: Config,
}

/// Event buffer per subscriber; a subscriber that falls further behind is
/// told so and disconnected (it must relist, as after a runtime restart).
const EVENT_BUFFER: usize = 16_384;

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn new_id() -> String {
    rand::random::<[u8; 32]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn matches_labels(labels: &HashMap<String, String>, selector: &HashMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

fn invalid(rpc: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        rpc,
        reason: reason.into(),
    }
}

impl Runtime {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            state: Mutex::default(),
            images: Mutex::new(Images::new(config.image_catalog.clone())),
            conditions: Mutex::default(),
            image_fs: Mutex::default(),
            faults: Faults::default(),
            events: broadcast::channel(EVENT_BUFFER).0,
            epoch: watch::channel(0).0,
            config,
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    // ---- events ----------------------------------------------------------

    /// Sends an event for a container (or, with `container_id == sandbox_id`,
    /// for the sandbox itself, as containerd does) with the sandbox's status
    /// and all its containers' statuses, as the evented PLEG expects.
    fn emit(
        &self,
        state: &State,
        container_id: &str,
        sandbox_id: &str,
        kind: v1::ContainerEventType,
    ) {
        if self.events.receiver_count() == 0 {
            return;
        }
        let Some(sandbox) = state.sandboxes.get(sandbox_id) else {
            return;
        };
        let event = v1::ContainerEventResponse {
            container_id: container_id.to_owned(),
            container_event_type: kind as i32,
            created_at: now(),
            pod_sandbox_status: Some(sandbox.status()),
            containers_statuses: state
                .containers
                .values()
                .filter(|c| c.sandbox_id == sandbox_id)
                .map(Container::status)
                .collect(),
        };
        let _ = self.events.send(event);
    }

    /// A stream of container events until the runtime restarts or shuts down.
    pub(crate) fn subscribe(
        &self,
    ) -> mpsc::Receiver<Result<v1::ContainerEventResponse, tonic::Status>> {
        let mut events = self.events.subscribe();
        let mut epoch = self.epoch.subscribe();
        let (tx, rx) = mpsc::channel(64);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    event = events.recv() => {
                        let item = match event {
                            Ok(event) => Ok(event),
                            Err(broadcast::error::RecvError::Lagged(n)) => Err(tonic::Status::resource_exhausted(
                                format!("event stream fell {n} events behind; subscribe again and relist"),
                            )),
                            Err(broadcast::error::RecvError::Closed) => break,
                        };
                        let end = item.is_err();
                        if tx.send(item).await.is_err() || end {
                            break;
                        }
                    }
                    _ = epoch.changed() => break,
                    () = tx.closed() => break,
                }
            }
        });
        rx
    }

    /// Ends every event stream (on shutdown).
    pub(crate) fn close_streams(&self) {
        self.epoch.send_modify(|e| *e += 1);
    }

    // ---- sandboxes -------------------------------------------------------

    pub(crate) fn run_sandbox(
        &self,
        config: Option<v1::PodSandboxConfig>,
        handler: String,
    ) -> Result<String> {
        const RPC: &str = "RunPodSandbox";
        let config = config.ok_or_else(|| invalid(RPC, "config is required"))?;
        let metadata = config
            .metadata
            .clone()
            .ok_or_else(|| invalid(RPC, "config.metadata is required"))?;
        if metadata.name.is_empty() {
            return Err(invalid(RPC, "config.metadata.name must not be empty"));
        }
        if !matches!(handler.as_str(), "" | "runc" | "fake-cri") {
            return Err(invalid(
                RPC,
                format!("no runtime for {handler:?} is configured"),
            ));
        }
        let mut state = self.state();
        let reserved_name = format!(
            "k8s_POD_{}_{}_{}_{}",
            metadata.name, metadata.namespace, metadata.uid, metadata.attempt
        );
        if let Some(owner) = state.names.get(&reserved_name) {
            return Err(Error::NameReserved {
                name: reserved_name,
                owner: owner.clone(),
            });
        }
        let id = new_id();
        let ip = (!Sandbox::host_network(&config)).then(|| allocate_ip(&mut state));
        if !config.log_directory.is_empty() {
            let _ = std::fs::create_dir_all(&config.log_directory);
        }
        state.names.insert(reserved_name.clone(), id.clone());
        state.sandboxes.insert(
            id.clone(),
            Sandbox {
                id: id.clone(),
                config,
                runtime_handler: handler,
                state: SandboxState::Ready,
                created_at: now(),
                ip,
                reserved_name,
            },
        );
        self.emit(
            &state,
            &id,
            &id,
            v1::ContainerEventType::ContainerCreatedEvent,
        );
        self.emit(
            &state,
            &id,
            &id,
            v1::ContainerEventType::ContainerStartedEvent,
        );
        Ok(id)
    }

    /// Stops a sandbox: its running containers are killed (exit 137), as in
    /// containerd. Stopping a stopped sandbox succeeds.
    pub(crate) async fn stop_sandbox(&self, id: &str) -> Result<()> {
        let running: Vec<String> = {
            let state = self.state();
            if !state.sandboxes.contains_key(id) {
                return Err(Error::SandboxNotFound { id: id.to_owned() });
            }
            state
                .containers
                .values()
                .filter(|c| c.sandbox_id == id && c.state == Lifecycle::Running)
                .map(|c| c.id.clone())
                .collect()
        };
        for container in running {
            self.signal_and_wait(&container, Signal::Kill { oom: false }, None)
                .await;
        }
        let mut state = self.state();
        if let Some(sandbox) = state.sandboxes.get_mut(id)
            && sandbox.state == SandboxState::Ready
        {
            sandbox.state = SandboxState::NotReady;
            // Stopping tears the pod network down: containerd then reports
            // no IP, and the address is free for another pod.
            sandbox.ip = None;
            self.emit(
                &state,
                id,
                id,
                v1::ContainerEventType::ContainerStoppedEvent,
            );
        }
        Ok(())
    }

    /// Removes a sandbox and all its containers, stopping it first if needed.
    /// Removing an unknown sandbox succeeds (it is idempotent in containerd).
    pub(crate) async fn remove_sandbox(&self, id: &str) -> Result<()> {
        match self.stop_sandbox(id).await {
            // Unknown, or removed by a concurrent call: removal is idempotent.
            Err(Error::SandboxNotFound { .. }) => return Ok(()),
            result => result?,
        }
        let mut state = self.state();
        let containers: Vec<String> = state
            .containers
            .values()
            .filter(|c| c.sandbox_id == id)
            .map(|c| c.id.clone())
            .collect();
        for container in containers {
            self.remove_locked(&mut state, &container);
        }
        self.emit(
            &state,
            id,
            id,
            v1::ContainerEventType::ContainerDeletedEvent,
        );
        if let Some(sandbox) = state.sandboxes.remove(id) {
            state.names.remove(&sandbox.reserved_name);
        }
        Ok(())
    }

    pub(crate) fn sandbox_status(
        &self,
        id: &str,
    ) -> Result<(v1::PodSandboxStatus, Vec<v1::ContainerStatus>)> {
        let state = self.state();
        let sandbox = state
            .sandboxes
            .get(id)
            .ok_or_else(|| Error::SandboxNotFound { id: id.to_owned() })?;
        let containers = state
            .containers
            .values()
            .filter(|c| c.sandbox_id == id)
            .map(Container::status)
            .collect();
        Ok((sandbox.status(), containers))
    }

    pub(crate) fn list_sandboxes(
        &self,
        filter: Option<v1::PodSandboxFilter>,
    ) -> Vec<v1::PodSandbox> {
        let filter = filter.unwrap_or_default();
        let state = self.state();
        state
            .sandboxes
            .values()
            .filter(|s| s.id.starts_with(&filter.id))
            .filter(|s| {
                filter
                    .state
                    .as_ref()
                    .is_none_or(|w| s.state.to_cri() as i32 == w.state)
            })
            .filter(|s| matches_labels(s.labels(), &filter.label_selector))
            .map(Sandbox::to_cri)
            .collect()
    }

    // ---- containers ------------------------------------------------------

    pub(crate) fn create_container(
        &self,
        sandbox_id: &str,
        config: Option<v1::ContainerConfig>,
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
        let argv: Vec<String> = config.command.iter().chain(&config.args).cloned().collect();
        let program = Program::from_argv(&argv).map_err(|source| Error::Script {
            container: metadata.name.clone(),
            source,
        })?;
        let image = lock(&self.images)
            .find(&image_spec)
            .cloned()
            .ok_or_else(|| Error::ImageNotPresent {
                image: image_spec.clone(),
            })?;
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
        let id = new_id();
        state.names.insert(reserved_name.clone(), id.clone());
        let image_name = image.repo_tags.first().cloned().unwrap_or(image_spec);
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
            program: Arc::new(program),
            pid1,
            files: Arc::default(),
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
        let sandbox_ready = {
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
            state
                .sandboxes
                .get(&container.sandbox_id)
                .map(|s| (s.state == SandboxState::Ready, s.config.hostname.clone()))
        };
        let Some((true, hostname)) = sandbox_ready else {
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
        let mut env: HashMap<String, String> = container
            .config
            .envs
            .iter()
            .map(|kv| (kv.key.clone(), kv.value.clone()))
            .collect();
        env.entry("HOSTNAME".to_owned()).or_insert(hostname);
        let log = LogFile::new(container.log_path.clone());
        log.create();
        let (files, program, pid1) = (
            Arc::clone(&container.files),
            Arc::clone(&container.program),
            container.pid1,
        );
        let runtime = Arc::clone(self);
        let container_id = id.to_owned();
        let task = tokio::spawn(async move {
            let mut log = log;
            let outcome = Shell::main(files, env, &mut log, &mut rx, pid1)
                .run(&program)
                .await;
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

    fn container_exited(&self, id: &str, outcome: Outcome) {
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
    async fn signal_and_wait(&self, id: &str, signal: Signal, timeout: Option<Duration>) -> bool {
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

    fn remove_locked(&self, state: &mut State, id: &str) {
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

    fn with_container<T>(&self, id: &str, f: impl FnOnce(&Container) -> T) -> Result<T> {
        let state = self.state();
        state
            .containers
            .get(id)
            .map(f)
            .ok_or_else(|| Error::ContainerNotFound { id: id.to_owned() })
    }

    fn running_container<T>(
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
            self.running_container(id, "reopen its log", |c| LogFile::new(c.log_path.clone()))?;
        log.create();
        Ok(())
    }

    /// Runs a command in a running container, interpreted like its main
    /// process, with the container's files and environment.
    pub(crate) async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: i64,
    ) -> Result<v1::ExecSyncResponse> {
        if cmd.is_empty() {
            return Err(invalid("ExecSync", "cmd must not be empty"));
        }
        let (files, env, mut exited) = self.running_container(id, "exec in it", |c| {
            let env = c
                .config
                .envs
                .iter()
                .map(|kv| (kv.key.clone(), kv.value.clone()))
                .collect();
            (Arc::clone(&c.files), env, c.exited.subscribe())
        })?;
        let program = match Program::from_argv(cmd) {
            Ok(program) => program,
            // As `sh -c` would: a syntax error exits 2.
            Err(error) => {
                return Ok(v1::ExecSyncResponse {
                    stdout: Vec::new(),
                    stderr: format!("sh: syntax error: {error}\n").into_bytes(),
                    exit_code: 2,
                });
            }
        };
        let mut output = Captured::default();
        let exec = Shell::exec(files, env, &mut output).run(&program);
        // The exec's process dies with the container (killed, as everything
        // in its cgroup), or when the container is gone (removed, restart,
        // shutdown).
        let run = async {
            tokio::select! {
                outcome = exec => outcome,
                _ = exited.wait_for(|exited| *exited) => Outcome {
                    exit_code: 137,
                    oom_killed: false,
                },
            }
        };
        let outcome = if timeout > 0 {
            let limit = Duration::from_secs(u64::try_from(timeout).unwrap_or(u64::MAX));
            tokio::time::timeout(limit, run)
                .await
                .map_err(|_| Error::ExecTimeout {
                    id: id.to_owned(),
                    timeout,
                })?
        } else {
            run.await
        };
        Ok(v1::ExecSyncResponse {
            stdout: output.stdout,
            stderr: output.stderr,
            exit_code: outcome.exit_code,
        })
    }

    // ---- stats -----------------------------------------------------------

    pub(crate) fn container_stats(&self, id: &str) -> Result<v1::ContainerStats> {
        let mountpoint = self.fs_mountpoint("containers");
        self.with_container(id, |c| crate::stats::container(c, &mountpoint))
    }

    pub(crate) fn list_container_stats(
        &self,
        filter: Option<v1::ContainerStatsFilter>,
    ) -> Vec<v1::ContainerStats> {
        let filter = filter.unwrap_or_default();
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        state
            .containers
            .values()
            .filter(|c| c.state == Lifecycle::Running)
            .filter(|c| c.id.starts_with(&filter.id))
            .filter(|c| c.sandbox_id.starts_with(&filter.pod_sandbox_id))
            .filter(|c| matches_labels(c.labels(), &filter.label_selector))
            .map(|c| crate::stats::container(c, &mountpoint))
            .collect()
    }

    pub(crate) fn sandbox_stats(&self, id: &str) -> Result<v1::PodSandboxStats> {
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        let sandbox = state
            .sandboxes
            .get(id)
            .ok_or_else(|| Error::SandboxNotFound { id: id.to_owned() })?;
        Ok(crate::stats::sandbox(
            sandbox,
            state.containers.values(),
            &mountpoint,
        ))
    }

    pub(crate) fn list_sandbox_stats(
        &self,
        filter: Option<v1::PodSandboxStatsFilter>,
    ) -> Vec<v1::PodSandboxStats> {
        let filter = filter.unwrap_or_default();
        let mountpoint = self.fs_mountpoint("containers");
        let state = self.state();
        state
            .sandboxes
            .values()
            .filter(|s| s.state == SandboxState::Ready)
            .filter(|s| s.id.starts_with(&filter.id))
            .filter(|s| matches_labels(s.labels(), &filter.label_selector))
            .map(|s| crate::stats::sandbox(s, state.containers.values(), &mountpoint))
            .collect()
    }

    fn fs_mountpoint(&self, what: &str) -> String {
        match &self.config.state_dir {
            Some(dir) => dir.join(what).display().to_string(),
            None => format!("/var/lib/fake-cri/{what}"),
        }
    }

    // ---- runtime ---------------------------------------------------------

    pub(crate) fn status(&self) -> (v1::RuntimeStatus, HashMap<String, String>) {
        let conditions = lock(&self.conditions).clone();
        let condition = |kind: &str, ready: bool| v1::RuntimeCondition {
            r#type: kind.to_owned(),
            status: ready,
            reason: if ready {
                String::new()
            } else {
                conditions.reason.clone()
            },
            message: if ready {
                String::new()
            } else {
                conditions.message.clone()
            },
        };
        let status = v1::RuntimeStatus {
            conditions: vec![
                condition("RuntimeReady", conditions.runtime_ready),
                condition("NetworkReady", conditions.network_ready),
            ],
        };
        let info = HashMap::from([(
            "config".to_owned(),
            format!(
                "{{\"imagePullDelayMs\":{},\"cgroupDriver\":\"{:?}\"}}",
                self.config.image_pull_delay.as_millis(),
                self.config.cgroup_driver
            ),
        )]);
        (status, info)
    }

    pub(crate) fn set_conditions(&self, update: impl FnOnce(&mut Conditions)) {
        update(&mut lock(&self.conditions));
    }

    pub(crate) fn conditions(&self) -> Conditions {
        lock(&self.conditions).clone()
    }

    pub(crate) fn update_runtime_config(&self, pod_cidr: String) -> Result<()> {
        if pod_cidr.is_empty() {
            return Ok(());
        }
        // Several CIDRs (dual stack) are comma-separated; pod IPs come from the first IPv4 one.
        let Some(cidr) = pod_cidr
            .split(',')
            .map(str::trim)
            .find(|c| parse_cidr(c).is_some())
        else {
            return Err(invalid(
                "UpdateRuntimeConfig",
                format!("pod CIDR {pod_cidr:?} has no IPv4 network with a prefix of /8 to /30"),
            ));
        };
        self.state().pod_cidr = Some(cidr.to_owned());
        Ok(())
    }

    /// Kills running containers: by id, or all of a pod's containers with a
    /// name (or all of the pod's when `container` is empty). Returns the ids.
    pub(crate) fn kill(&self, target: &crate::control::KillTarget, oom: bool) -> Vec<String> {
        use crate::control::KillTarget;
        let state = self.state();
        let mut killed = Vec::new();
        for container in state
            .containers
            .values()
            .filter(|c| c.state == Lifecycle::Running)
        {
            let wanted = match target {
                KillTarget::Id(id) => container.id == *id,
                KillTarget::Container {
                    namespace,
                    pod,
                    container: name,
                } => state.sandboxes.get(&container.sandbox_id).is_some_and(|s| {
                    let meta = s.metadata();
                    meta.namespace == *namespace
                        && meta.name == *pod
                        && s.state == SandboxState::Ready
                        && (name.is_empty() || container.name() == *name)
                }),
            };
            if wanted {
                if let Some(signals) = &container.signals {
                    let _ = signals.send(Signal::Kill { oom });
                }
                killed.push(container.id.clone());
            }
        }
        killed
    }

    /// Forgets every sandbox and container, as a runtime crash does.
    /// Images stay (they are on disk); conditions return to ready.
    pub(crate) fn restart(&self) {
        {
            let mut state = self.state();
            for container in state.containers.values() {
                if let Some(task) = &container.task {
                    task.abort();
                }
            }
            *state = State {
                pod_cidr: state.pod_cidr.take(),
                ..State::default()
            };
        }
        *lock(&self.conditions) = Conditions::default();
        self.close_streams();
    }

    /// Ends every simulated process (on shutdown) as SIGKILL would, so that
    /// requests waiting for one to exit (an in-flight `StopContainer`) finish.
    pub(crate) fn abort_all(&self) {
        let mut state = self.state();
        let killed_at = now();
        for container in state.containers.values_mut() {
            if let Some(task) = container.task.take() {
                task.abort();
            }
            if container.state == Lifecycle::Running {
                let killed = Outcome {
                    exit_code: 137,
                    oom_killed: false,
                };
                container.finish(killed, killed_at);
            }
        }
    }

    /// A summary of the state for the control API.
    pub(crate) fn snapshot(&self) -> crate::control::Snapshot {
        use crate::control::{ContainerSummary, SandboxSummary, Snapshot};
        let conditions = self.conditions();
        let state = self.state();
        Snapshot {
            runtime_ready: conditions.runtime_ready,
            network_ready: conditions.network_ready,
            sandboxes: state
                .sandboxes
                .values()
                .map(|s| {
                    let meta = s.metadata();
                    SandboxSummary {
                        id: s.id.clone(),
                        name: meta.name,
                        namespace: meta.namespace,
                        uid: meta.uid,
                        state: s.state.to_cri().as_str_name().to_owned(),
                    }
                })
                .collect(),
            containers: state
                .containers
                .values()
                .map(|c| {
                    let pod = state
                        .sandboxes
                        .get(&c.sandbox_id)
                        .map(Sandbox::metadata)
                        .unwrap_or_default();
                    ContainerSummary {
                        id: c.id.clone(),
                        sandbox_id: c.sandbox_id.clone(),
                        name: c.name(),
                        pod_name: pod.name,
                        pod_namespace: pod.namespace,
                        pod_uid: pod.uid,
                        state: c.state.name().to_owned(),
                        exit_code: c.exit_code,
                    }
                })
                .collect(),
        }
    }

    // ---- images ----------------------------------------------------------

    pub(crate) fn list_images(&self, filter: Option<v1::ImageFilter>) -> Vec<v1::Image> {
        let wanted = filter
            .and_then(|f| f.image)
            .map(|spec| spec.image)
            .filter(|image| !image.is_empty());
        let images = lock(&self.images);
        match wanted {
            Some(image) => images
                .find(&image)
                .map(|i| i.to_cri())
                .into_iter()
                .collect(),
            None => images.list().map(|i| i.to_cri()).collect(),
        }
    }

    pub(crate) fn image_status(&self, image: &str) -> Option<v1::Image> {
        lock(&self.images).find(image).map(|i| i.to_cri())
    }

    /// Pulls an image: after the configured delay, every reference succeeds
    /// except malformed ones and those under `registry.invalid`.
    pub(crate) async fn pull_image(&self, image: &str) -> Result<String> {
        let reference = Reference::parse(image)?;
        if !self.config.image_pull_delay.is_zero() {
            tokio::time::sleep(self.config.image_pull_delay).await;
        }
        Ok(lock(&self.images).pull(&reference)?.id)
    }

    pub(crate) fn remove_image(&self, image: &str) {
        lock(&self.images).remove(image);
    }

    pub(crate) fn set_image_fs(&self, fs: ImageFs) {
        *lock(&self.image_fs) = fs;
    }

    pub(crate) fn image_fs_info(&self) -> v1::ImageFsInfoResponse {
        let fs = *lock(&self.image_fs);
        let (used, count) = {
            let images = lock(&self.images);
            (images.total_size(), images.list().count())
        };
        let containers = self.state().containers.len() as u64;
        let usage = |what: &str, used_bytes: u64, inodes: u64| v1::FilesystemUsage {
            timestamp: now(),
            fs_id: Some(v1::FilesystemIdentifier {
                mountpoint: self.fs_mountpoint(what),
            }),
            used_bytes: Some(v1::UInt64Value { value: used_bytes }),
            inodes_used: Some(v1::UInt64Value { value: inodes }),
        };
        v1::ImageFsInfoResponse {
            image_filesystems: vec![usage(
                "images",
                fs.used_bytes.unwrap_or(used),
                count as u64 * 100,
            )],
            container_filesystems: vec![usage("containers", containers * 4096, containers * 10)],
        }
    }

    pub(crate) fn image_fs(&self) -> ImageFs {
        *lock(&self.image_fs)
    }
}

/// Allocates the next free pod IP from the pod CIDR (default 10.88.0.0/16).
fn allocate_ip(state: &mut State) -> String {
    let (base, size) = state
        .pod_cidr
        .as_deref()
        .and_then(parse_cidr)
        .unwrap_or((u32::from_be_bytes([10, 88, 0, 0]), 1 << 16));
    // Skip the network address and the gateway (.1), and the broadcast address.
    let usable = size.saturating_sub(3).max(1);
    for _ in 0..usable {
        let offset = 2 + state.next_ip % usable;
        state.next_ip = state.next_ip.wrapping_add(1);
        let ip = std::net::Ipv4Addr::from(base.wrapping_add(offset)).to_string();
        if !state
            .sandboxes
            .values()
            .any(|s| s.ip.as_deref() == Some(ip.as_str()))
        {
            return ip;
        }
    }
    // Exhausted: share an address rather than fail the pod.
    std::net::Ipv4Addr::from(base.wrapping_add(2)).to_string()
}

fn parse_cidr(cidr: &str) -> Option<(u32, u32)> {
    let (ip, bits) = cidr.split_once('/')?;
    let ip: std::net::Ipv4Addr = ip.parse().ok()?;
    let bits: u32 = bits.parse().ok().filter(|b| (8..=30).contains(b))?;
    let mask = u32::MAX << (32 - bits);
    Some((u32::from(ip) & mask, 1 << (32 - bits)))
}
