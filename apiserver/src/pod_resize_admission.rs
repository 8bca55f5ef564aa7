//! kube-apiserver's `PodResizeValidator` admission plugin (`plugin/pkg/admission/podresize`,
//! on by default in 1.36): after validation, a resize of a pod bound to a node is refused
//! (403) when the node is unknown, is not a Linux node (cause `UnsupportedPlatform`), or
//! cannot hold the pod's new cpu or memory requests at all (cause `NodeCapacity`). A resize
//! that fits the node but not beside its other pods is the node agent's to defer.

use serde_json::Value;

use crate::meta;
use crate::quantity::Quantity;
use crate::resources;
use crate::status::{Error, Result};
use crate::store::Txn;

/// The plugin's check of a resize of `old` into `new` (both as stored).
pub(crate) fn validate(t: &Txn<'_>, old: &Value, new: &Value) -> Result<()> {
    let generation = |p: &Value| p.pointer("/metadata/generation").and_then(Value::as_i64);
    let node_name = new
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or("");
    // Generation moves only with the spec: nothing to admit otherwise.
    if node_name.is_empty() || generation(old) == generation(new) {
        return Ok(());
    }
    let forbidden = |reason: String, cause: Option<&'static str>| Error::Forbidden {
        resource: &resources::PODS,
        name: meta::str_field(new, "name").to_owned(),
        reason,
        cause: cause.map(|c| (c, "", String::new())),
    };
    let Some(node) = t.get(&resources::NODES, "", node_name) else {
        return Err(forbidden(format!("node {node_name:?} not found"), None));
    };
    let os = node
        .value
        .pointer("/metadata/labels/kubernetes.io~1os")
        .and_then(Value::as_str);
    if let Some(os) = os.filter(|os| *os != "linux") {
        return Err(forbidden(
            format!("pod resize is only supported on linux nodes, node {node_name:?} is {os:?}"),
            Some("UnsupportedPlatform"),
        ));
    }
    let allocatable =
        |name: &str| quantity(node.value.pointer(&format!("/status/allocatable/{name}")));
    let mut short = Vec::new();
    let (cpu, memory) = (requests(new, "cpu"), requests(new, "memory"));
    if cpu > allocatable("cpu") {
        short.push(format!(
            "cpu, requested: {}, allocatable: {}",
            cpu.milli_value(),
            allocatable("cpu").milli_value()
        ));
    }
    if memory > allocatable("memory") {
        short.push(format!(
            "memory, requested: {}, allocatable: {}",
            memory.value(),
            allocatable("memory").value()
        ));
    }
    if short.is_empty() {
        return Ok(());
    }
    Err(forbidden(
        format!(
            "node didn't have enough allocatable resources: {}",
            short.join("; ")
        ),
        Some("NodeCapacity"),
    ))
}

fn quantity(v: Option<&Value>) -> Quantity {
    v.and_then(Value::as_str)
        .and_then(Quantity::parse)
        .unwrap_or(Quantity::ZERO)
}

/// `PodRequests` for one resource: the app containers' and sidecars' requests summed, raised
/// to what any init container needs beside the sidecars started before it, plus the pod's
/// overhead; the pod-level request where the pod sets one.
fn requests(pod: &Value, name: &str) -> Quantity {
    let spec = pod.get("spec").unwrap_or(&Value::Null);
    if let Some(q) = spec.pointer(&format!("/resources/requests/{name}")) {
        return quantity(Some(q));
    }
    let of = |c: &Value| quantity(c.pointer(&format!("/resources/requests/{name}")));
    let list = |key: &str| {
        spec.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let mut total = list("containers")
        .iter()
        .fold(Quantity::ZERO, |sum, c| sum.saturating_add(of(c)));
    let (mut sidecars, mut init) = (Quantity::ZERO, Quantity::ZERO);
    for c in &list("initContainers") {
        let needs = if c.get("restartPolicy").and_then(Value::as_str) == Some("Always") {
            total = total.saturating_add(of(c));
            sidecars = sidecars.saturating_add(of(c));
            sidecars
        } else {
            of(c).saturating_add(sidecars)
        };
        init = init.max(needs);
    }
    total
        .max(init)
        .saturating_add(quantity(spec.pointer(&format!("/overhead/{name}"))))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::requests;
    use crate::quantity::Quantity;

    #[test]
    fn pod_requests_count_sidecars_and_init_containers() {
        let pod = json!({"spec": {
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
                {"name": "i", "resources": {"requests": {"cpu": "1"}}},
            ],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}],
            "overhead": {"cpu": "10m"},
        }});
        assert_eq!(requests(&pod, "cpu"), Quantity::parse("1110m").unwrap());
        assert_eq!(requests(&pod, "memory"), Quantity::ZERO);
    }
}
