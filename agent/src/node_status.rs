//! Node registration and node status (the kubelet's `kubelet_node_status.go`
//! and `nodestatus/setters.go`).
//!
//! [`register`] creates the Node, or re-uses an existing one after a
//! restart. The status loop computes addresses, node info, capacity and
//! allocatable and the `Ready`, `MemoryPressure`, `DiskPressure`,
//! `PIDPressure` conditions every `node_status_update_frequency`
//! (heartbeat time on every sync, transition time only on change) and
//! writes them when something changed or every
//! `node_status_report_frequency`. `Ready` is `False/KubeletNotReady` while
//! the runtime reports NotReady or cannot be reached.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    DaemonEndpoint, Node, NodeAddress, NodeCondition, NodeDaemonEndpoints, NodeStatus,
    NodeSystemInfo,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::Timings;
use crate::backoff::go_duration;
use crate::events;
use crate::metrics::Metrics;
use crate::pleg::Snapshot;
use crate::runtime::Runtime;
use crate::status_manager::now;

/// The version string the agent reports as `kubeletVersion`.
pub const KUBELET_VERSION: &str = concat!("v1.36.0-nodeconform.", env!("CARGO_PKG_VERSION"));

/// Errors from node registration.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or failed the request.
    #[error("{op} node {node}")]
    Api {
        /// What was attempted.
        op: &'static str,
        /// The node name.
        node: String,
        /// The API error.
        #[source]
        source: kube::Error,
    },
}

/// What the node reports about itself.
#[derive(Debug, Clone)]
pub struct Config {
    /// Node name.
    pub node_name: String,
    /// `InternalIP` address.
    pub node_ip: IpAddr,
    /// `pods` capacity.
    pub max_pods: u32,
    /// Root directory (its filesystem gives `ephemeral-storage`).
    pub root_dir: PathBuf,
    /// The port of the agent's kubelet endpoint (`daemonEndpoints.kubeletEndpoint`).
    pub port: u16,
}

fn read_trimmed(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .unwrap_or_default()
}

fn hostname() -> String {
    let h = read_trimmed("/proc/sys/kernel/hostname");
    if h.is_empty() { "localhost".into() } else { h }
}

fn os_image() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_owned())
        })
        .unwrap_or_else(|| "Unknown".into())
}

/// The machine's memory in KiB (`MemTotal`), the node's memory capacity.
pub fn memory_kib() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("MemTotal:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn filesystem_bytes(path: &std::path::Path) -> u64 {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c_path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return 0;
    };
    let mut stat: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: c_path is a valid NUL-terminated string and stat a valid out pointer.
    let rc = unsafe { libc::statvfs(c_path.as_ptr(), &mut stat) };
    if rc != 0 {
        return 0;
    }
    #[allow(clippy::unnecessary_cast)]
    let bytes = (stat.f_blocks as u64).saturating_mul(stat.f_frsize as u64);
    bytes
}

fn arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "arm" => "arm",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        other => other,
    }
}

/// The labels the kubelet puts on its Node.
pub fn labels(node_name: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("kubernetes.io/hostname".into(), node_name.to_owned()),
        ("kubernetes.io/os".into(), "linux".into()),
        ("kubernetes.io/arch".into(), arch().into()),
        ("beta.kubernetes.io/os".into(), "linux".into()),
        ("beta.kubernetes.io/arch".into(), arch().into()),
    ])
}

/// The CPUs the agent may use, the node's CPU capacity.
pub fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn capacity(config: &Config) -> BTreeMap<String, Quantity> {
    let cpus = cpus();
    let root = if config.root_dir.exists() {
        config.root_dir.clone()
    } else {
        PathBuf::from("/")
    };
    BTreeMap::from([
        ("cpu".into(), Quantity(cpus.to_string())),
        ("memory".into(), Quantity(format!("{}Ki", memory_kib()))),
        ("pods".into(), Quantity(config.max_pods.to_string())),
        (
            "ephemeral-storage".into(),
            Quantity(format!("{}Ki", filesystem_bytes(&root) / 1024)),
        ),
    ])
}

/// Runtime health as the node status sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeHealth {
    /// `runtime://version`, once known.
    pub version: Option<String>,
    /// Why the node is not ready; empty when it is.
    pub problems: Vec<String>,
}

