//! Pod admission on the node (the kubelet's `lifecycle` admit handlers): before
//! a new pod gets a worker, the kubelet asks its handlers in order whether it
//! may run here, and fails the pod for good when one says no (`rejectPod`):
//! phase `Failed`, the handler's reason, `Pod was rejected: <message>`, and a
//! Warning event, without creating any sandbox.
//!
//! The handlers built here, in the kubelet's order: the sysctl allowlist
//! (`SysctlForbidden`), then the predicate handler: resources that do not fit
//! (`OutOfcpu`, `OutOfmemory`, `OutOfpods`, …), `NodeAffinity`, `NodeName`,
//! `NodePorts`, untolerated `NoExecute` taints (`TaintToleration`), a
//! `kubernetes.io/os` label (`PodOSSelectorNodeLabelDoesNotMatch`) or
//! `spec.os.name` (`PodOSNotSupported`) other than the node's; [`crate::apparmor`]'s
//! handler follows (`AppArmor`). The eviction,
//! device and shutdown handlers have nothing to say on a node without
//! pressure, devices or shutdown, which is the only node the agent runs.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, Pod, Taint, Toleration};

use crate::resource;

/// The OS the agent runs pods for (the kubelet's `runtime.GOOS`).
pub const NODE_OS: &str = "linux";

/// Why a pod may not run on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// One word, as the pod's `status.reason` and the event's reason.
    pub reason: String,
    /// The event's message (the status says `Pod was rejected: <message>`).
    pub message: String,
}

impl Rejection {
    pub(crate) fn new(reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            message: message.into(),
        }
    }
}

/// The sysctls a pod may set (`sysctl.patternAllowlist`): the safe ones and
/// those the node allows with `--allowed-unsafe-sysctls` (a name, or a prefix
/// ending in `*`).
#[derive(Debug, Clone)]
pub struct SysctlAllowlist {
    names: Vec<String>,
    prefixes: Vec<String>,
}

/// `SafeSysctlAllowlist` on a kernel newer than 3.16.
const SAFE_SYSCTLS: [&str; 6] = [
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.ip_local_reserved_ports",
];

impl Default for SysctlAllowlist {
    fn default() -> Self {
        Self::new(&[])
    }
}

impl SysctlAllowlist {
    /// The safe sysctls plus `unsafe_allowed`.
    pub fn new(unsafe_allowed: &[String]) -> Self {
        let mut names: Vec<String> = SAFE_SYSCTLS.iter().map(|s| (*s).to_owned()).collect();
        let mut prefixes = Vec::new();
        for pattern in unsafe_allowed {
            let pattern = dotted(pattern);
            match pattern.strip_suffix('*') {
                Some(prefix) => prefixes.push(prefix.to_owned()),
                None => names.push(pattern),
            }
        }
        Self { names, prefixes }
    }

    /// `validateSysctl`: allowed, and not a network (IPC) sysctl of a pod on
    /// the host's network (IPC namespace).
    fn validate(&self, name: &str, host_network: bool, host_ipc: bool) -> Result<(), String> {
        let name = dotted(name);
        let allowed = self.names.contains(&name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()));
        if !allowed {
            return Err(format!("{name:?} not allowlisted"));
        }
        match namespace(&name) {
            Some("ipc") if host_ipc => Err(format!("{name:?} not allowed with host ipc enabled")),
            Some("net") if host_network => {
                Err(format!("{name:?} not allowed with host net enabled"))
            }
            _ => Ok(()),
        }
    }

    /// The sysctl handler: `SysctlForbidden` for the first sysctl not allowed.
    fn admit(&self, pod: &Pod) -> Result<(), Rejection> {
        let Some(spec) = pod.spec.as_ref() else {
            return Ok(());
        };
        let sysctls = spec
            .security_context
            .as_ref()
            .and_then(|s| s.sysctls.as_deref())
            .unwrap_or_default();
        for sysctl in sysctls {
            let host_network = spec.host_network == Some(true);
            let host_ipc = spec.host_ipc == Some(true);
            if let Err(why) = self.validate(&sysctl.name, host_network, host_ipc) {
                return Err(Rejection::new(
                    "SysctlForbidden",
                    format!("forbidden sysctl: {why}"),
                ));
            }
        }
        Ok(())
    }
}

/// `convertSysctlVariableToDotsSeparator`: `kernel/shm_rmid_forced` →
/// `kernel.shm_rmid_forced` (a name whose first separator is `/` has its `/`
/// and `.` swapped).
fn dotted(name: &str) -> String {
    match name.find(['.', '/']) {
        Some(i) if name.as_bytes()[i] == b'/' => name
            .chars()
            .map(|c| match c {
                '/' => '.',
                '.' => '/',
                c => c,
            })
            .collect(),
        _ => name.to_owned(),
    }
}

