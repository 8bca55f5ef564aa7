//! The state a runtime owns, the [`Runtime`] that guards it, and helpers
//! its operations share.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nodeconform_cri::v1;
use tokio::sync::{broadcast, watch};

use crate::container::Container;
use crate::error::Error;
use crate::faults::Faults;
use crate::host_root::HostRoot;
use crate::images::{Catalog, Images};
use crate::sandbox::Sandbox;

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
    /// The host root given at start (default `/`).
    pub host_root: Option<PathBuf>,
    /// No host root until [`HostRoot::set`]: requests naming host paths wait.
    pub defer_host_root: bool,
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

#[derive(Debug)]
pub(super) struct State {
    pub(super) sandboxes: HashMap<String, Sandbox>,
    pub(super) containers: HashMap<String, Container>,
    /// Reserved names → the id holding them.
    pub(super) names: HashMap<String, String>,
    /// The pod network, in 127.0.0.0/8.
    pub(super) pod_cidr: String,
    pub(super) next_ip: u32,
}

impl State {
    /// Nothing yet, in the pod network `pod_cidr`.
    pub(super) fn new(pod_cidr: String) -> Self {
        Self {
            sandboxes: HashMap::new(),
            containers: HashMap::new(),
            names: HashMap::new(),
            pod_cidr,
            next_ip: 0,
        }
    }
}

/// The simulated container runtime.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(super) state: Mutex<State>,
    pub(super) images: Mutex<Images>,
    pub(super) conditions: Mutex<Conditions>,
    pub(super) image_fs: Mutex<ImageFs>,
    pub(crate) faults: Faults,
    /// Where the host paths of requests are.
    pub(crate) host_root: HostRoot,
    pub(super) events: broadcast::Sender<v1::ContainerEventResponse>,
    /// Bumped on restart and shutdown: open event streams end.
    pub(super) epoch: watch::Sender<u64>,
    pub(crate) config: Config,
}

/// Event buffer per subscriber; a subscriber that falls further behind is
/// told so and disconnected (it must relist, as after a runtime restart).
pub(super) const EVENT_BUFFER: usize = 16_384;

pub(crate) fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

pub(super) fn new_id() -> String {
    rand::random::<[u8; 32]>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn matches_labels(
    labels: &HashMap<String, String>,
    selector: &HashMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

pub(super) fn invalid(rpc: &'static str, reason: impl Into<String>) -> Error {
    Error::InvalidRequest {
        rpc,
        reason: reason.into(),
    }
}

impl Runtime {
    pub(crate) fn new(config: Config) -> Self {
        Self {
            state: Mutex::new(State::new(super::network::default_network())),
            images: Mutex::new(Images::new(config.image_catalog.clone())),
            conditions: Mutex::default(),
            image_fs: Mutex::default(),
            faults: Faults::default(),
            host_root: HostRoot::new((!config.defer_host_root).then(|| {
                config
                    .host_root
                    .clone()
                    .unwrap_or_else(|| PathBuf::from("/"))
            })),
            events: broadcast::channel(EVENT_BUFFER).0,
            epoch: watch::channel(0).0,
            config,
        }
    }

    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}