/// The conditions, keeping transition times of unchanged ones and stamping heartbeats.
pub fn conditions(
    previous: &[NodeCondition],
    health: &RuntimeHealth,
    now: Time,
) -> Vec<NodeCondition> {
    let ready = health.problems.is_empty();
    let wanted = [
        (
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available".to_owned(),
        ),
        (
            "DiskPressure",
            "False",
            "KubeletHasNoDiskPressure",
            "kubelet has no disk pressure".to_owned(),
        ),
        (
            "PIDPressure",
            "False",
            "KubeletHasSufficientPID",
            "kubelet has sufficient PID available".to_owned(),
        ),
        if ready {
            (
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status".to_owned(),
            )
        } else {
            (
                "Ready",
                "False",
                "KubeletNotReady",
                health.problems.join(", "),
            )
        },
    ];
    wanted
        .into_iter()
        .map(|(type_, status, reason, message)| {
            let transition = previous
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| now.clone());
            NodeCondition {
                type_: type_.into(),
                status: status.into(),
                reason: Some(reason.into()),
                message: Some(message),
                last_heartbeat_time: Some(now.clone()),
                last_transition_time: Some(transition),
            }
        })
        .collect()
}

/// The full node status.
pub fn status(
    config: &Config,
    health: &RuntimeHealth,
    previous: &[NodeCondition],
    now: Time,
) -> NodeStatus {
    let cap = capacity(config);
    NodeStatus {
        addresses: Some(vec![
            NodeAddress {
                type_: "InternalIP".into(),
                address: config.node_ip.to_string(),
            },
            NodeAddress {
                type_: "Hostname".into(),
                address: hostname(),
            },
        ]),
        allocatable: Some(cap.clone()),
        capacity: Some(cap),
        conditions: Some(conditions(previous, health, now)),
        daemon_endpoints: Some(NodeDaemonEndpoints {
            kubelet_endpoint: Some(DaemonEndpoint {
                port: i32::from(config.port),
            }),
        }),
        declared_features: Some(
            crate::node_features::DECLARED
                .iter()
                .map(|f| (*f).to_owned())
                .collect(),
        ),
        node_info: Some(NodeSystemInfo {
            architecture: arch().into(),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id"),
            container_runtime_version: health.version.clone().unwrap_or_default(),
            kernel_version: read_trimmed("/proc/sys/kernel/osrelease"),
            kube_proxy_version: String::new(),
            kubelet_version: KUBELET_VERSION.into(),
            machine_id: read_trimmed("/etc/machine-id"),
            operating_system: "linux".into(),
            os_image: os_image(),
            system_uuid: read_trimmed("/sys/class/dmi/id/product_uuid"),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Whether two statuses differ in more than heartbeat times.
pub fn changed(a: &NodeStatus, b: &NodeStatus) -> bool {
    let strip = |s: &NodeStatus| {
        let mut s = s.clone();
        for c in s.conditions.iter_mut().flatten() {
            c.last_heartbeat_time = None;
        }
        s
    };
    strip(a) != strip(b)
}

/// Registers the node, or re-uses the existing Node object; returns it.
pub async fn register(
    client: &kube::Client,
    config: &Config,
    metrics: &Metrics,
) -> Result<Node, Error> {
    let api: Api<Node> = Api::all(client.clone());
    let mut node = Node::default();
    node.metadata.name = Some(config.node_name.clone());
    node.metadata.labels = Some(labels(&config.node_name));
    let health = RuntimeHealth {
        version: None,
        problems: vec!["container runtime status check may not have completed yet".into()],
    };
    node.status = Some(status(config, &health, &[], Time(now())));
    let created = api.create(&PostParams::default(), &node).await;
    metrics.api_call("create nodes", created.is_ok());
    match created {
        Ok(node) => Ok(node),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {
            let patch = serde_json::json!({ "metadata": { "labels": labels(&config.node_name) } });
            let result = api
                .patch(
                    &config.node_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await;
            metrics.api_call("patch nodes", result.is_ok());
            result.map_err(|source| Error::Api {
                op: "updating existing",
                node: config.node_name.clone(),
                source,
            })
        }
        Err(source) => Err(Error::Api {
            op: "registering",
            node: config.node_name.clone(),
            source,
        }),
    }
}

/// What the node's `Ready` condition checks (the kubelet's `runtimeState`
/// health checks): the runtime's `Status`, and how recently the PLEG relisted.
#[derive(Debug, Clone)]
pub struct HealthChecks {
    /// The CRI runtime.
    pub runtime: Runtime,
    /// The PLEG's latest relist.
    pub pleg: watch::Receiver<Arc<Snapshot>>,
    /// [`Timings::pleg_health_threshold`].
    pub pleg_threshold: Duration,
}

/// The PLEG health check (`GenericPLEG.Healthy`): why the node is not ready
/// when the last successful relist is older than `threshold`. (Before the
/// first relist the agent reports nothing here: its node status already
/// waits for the runtime.)
pub fn pleg_problem(last_relist: Option<Instant>, threshold: Duration) -> Option<String> {
    let elapsed = last_relist?.elapsed();
    (elapsed > threshold).then(|| {
        format!(
            "PLEG is not healthy: pleg was last seen active {} ago; threshold is {}",
            go_duration(elapsed),
            go_duration(threshold)
        )
    })
}

/// Checks the runtime (`Version` once, `Status` every time) and the PLEG.
pub async fn runtime_health(
    checks: &HealthChecks,
    version: &mut Option<String>,
    timeout: Duration,
) -> RuntimeHealth {
    let runtime = &checks.runtime;
    if version.is_none()
        && let Ok(Ok((name, v))) = tokio::time::timeout(timeout, runtime.version()).await
    {
        *version = Some(crate::runtime::version::node_info(&name, &v));
    }
    let mut problems = match runtime.readiness(timeout).await {
        Ok(r) => r.problems,
        Err(_) => vec!["container runtime is down".to_owned()],
    };
    let last_relist = checks.pleg.borrow().at;
    problems.extend(pleg_problem(last_relist, checks.pleg_threshold));
    RuntimeHealth {
        version: version.clone(),
        problems,
    }
}

/// Where the node status loop reports to.
#[derive(Debug)]
pub struct Outputs {
    /// API call counts.
    pub metrics: Arc<Metrics>,
    /// Condition events (`NodeReady`, `NodeHasSufficientMemory`, …).
    pub events: events::Recorder,
    /// The Node as last written (the lease's owner, the agent's readiness).
    pub node: watch::Sender<Option<Node>>,
}

/// The event the kubelet records when a node condition takes `status`
/// (`recordNodeStatusEvent`).
pub fn condition_event(type_: &str, status: &str) -> Option<&'static str> {
    let event = match (type_, status) {
        ("Ready", "True") => "NodeReady",
        ("Ready", _) => "NodeNotReady",
        ("MemoryPressure", "True") => "NodeHasInsufficientMemory",
        ("MemoryPressure", _) => "NodeHasSufficientMemory",
        ("DiskPressure", "True") => "NodeHasDiskPressure",
        ("DiskPressure", _) => "NodeHasNoDiskPressure",
        ("PIDPressure", "True") => "NodeHasInsufficientPID",
        ("PIDPressure", _) => "NodeHasSufficientPID",
        _ => return None,
    };
    Some(event)
}

/// Runs the node status loop: registers the node (retrying), then syncs
/// its status; `ready` becomes true after the first status write. Each
/// condition's status, first written and then at every change, is also
/// recorded as an event.
pub async fn run(
    client: kube::Client,
    config: Config,
    checks: HealthChecks,
    timings: Timings,
    outputs: Outputs,
    mut shutdown: watch::Receiver<bool>,
) {
    let Outputs {
        metrics,
        events,
        node: node_tx,
    } = outputs;
    let node = loop {
        match register(&client, &config, &metrics).await {
            Ok(node) => break node,
            Err(error) => {
                tracing::warn!(error = %error, "node registration failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(timings.node_status_update_frequency.max(Duration::from_millis(200))) => {}
                    _ = shutdown.changed() => return,
                }
            }
        }
    };
    let api: Api<Node> = Api::all(client);
    let mut previous = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let mut last_written: Option<(NodeStatus, Instant)> = None;
    let mut announced: HashMap<String, String> = HashMap::new();
    let mut version = None;
    let mut registered = Some(node);
    let mut tick = tokio::time::interval(timings.node_status_update_frequency);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => return,
        }
        let health = runtime_health(
            &checks,
            &mut version,
            timings
                .node_status_update_frequency
                .max(Duration::from_secs(1)),
        )
        .await;
        let new = status(&config, &health, &previous, Time(now()));
        let due = match &last_written {
            None => true,
            Some((old, at)) => {
                changed(old, &new) || at.elapsed() >= timings.node_status_report_frequency
            }
        };
        if !due {
            continue;
        }
        let body = serde_json::json!({ "status": new });
        let result = api
            .patch_status(
                &config.node_name,
                &PatchParams::default(),
                &Patch::Merge(&body),
            )
            .await;
        metrics.api_call("patch nodes/status", result.is_ok());
        match result {
            Ok(node) => {
                previous = new.conditions.clone().unwrap_or_default();
                for c in &previous {
                    if announced.get(&c.type_) != Some(&c.status)
                        && let Some(event) = condition_event(&c.type_, &c.status)
                    {
                        events.node(
                            events::Type::Normal,
                            event,
                            format!("Node {} status is now: {event}", config.node_name),
                        );
                        announced.insert(c.type_.clone(), c.status.clone());
                    }
                }
                last_written = Some((new, Instant::now()));
                if let Some(n) = registered.take() {
                    let _ = n;
                }
                node_tx.send_replace(Some(node));
            }
            Err(error) => tracing::warn!(%error, "writing node status failed; will retry"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn t(s: i64) -> Time {
        Time(Timestamp::from_second(s).unwrap())
    }

    #[test]
    fn ready_transitions_keep_times() {
        let ok = RuntimeHealth {
            version: None,
            problems: vec![],
        };
        let down = RuntimeHealth {
            version: None,
            problems: vec!["container runtime is down".into()],
        };
        let first = conditions(&[], &ok, t(10));
        let ready = first.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.reason.as_deref(), Some("KubeletReady"));
        let second = conditions(&first, &ok, t(20));
        let ready = second.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.last_transition_time, Some(t(10)));
        assert_eq!(ready.last_heartbeat_time, Some(t(20)));
        let third = conditions(&second, &down, t(30));
        let ready = third.iter().find(|c| c.type_ == "Ready").unwrap();
        assert_eq!(ready.status, "False");
        assert_eq!(ready.reason.as_deref(), Some("KubeletNotReady"));
        assert_eq!(ready.message.as_deref(), Some("container runtime is down"));
        assert_eq!(ready.last_transition_time, Some(t(30)));
        let mem = third.iter().find(|c| c.type_ == "MemoryPressure").unwrap();
        assert_eq!(mem.last_transition_time, Some(t(10)));
    }

    #[test]
    fn heartbeat_alone_is_no_change() {
        let cfg = Config {
            node_name: "n".into(),
            node_ip: "127.0.0.1".parse().unwrap(),
            max_pods: 110,
            root_dir: "/".into(),
            port: 0,
        };
        let ok = RuntimeHealth {
            version: Some("fake://1".into()),
            problems: vec![],
        };
        let a = status(&cfg, &ok, &[], t(10));
        let b = status(&cfg, &ok, a.conditions.as_deref().unwrap(), t(20));
        assert!(!changed(&a, &b));
        let cap = a.capacity.unwrap();
        for key in ["cpu", "memory", "pods", "ephemeral-storage"] {
            assert!(cap.contains_key(key), "{key}");
        }
    }

    #[test]
    fn pleg_is_unhealthy_only_past_its_threshold() {
        let threshold = Duration::from_secs(180);
        assert_eq!(pleg_problem(None, threshold), None, "no relist yet");
        assert_eq!(pleg_problem(Some(Instant::now()), threshold), None);
        let stale = Instant::now() - Duration::from_secs(200);
        let message = pleg_problem(Some(stale), threshold).expect("unhealthy");
        assert!(
            message.starts_with("PLEG is not healthy: pleg was last seen active 3m20")
                && message.ends_with(" ago; threshold is 3m0s"),
            "{message}"
        );
    }
}
