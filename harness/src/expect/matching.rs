//! Does one pod state match a pattern? The first mismatch, in words, or `None`.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ContainerState, ContainerStatus, Pod, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::case::pattern::{HostIp, LastStatePattern, ResourcesPattern};
use crate::case::{ConditionPattern, ContainerPattern, ContainerStateKind, PodPattern};

use super::timeline::State;

/// `None` when `state` matches `pattern`, else what differs.
pub fn mismatch(pattern: &PodPattern, state: &State) -> Option<String> {
    if pattern.gone {
        return (!state.is_gone()).then(|| "the pod still exists".to_string());
    }
    pod_mismatch(pattern, &state.pod)
}

/// `None` when `pod` matches the field checks of `pattern` (ignores `gone`).
pub fn pod_mismatch(pattern: &PodPattern, pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref();
    if let Some(phase) = pattern.phase {
        let seen = status.and_then(|s| s.phase.as_deref()).unwrap_or("<none>");
        if seen != phase.as_str() {
            return Some(format!("phase is {seen}, expected {}", phase.as_str()));
        }
    }
    if let Some(reason) = &pattern.reason {
        let seen = status.and_then(|s| s.reason.as_deref()).unwrap_or_default();
        if seen != reason {
            return Some(format!(
                "status.reason is {}, expected {}",
                or_none(seen),
                or_none(reason)
            ));
        }
    }
    if let Some(message) = &pattern.message {
        let seen = status.and_then(|s| s.message.as_deref()).unwrap_or("");
        if !seen.contains(message.as_str()) {
            return Some(format!(
                "status.message {seen:?} does not contain {message:?}"
            ));
        }
    }
    if let Some(want) = &pattern.message_equals {
        let seen = status.and_then(|s| s.message.as_deref()).unwrap_or("");
        if seen != want {
            return Some(format!("status.message is {seen:?}, expected {want:?}"));
        }
    }
    if let Some(want) = &pattern.host_ip {
        let seen = status.and_then(|s| s.host_ip.as_deref()).unwrap_or("");
        // hostIPs is filled from 1.29 on (PodHostIPs); where it is, it starts with hostIP.
        let listed = status
            .and_then(|s| s.host_ips.as_ref())
            .and_then(|ips| ips.first())
            .map(|ip| ip.ip.as_str());
        let problem = match want {
            _ if seen.is_empty() => Some("hostIP is not set".to_string()),
            _ if listed.is_some_and(|listed| listed != seen) => Some(format!(
                "hostIPs[0] is {:?}, hostIP {seen:?}",
                listed.unwrap_or_default()
            )),
            HostIp::Present => None,
            HostIp::NodeInternalIp => {
                Some("hostIP cannot be compared: the node's InternalIP is unknown".to_string())
            }
            HostIp::Is(ip) if ip != seen => Some(format!(
                "hostIP is {seen}, expected the node's InternalIP {ip}"
            )),
            HostIp::Is(_) => None,
        };
        if problem.is_some() {
            return problem;
        }
    }
    if pattern.host_ips.is_some() {
        let seen: Vec<&str> = status
            .and_then(|s| s.host_ips.as_ref())
            .into_iter()
            .flatten()
            .map(|ip| ip.ip.as_str())
            .collect();
        let want = &pattern.resolved.node_host_ips;
        if seen != *want {
            return Some(format!(
                "hostIPs are {seen:?}, expected the node's {want:?}"
            ));
        }
    }
    for (key, want) in &pattern.labels {
        let seen = pod.metadata.labels.as_ref().and_then(|l| l.get(key));
        if seen != Some(want) {
            return Some(format!(
                "label {key} is {}, expected {want:?}",
                seen.map_or("absent".to_owned(), |v| format!("{v:?}"))
            ));
        }
    }
    if let Some(deleting) = pattern.deleting {
        let seen = pod.metadata.deletion_timestamp.is_some();
        if seen != deleting {
            return Some(format!(
                "deletionTimestamp set: {seen}, expected {deleting}"
            ));
        }
    }
    for (field, want, seen) in [
        ("generation", pattern.generation, pod.metadata.generation),
        (
            "observedGeneration",
            pattern.observed_generation,
            status.and_then(|s| s.observed_generation),
        ),
    ] {
        // An absent generation reads as Go's zero value, as clients compare it.
        if let Some(want) = want
            && seen.unwrap_or(0) != want
        {
            return Some(format!(
                "{field} is {}, expected {want}",
                seen.map_or("absent".to_owned(), |g| g.to_string())
            ));
        }
    }
    if let Some(has_ip) = pattern.has_pod_ip {
        let seen = status
            .and_then(|s| s.pod_ip.as_deref())
            .is_some_and(|ip| !ip.is_empty());
        if seen != has_ip {
            return Some(format!("podIP set: {seen}, expected {has_ip}"));
        }
    }
    if let Some(has_ips) = pattern.has_pod_ips {
        let seen = status
            .and_then(|s| s.pod_ips.as_ref())
            .is_some_and(|ips| !ips.is_empty());
        if seen != has_ips {
            return Some(format!("podIPs set: {seen}, expected {has_ips}"));
        }
    }
    if let Some(m) = identity_mismatch(pattern, pod) {
        return Some(m);
    }
    for (type_, cp) in &pattern.conditions {
        let found = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| &c.type_ == type_))
            .map(|c| Found {
                status: &c.status,
                reason: c.reason.as_deref(),
                message: c.message.as_deref(),
                observed_generation: c.observed_generation,
            });
        if let Some(m) = condition_mismatch(type_, cp, found) {
            return Some(m);
        }
    }
    if let Some(m) = transition_order_mismatch(&pattern.transition_order, status) {
        return Some(m);
    }
    for type_ in &pattern.absent_conditions {
        let present = status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| &c.type_ == type_));
        if present {
            return Some(format!("condition {type_} is present, expected absent"));
        }
    }
    if let Some(want) = &pattern.resources
        && let Some(m) = resources_mismatch(want, status.and_then(|s| s.resources.as_ref()))
    {
        return Some(format!("pod {m}"));
    }
    if let Some(want) = &pattern.allocated_resources
        && let Some(m) =
            resource_list_mismatch(want, status.and_then(|s| s.allocated_resources.as_ref()))
    {
        return Some(format!("pod allocatedResources: {m}"));
    }
    for (list, map, label) in [
        (
            status.and_then(|s| s.container_statuses.as_ref()),
            &pattern.containers,
            "container",
        ),
        (
            status.and_then(|s| s.init_container_statuses.as_ref()),
            &pattern.init_containers,
            "init container",
        ),
    ] {
        for (name, cp) in map {
            let Some(cs) = list.into_iter().flatten().find(|c| &c.name == name) else {
                return Some(format!("{label} {name} has no status"));
            };
            if let Some(m) = container_mismatch(cp, cs) {
                return Some(format!("{label} {name}: {m}"));
            }
        }
    }
    None
}

