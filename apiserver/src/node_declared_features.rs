//! kube-apiserver's `NodeDeclaredFeatureValidator` admission plugin
//! (`plugin/pkg/admission/nodedeclaredfeatures`, on with `NodeDeclaredFeatures` from 1.36):
//! an update of a pod bound to a node that changes its spec in a way only some node agents
//! honour is refused (403) unless the node lists the feature in `status.declaredFeatures`.
//! Of upstream's registry, two features are needed by updates: a change of the pod-level
//! resources (`InPlacePodLevelResourcesVerticalScaling`) and of a non-sidecar init
//! container's resources (`InPlacePodVerticalScalingInitContainers`).

use serde_json::Value;

use crate::meta;
use crate::pod_resize_admission::respecced_on_node;
use crate::resources;
use crate::status::{Error, Result};
use crate::store::Txn;
use crate::validate::json_eq;

/// The plugin's check of an update of `old` into `new` (both as stored), main or resize.
pub(crate) fn validate(t: &Txn<'_>, old: &Value, new: &Value) -> Result<()> {
    let Some(node_name) = respecced_on_node(old, new) else {
        return Ok(());
    };
    let required = required(old, new);
    if required.is_empty() {
        return Ok(());
    }
    let forbidden = |reason: String| Error::Forbidden {
        resource: &resources::PODS,
        name: meta::str_field(new, "name").to_owned(),
        reason,
        cause: None,
    };
    let Some(node) = t.get(&resources::NODES, "", node_name) else {
        return Err(forbidden(format!("node {node_name:?} not found")));
    };
    let declared: Vec<&str> = node
        .value
        .pointer("/status/declaredFeatures")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let missing: Vec<&str> = required
        .into_iter()
        .filter(|f| !declared.contains(f))
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(forbidden(format!(
        "pod update requires features {} which are not available on node {node_name:?}",
        missing.join(", ")
    )))
}

/// `InferForPodUpdate`: the features the update needs, sorted by name.
fn required(old: &Value, new: &Value) -> Vec<&'static str> {
    let mut out = Vec::new();
    let (was, now) = (
        old.pointer("/spec/resources"),
        new.pointer("/spec/resources"),
    );
    // Absent reads as empty, as Go's nil does.
    if !json_eq(was.unwrap_or(&Value::Null), now.unwrap_or(&Value::Null)) {
        out.push("InPlacePodLevelResourcesVerticalScaling");
    }
    fn inits(p: &Value) -> &[Value] {
        p.pointer("/spec/initContainers")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    }
    let resized_init = inits(old).iter().zip(inits(new)).any(|(was, now)| {
        was.get("restartPolicy").and_then(Value::as_str) != Some("Always")
            && !json_eq(
                was.get("resources").unwrap_or(&Value::Null),
                now.get("resources").unwrap_or(&Value::Null),
            )
    });
    if resized_init {
        out.push("InPlacePodVerticalScalingInitContainers");
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::required;

    #[test]
    fn updates_need_the_features_they_use() {
        let pod = |pod_cpu: Option<&str>, init_cpu: &str, sidecar_cpu: &str| {
            let mut p = json!({"spec": {"initContainers": [
                {"name": "i", "resources": {"requests": {"cpu": init_cpu}}},
                {"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": sidecar_cpu}}},
            ]}});
            if let Some(cpu) = pod_cpu {
                p["spec"]["resources"] = json!({"requests": {"cpu": cpu}});
            }
            p
        };
        let base = pod(Some("1"), "1", "1");
        assert!(
            required(&base, &pod(Some("1"), "1", "2")).is_empty(),
            "a sidecar"
        );
        assert_eq!(
            required(&base, &pod(Some("2"), "2", "1")),
            [
                "InPlacePodLevelResourcesVerticalScaling",
                "InPlacePodVerticalScalingInitContainers"
            ]
        );
        assert!(required(&pod(None, "1", "1"), &pod(None, "1", "1")).is_empty());
    }
}