/// The namespace a sysctl belongs to (`NamespacedBy`).
fn namespace(name: &str) -> Option<&'static str> {
    if name.starts_with("kernel.shm")
        || name.starts_with("kernel.msg")
        || name == "kernel.sem"
        || name.starts_with("fs.mqueue.")
    {
        Some("ipc")
    } else if name.starts_with("net.") {
        Some("net")
    } else {
        None
    }
}

/// Runs the admit handlers for `pod` on `node`, with `others` the pods already
/// admitted and still running (`canAdmitPod`). `node` is `None` until the
/// agent has read or written its Node (the first moments after a start, when
/// the pods already bound to it arrive): the predicates that need the Node are
/// skipped then, where the kubelet would check its locally built initial Node.
pub fn admit(
    sysctls: &SysctlAllowlist,
    node: Option<&Node>,
    pod: &Pod,
    others: &[&Pod],
) -> Result<(), Rejection> {
    sysctls.admit(pod)?;
    if let Some(first) = node.and_then(|node| general_filter(node, pod, others).into_iter().next())
    {
        return Err(first);
    }
    let os_label = "kubernetes.io/os";
    let pod_os = pod.metadata.labels.as_ref().and_then(|l| l.get(os_label));
    if pod_os.is_some_and(|os| os != NODE_OS) {
        return Err(Rejection::new(
            "PodOSSelectorNodeLabelDoesNotMatch",
            "Failed to admit pod as the `kubernetes.io/os` label doesn't match node label",
        ));
    }
    let os_field = pod.spec.as_ref().and_then(|s| s.os.as_ref());
    if os_field.is_some_and(|os| os.name != NODE_OS) {
        return Err(Rejection::new(
            "PodOSNotSupported",
            "Failed to admit pod as the OS field doesn't match node OS",
        ));
    }
    Ok(())
}

/// `generalFilter`: every failing predicate, in the scheduler's order
/// (`AdmissionCheck` with all failures, then taints); the first one is the
/// pod's rejection.
fn general_filter(node: &Node, pod: &Pod, others: &[&Pod]) -> Vec<Rejection> {
    let mut reasons = insufficient_resources(node, pod, others);
    // Since 1.31 the message says why, in the scheduler plugin's words (kubernetes#125498).
    let predicate =
        |name: &str, why: &str| Rejection::new(name, format!("Predicate {name} failed: {why}"));
    if !matches_node_affinity(pod, node) {
        reasons.push(predicate(
            "NodeAffinity",
            "node(s) didn't match Pod's node affinity/selector",
        ));
    }
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let pod_node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref());
    if pod_node.is_some_and(|n| !n.is_empty() && n != node_name) {
        reasons.push(predicate(
            "NodeName",
            "node(s) didn't match the requested node name",
        ));
    }
    if host_ports_conflict(pod, others) {
        reasons.push(predicate(
            "NodePorts",
            "node(s) didn't have free ports for the requested pod ports",
        ));
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.as_deref());
    let tolerations = pod.spec.as_ref().and_then(|s| s.tolerations.as_deref());
    let untolerated = taints.unwrap_or_default().iter().any(|t| {
        t.effect == "NoExecute"
            && !tolerations
                .unwrap_or_default()
                .iter()
                .any(|tol| tolerates(tol, t))
    });
    if untolerated && !crate::pod_config::is_static(pod) {
        reasons.push(predicate(
            "TaintToleration",
            "node(s) had taints that the pod didn't tolerate",
        ));
    }
    reasons
}