/// The spec's images, whether it is a mirror pod, whether it is the first object seen.
fn identity_mismatch(pattern: &PodPattern, pod: &Pod) -> Option<String> {
    for (name, want) in &pattern.images {
        let seen = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .find(|c| &c.name == name)
            .and_then(|c| c.image.as_deref());
        if seen != Some(want.as_str()) {
            return Some(format!(
                "container {name}'s image is {}, expected {want}",
                seen.unwrap_or("<none>")
            ));
        }
    }
    if let Some(want) = pattern.mirror {
        let problem = mirror_problem(pod, pattern.resolved.node.as_ref());
        match (want, problem) {
            (true, Some(problem)) => return Some(format!("not a mirror pod: {problem}")),
            (false, None) => return Some("a mirror pod, expected none".into()),
            _ => {}
        }
    }
    if let Some(want) = pattern.recreated {
        let Some(first) = &pattern.resolved.first_uid else {
            return Some("no earlier state to compare the UID with".into());
        };
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        if (uid != first) != want {
            return Some(if want {
                format!("uid is still the first one, {first}")
            } else {
                format!("uid is {uid}, not the first one, {first}")
            });
        }
    }
    None
}

/// `validateMirrorPod` of the upstream mirror pod tests: why `pod` is not a
/// mirror pod owned by `node` (name, UID), or `None`.
fn mirror_problem(pod: &Pod, node: Option<&(String, String)>) -> Option<String> {
    let annotations = pod.metadata.annotations.clone().unwrap_or_default();
    let hash = annotations
        .get("kubernetes.io/config.hash")
        .filter(|h| !h.is_empty());
    let mirror = annotations
        .get("kubernetes.io/config.mirror")
        .filter(|h| !h.is_empty());
    let Some(hash) = hash else {
        return Some("no kubernetes.io/config.hash annotation".into());
    };
    if mirror != Some(hash) {
        return Some(format!(
            "kubernetes.io/config.mirror is {mirror:?}, expected the hash {hash:?}"
        ));
    }
    match annotations
        .get("kubernetes.io/config.source")
        .map(String::as_str)
    {
        None => return Some("no kubernetes.io/config.source annotation".into()),
        Some("api") => return Some("kubernetes.io/config.source is api".into()),
        Some(_) => {}
    }
    let owners = pod.metadata.owner_references.clone().unwrap_or_default();
    let [owner] = owners.as_slice() else {
        return Some(format!(
            "{} owner references, expected 1 (the Node)",
            owners.len()
        ));
    };
    let node_ok = node.is_none_or(|(name, uid)| &owner.name == name && &owner.uid == uid);
    if owner.api_version != "v1"
        || owner.kind != "Node"
        || owner.controller != Some(true)
        || !node_ok
    {
        return Some(format!(
            "owner reference {}/{} {} (uid {}, controller {:?}), expected the node under test as controller",
            owner.api_version, owner.kind, owner.name, owner.uid, owner.controller
        ));
    }
    None
}

