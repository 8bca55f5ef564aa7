//! kube-apiserver's `PodResizeValidator` admission plugin (`plugin/pkg/admission/podresize`,
//! on by default in 1.36): after validation, a resize of a pod bound to a node is refused
//! (403) when the node is unknown, is not a Linux node (cause `UnsupportedPlatform`), or
//! cannot hold the pod's new cpu or memory requests at all (cause `NodeCapacity`). A resize
//! that fits the node but not beside its other pods is the node agent's to defer.

use k8s_openapi::api::core::v1::Pod;
use nodeconform_resource::pod;
use serde_json::Value;

use crate::meta;
use crate::quantity::Quantity;
use crate::resources;
use crate::status::{Error, Result};
use crate::store::Txn;

/// The node a pod updated from `old` to `new` is bound to, when the update changed its spec
/// (the generation moves only with the spec): the updates the node admission plugins judge.
pub(crate) fn respecced_on_node<'a>(old: &Value, new: &'a Value) -> Option<&'a str> {
    let generation = |p: &Value| p.pointer("/metadata/generation").and_then(Value::as_i64);
    let node_name = new.pointer("/spec/nodeName").and_then(Value::as_str)?;
    (!node_name.is_empty() && generation(old) != generation(new)).then_some(node_name)
}

/// The plugin's check of a resize of `old` into `new` (both as stored).
pub(crate) fn validate(t: &Txn<'_>, old: &Value, new: &Value) -> Result<()> {
    let Some(node_name) = respecced_on_node(old, new) else {
        return Ok(());
    };
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
    let requested = requests(new);
    let (cpu, memory) = (requested("cpu"), requested("memory"));
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

/// `PodRequests`, summed once, by resource (`Quantity::ZERO` for one it asks none of).
fn requests(pod: &Value) -> impl Fn(&str) -> Quantity {
    // The stored pod is valid, so it reads as a typed one.
    let typed: Pod = serde_json::from_value(pod.clone()).unwrap_or_default();
    let list = pod::requests(&typed);
    move |name| {
        list.get(name)
            .and_then(|q| Quantity::parse(&q.0))
            .unwrap_or(Quantity::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::requests;
    use crate::quantity::Quantity;

    #[test]
    fn pod_requests_read_the_stored_pod() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {
            "initContainers": [
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            ],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "200m"}}}],
            "resources": {"requests": {"memory": "1Gi"}},
        }});
        let requested = requests(&pod);
        assert_eq!(requested("cpu"), Quantity::parse("300m").unwrap());
        assert_eq!(requested("memory"), Quantity::parse("1Gi").unwrap());
        assert_eq!(requested("ephemeral-storage"), Quantity::ZERO);
    }
}