/// `noderesources.Fits`: the pod count, then CPU, memory, ephemeral storage
/// and every other requested resource against what the node can allocate
/// minus what the other pods request.
fn insufficient_resources(node: &Node, pod: &Pod, others: &[&Pod]) -> Vec<Rejection> {
    let allocatable = node
        .status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref())
        .map(resource::amounts)
        .unwrap_or_default();
    let mut used: BTreeMap<String, i64> = BTreeMap::new();
    for other in others {
        for (name, value) in resource::pod_requests(other) {
            *used.entry(name).or_default() += value;
        }
    }
    let get = |map: &BTreeMap<String, i64>, name: &str| map.get(name).copied().unwrap_or(0);
    let insufficient = |name: &str, requested: i64, used: i64, capacity: i64| {
        Rejection::new(
            format!("OutOf{name}"),
            format!(
                "Node didn't have enough resource: {name}, requested: {requested}, used: {used}, capacity: {capacity}"
            ),
        )
    };
    let mut reasons = Vec::new();
    let allowed_pods = get(&allocatable, "pods");
    let running = i64::try_from(others.len()).unwrap_or(i64::MAX);
    if running + 1 > allowed_pods {
        reasons.push(insufficient("pods", 1, running, allowed_pods));
    }
    let mut requests = resource::pod_requests(pod);
    // `removeMissingExtendedResources`: an extended resource the node does
    // not have at all is left to its device plugin, not refused here.
    requests.retain(|name, _| !is_extended(name) || allocatable.contains_key(name));
    requests.retain(|_, value| *value != 0);
    let ordered = ["cpu", "memory", "ephemeral-storage"];
    let rest = requests
        .keys()
        .filter(|name| !ordered.contains(&name.as_str()) && *name != "pods");
    for name in ordered.iter().copied().chain(rest.map(String::as_str)) {
        let requested = get(&requests, name);
        if requested == 0 {
            continue;
        }
        let capacity = get(&allocatable, name);
        let in_use = get(&used, name);
        if requested > capacity - in_use {
            reasons.push(insufficient(name, requested, in_use, capacity));
        }
    }
    reasons
}

/// `IsExtendedResourceName`: a domain-prefixed name outside `kubernetes.io/`
/// (and not a quota name).
fn is_extended(name: &str) -> bool {
    name.contains('/') && !name.contains("kubernetes.io/") && !name.starts_with("requests.")
}

/// `GetRequiredNodeAffinity(pod).Match(node)`: `nodeSelector` and the required
/// node affinity terms (any term; all requirements within one).
fn matches_node_affinity(pod: &Pod, node: &Node) -> bool {
    if crate::mutants::active(crate::mutants::Mutant::NodeAffinityIgnored) {
        return true;
    }
    let Some(spec) = pod.spec.as_ref() else {
        return true;
    };
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let selector_ok = spec
        .node_selector
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    if !selector_ok {
        return false;
    }
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let Some(required) = required else {
        return true;
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    required.node_selector_terms.iter().any(|term| {
        let expressions = term.match_expressions.as_deref().unwrap_or_default();
        let fields = term.match_fields.as_deref().unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions
            .iter()
            .all(|r| requirement_matches(r, labels.get(&r.key)))
            && fields.iter().all(|r| {
                let value = (r.key == "metadata.name").then_some(&name);
                r.key == "metadata.name" && requirement_matches(r, value)
            })
    })
}

/// One node selector requirement against the label's value (or its absence).
fn requirement_matches(r: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let number = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" | "Lt" => {
            let (Some(have), [bound]) = (value.and_then(|v| number(v)), values) else {
                return false;
            };
            let Some(bound) = number(bound) else {
                return false;
            };
            if r.operator == "Gt" {
                have > bound
            } else {
                have < bound
            }
        }
        _ => false,
    }
}

/// `ToleratesTaint`.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect_ok = toleration
        .effect
        .as_deref()
        .is_none_or(|e| e.is_empty() || e == taint.effect);
    let key = toleration.key.as_deref().unwrap_or_default();
    if !effect_ok || (!key.is_empty() && key != taint.key) {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("Equal") {
        "Exists" => true,
        "Equal" | "" => {
            !key.is_empty()
                && toleration.value.as_deref().unwrap_or_default()
                    == taint.value.as_deref().unwrap_or_default()
        }
        _ => false,
    }
}