/// A pod or node condition as seen.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// `status`.
    pub status: &'a str,
    /// `reason`.
    pub reason: Option<&'a str>,
    /// `message`.
    pub message: Option<&'a str>,
    /// `observedGeneration` (pod conditions; nodes have none).
    pub observed_generation: Option<i64>,
}

/// `None` when a condition matches; `found = None` when absent.
pub fn condition_mismatch(
    type_: &str,
    cp: &ConditionPattern,
    found: Option<Found<'_>>,
) -> Option<String> {
    let Some(Found {
        status,
        reason,
        message,
        observed_generation,
    }) = found
    else {
        return Some(format!(
            "condition {type_} is absent, expected {}",
            cp.status.as_str()
        ));
    };
    if status != cp.status.as_str() {
        return Some(format!(
            "condition {type_} is {status}, expected {}",
            cp.status.as_str()
        ));
    }
    if let Some(want) = &cp.reason {
        let seen = reason.unwrap_or_default();
        if seen != want {
            return Some(format!(
                "condition {type_} reason is {}, expected {}",
                or_none(seen),
                or_none(want)
            ));
        }
    }
    if let Some(want) = &cp.message {
        let seen = message.unwrap_or("");
        if !seen.contains(want.as_str()) {
            return Some(format!(
                "condition {type_} message {seen:?} does not contain {want:?}"
            ));
        }
    }
    if let Some(want) = &cp.message_equals {
        let seen = message.unwrap_or("");
        if seen != want {
            return Some(format!(
                "condition {type_} message is {seen:?}, expected {want:?}"
            ));
        }
    }
    if let Some(want) = cp.observed_generation
        && observed_generation.unwrap_or(0) != want
    {
        return Some(format!(
            "condition {type_} observedGeneration is {}, expected {want}",
            observed_generation.map_or("absent".to_owned(), |g| g.to_string())
        ));
    }
    None
}

/// A reason for messages: `<none>` when empty.
fn or_none(reason: &str) -> &str {
    if reason.is_empty() { "<none>" } else { reason }
}

fn state_kind(state: Option<&ContainerState>) -> Option<ContainerStateKind> {
    let state = state?;
    if state.terminated.is_some() {
        Some(ContainerStateKind::Terminated)
    } else if state.running.is_some() {
        Some(ContainerStateKind::Running)
    } else if state.waiting.is_some() {
        Some(ContainerStateKind::Waiting)
    } else {
        None
    }
}

fn state_reason(state: Option<&ContainerState>) -> Option<&str> {
    let state = state?;
    state
        .terminated
        .as_ref()
        .and_then(|t| t.reason.as_deref())
        .or_else(|| state.waiting.as_ref().and_then(|w| w.reason.as_deref()))
}

fn state_message(state: Option<&ContainerState>) -> Option<&str> {
    let state = state?;
    state
        .terminated
        .as_ref()
        .and_then(|t| t.message.as_deref())
        .or_else(|| state.waiting.as_ref().and_then(|w| w.message.as_deref()))
}

fn exit_code(state: Option<&ContainerState>) -> Option<i32> {
    state?.terminated.as_ref().map(|t| t.exit_code)
}

fn describe_kind(kind: Option<ContainerStateKind>) -> &'static str {
    kind.map(ContainerStateKind::as_str).unwrap_or("<no state>")
}