/// `nodeports.Fits`: a host port (protocol, port) the pod wants that another
/// pod holds on the same or a wildcard address.
fn host_ports_conflict(pod: &Pod, others: &[&Pod]) -> bool {
    fn host_ports(pod: &Pod) -> Vec<(String, String, i32)> {
        let spec = pod.spec.as_ref();
        let containers = spec.map(|s| s.containers.iter()).into_iter().flatten();
        containers
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(|p| {
                let port = p.host_port.filter(|h| *h > 0)?;
                let ip = p.host_ip.clone().filter(|ip| !ip.is_empty());
                let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".into());
                Some((ip.unwrap_or_else(|| "0.0.0.0".into()), protocol, port))
            })
            .collect()
    }
    let wanted = host_ports(pod);
    if wanted.is_empty() {
        return false;
    }
    let held: Vec<_> = others.iter().flat_map(|o| host_ports(o)).collect();
    wanted.iter().any(|(ip, protocol, port)| {
        held.iter().any(|(held_ip, held_protocol, held_port)| {
            port == held_port
                && protocol == held_protocol
                && (ip == held_ip || ip == "0.0.0.0" || held_ip == "0.0.0.0")
        })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n1", "labels": {"kubernetes.io/os": "linux", "zone": "a", "rank": "5"}},
            "status": {"allocatable": {"cpu": "2", "memory": "4Gi", "pods": "3"}},
        }))
        .unwrap()
    }

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        if spec.get("containers").is_none() {
            spec["containers"] = json!([{"name": "c"}]);
        }
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
    }

    fn reject(p: &Pod, others: &[&Pod]) -> Option<Rejection> {
        admit(&SysctlAllowlist::default(), Some(&node()), p, others).err()
    }

    #[test]
    fn admits_a_plain_pod_and_rejects_a_foreign_os() {
        assert_eq!(reject(&pod(json!({})), &[]), None);
        let windows = reject(&pod(json!({"os": {"name": "windows"}})), &[]).unwrap();
        assert_eq!(windows.reason, "PodOSNotSupported");
        assert_eq!(
            windows.message,
            "Failed to admit pod as the OS field doesn't match node OS"
        );
    }

    #[test]
    fn sysctls_outside_the_allowlist_are_forbidden() {
        let unsafe_one =
            pod(json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}));
        let r = reject(&unsafe_one, &[]).unwrap();
        assert_eq!(r.reason, "SysctlForbidden");
        assert_eq!(
            r.message,
            "forbidden sysctl: \"kernel.msgmax\" not allowlisted"
        );
        let allowed = SysctlAllowlist::new(&["kernel.msg*".into()]);
        assert!(admit(&allowed, Some(&node()), &unsafe_one, &[]).is_ok());
        let slashes = pod(
            json!({"securityContext": {"sysctls": [{"name": "kernel/shm_rmid_forced", "value": "1"}]}}),
        );
        assert_eq!(reject(&slashes, &[]), None);
        let host_net = pod(
            json!({"hostNetwork": true, "securityContext": {"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]}}),
        );
        assert_eq!(
            reject(&host_net, &[]).unwrap().message,
            "forbidden sysctl: \"net.ipv4.tcp_syncookies\" not allowed with host net enabled"
        );
    }

    #[test]
    fn resources_that_do_not_fit_name_the_first_short_resource() {
        let big = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"cpu": "1500m"}}}]}),
        );
        assert_eq!(reject(&big, &[]), None);
        let r = reject(&big, &[&big]).unwrap();
        assert_eq!(r.reason, "OutOfcpu");
        assert_eq!(
            r.message,
            "Node didn't have enough resource: cpu, requested: 1500, used: 1500, capacity: 2000"
        );
        let plain = pod(json!({}));
        let r = reject(&plain, &[&plain, &plain, &plain]).unwrap();
        assert_eq!(r.reason, "OutOfpods");
        let init_heavy = pod(json!({
            "initContainers": [{"name": "i", "resources": {"requests": {"memory": "5Gi"}}}],
        }));
        assert_eq!(reject(&init_heavy, &[]).unwrap().reason, "OutOfmemory");
        let device = pod(
            json!({"containers": [{"name": "c", "resources": {"requests": {"example.com/gpu": "1"}}}]}),
        );
        assert_eq!(reject(&device, &[]), None);
    }

    #[test]
    fn node_affinity_selector_ports_and_taints() {
        let selector = pod(json!({"nodeSelector": {"zone": "b"}}));
        let r = reject(&selector, &[]).unwrap();
        assert_eq!(
            (r.reason.as_str(), r.message.as_str()),
            (
                "NodeAffinity",
                "Predicate NodeAffinity failed: node(s) didn't match Pod's node affinity/selector"
            )
        );
        let affinity = |op: &str, values: serde_json::Value| {
            pod(
                json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [{"key": "rank", "operator": op, "values": values}]}]}}}}),
            )
        };
        assert_eq!(reject(&affinity("Gt", json!(["4"])), &[]), None);
        assert!(reject(&affinity("Lt", json!(["4"])), &[]).is_some());
        assert_eq!(reject(&affinity("In", json!(["5", "6"])), &[]), None);
        let port = pod(
            json!({"containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}]}]}),
        );
        assert_eq!(reject(&port, &[&port]).unwrap().reason, "NodePorts");
        let mut tainted = node();
        tainted.spec =
            serde_json::from_value(json!({"taints": [{"key": "k", "effect": "NoExecute"}]}))
                .unwrap();
        let plain = pod(json!({}));
        let r = admit(&SysctlAllowlist::default(), Some(&tainted), &plain, &[]).unwrap_err();
        assert_eq!(r.reason, "TaintToleration");
        let tolerant = pod(json!({"tolerations": [{"key": "k", "operator": "Exists"}]}));
        assert!(admit(&SysctlAllowlist::default(), Some(&tainted), &tolerant, &[]).is_ok());
    }
}