fn container_mismatch(cp: &ContainerPattern, cs: &ContainerStatus) -> Option<String> {
    let state = cs.state.as_ref();
    if let Some(want) = cp.state {
        let seen = state_kind(state);
        if seen != Some(want) {
            return Some(format!(
                "state is {}, expected {}",
                describe_kind(seen),
                want.as_str()
            ));
        }
    }
    if let Some(want) = &cp.reason {
        let seen = state_reason(state).unwrap_or("<none>");
        if seen != want {
            return Some(format!("reason is {seen}, expected {want}"));
        }
    }
    if let Some(want) = cp.exit_code {
        match exit_code(state) {
            Some(code) if code == want => {}
            Some(code) => return Some(format!("exit code is {code}, expected {want}")),
            None => return Some(format!("not terminated, expected exit code {want}")),
        }
    }
    if let Some(failed) = cp.failed {
        match exit_code(state) {
            Some(code) if (code != 0) == failed => {}
            Some(code) => {
                return Some(format!(
                    "exit code is {code}, expected {}",
                    if failed { "non-zero" } else { "0" }
                ));
            }
            None => return Some("not terminated, expected an exit code".to_string()),
        }
    }
    if let Some(want) = &cp.message {
        let seen = state_message(state).unwrap_or("");
        if !seen.contains(want.as_str()) {
            return Some(format!("message {seen:?} does not contain {want:?}"));
        }
    }
    if let Some(want) = &cp.message_equals {
        let seen = state_message(state).unwrap_or("");
        if seen != want {
            return Some(format!("message is {seen:?}, expected {want:?}"));
        }
    }
    if let Some(want) = &cp.image
        && &cs.image != want
    {
        return Some(format!("image is {:?}, expected {want:?}", cs.image));
    }
    if let Some(want) = cp.has_image_id {
        let seen = !cs.image_id.is_empty();
        if seen != want {
            return Some(format!("imageID set: {seen}, expected {want}"));
        }
    }
    if let Some(want) = cp.restart_count
        && cs.restart_count != want
    {
        return Some(format!(
            "restartCount is {}, expected {want}",
            cs.restart_count
        ));
    }
    if let Some(want) = cp.restart_count_at_least
        && cs.restart_count < want
    {
        return Some(format!(
            "restartCount is {}, expected at least {want}",
            cs.restart_count
        ));
    }
    if let Some(want) = cp.ready
        && cs.ready != want
    {
        return Some(format!("ready is {}, expected {want}", cs.ready));
    }
    if let Some(want) = cp.started {
        let seen = cs.started.unwrap_or(false);
        if seen != want {
            return Some(format!("started is {seen}, expected {want}"));
        }
    }
    if let Some(last) = &cp.last_state
        && let Some(m) = last_state_mismatch(last, cs.last_state.as_ref())
    {
        return Some(format!("lastState: {m}"));
    }
    if let Some(want) = &cp.resources
        && let Some(m) = resources_mismatch(want, cs.resources.as_ref())
    {
        return Some(m);
    }
    if let Some(want) = &cp.allocated_resources
        && let Some(m) = resource_list_mismatch(want, cs.allocated_resources.as_ref())
    {
        return Some(format!("allocatedResources: {m}"));
    }
    None
}

/// The conditions `order` names, all True, with transition times in that order.
fn transition_order_mismatch(
    order: &[String],
    status: Option<&k8s_openapi::api::core::v1::PodStatus>,
) -> Option<String> {
    let mut previous: Option<(&str, &k8s_openapi::jiff::Timestamp)> = None;
    for type_ in order {
        let condition = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|cs| cs.iter().find(|c| &c.type_ == type_));
        let Some(at) = condition
            .filter(|c| c.status == "True")
            .and_then(|c| c.last_transition_time.as_ref())
        else {
            return Some(format!(
                "condition {type_} is not True with a lastTransitionTime"
            ));
        };
        if let Some((before, earlier)) = previous
            && at.0 < *earlier
        {
            return Some(format!(
                "{type_} turned True at {}, before {before} at {earlier}",
                at.0
            ));
        }
        previous = Some((type_, &at.0));
    }
    None
}

/// Requests and limits against the expected ones.
fn resources_mismatch(
    want: &ResourcesPattern,
    seen: Option<&ResourceRequirements>,
) -> Option<String> {
    [
        (
            "requests",
            &want.requests,
            seen.and_then(|r| r.requests.as_ref()),
        ),
        ("limits", &want.limits, seen.and_then(|r| r.limits.as_ref())),
    ]
    .into_iter()
    .find_map(|(field, want, seen)| {
        resource_list_mismatch(want, seen).map(|m| format!("resources.{field}: {m}"))
    })
}

/// A resource list against the expected one, quantities compared as written.
fn resource_list_mismatch(
    want: &BTreeMap<String, String>,
    seen: Option<&BTreeMap<String, Quantity>>,
) -> Option<String> {
    let seen: BTreeMap<&str, &str> = seen
        .into_iter()
        .flatten()
        .map(|(k, v)| (k.as_str(), v.0.as_str()))
        .collect();
    let wanted: BTreeMap<&str, &str> = want.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    (seen != wanted).then(|| format!("is {seen:?}, expected {wanted:?}"))
}

fn last_state_mismatch(p: &LastStatePattern, state: Option<&ContainerState>) -> Option<String> {
    if let Some(want) = p.state {
        let seen = state_kind(state);
        if seen != Some(want) {
            return Some(format!(
                "is {}, expected {}",
                describe_kind(seen),
                want.as_str()
            ));
        }
    }
    if let Some(want) = &p.reason {
        let seen = state_reason(state).unwrap_or("<none>");
        if seen != want {
            return Some(format!("reason is {seen}, expected {want}"));
        }
    }
    if let Some(want) = p.exit_code {
        match exit_code(state) {
            Some(code) if code == want => {}
            Some(code) => return Some(format!("exit code is {code}, expected {want}")),
            None => return Some(format!("not terminated, expected exit code {want}")),
        }
    }
    None
}
