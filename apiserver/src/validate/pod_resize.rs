//! `ValidatePodResize`: what a write through `pods/resize` may change. The strategy has
//! already kept everything of the stored pod but its containers' resources and resize
//! policies and the pod-level resources; these checks refuse the rest as upstream does.

use serde_json::{Map, Value};

use crate::field::{Error as FieldError, Value as Bad};
use crate::strategy::pod_qos_class;

use super::json::{list, str_of};

/// The annotation that marks a mirror pod (`kubernetes.io/config.mirror`).
const MIRROR: &str = "kubernetes.io/config.mirror";

/// The checks of a resize of `old` into `new`.
pub(super) fn resize(old: &Value, new: &Value) -> Vec<FieldError> {
    if old
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(MIRROR))
        .is_some()
    {
        return vec![FieldError::forbidden("", "static pods cannot be resized")];
    }
    if old.pointer("/spec/os/name").and_then(Value::as_str) == Some("windows") {
        return vec![FieldError::forbidden("", "windows pods cannot be resized")];
    }
    let null = Value::Null;
    let (old_spec, new_spec) = (
        old.get("spec").unwrap_or(&null),
        new.get("spec").unwrap_or(&null),
    );
    let mut out = Vec::new();
    // `GetPodQOS(old)` is the class the pod was given; the message shows the new pod's
    // status, which is the stored one.
    let stored = old.pointer("/status/qosClass").and_then(Value::as_str);
    let empty = Map::new();
    let class = |spec: &Value| pod_qos_class(spec.as_object().unwrap_or(&empty)).ok();
    let old_qos = stored.or_else(|| class(old_spec));
    if let (Some(was), Some(now)) = (old_qos, class(new_spec))
        && was != now
    {
        out.push(FieldError::invalid(
            "spec",
            Bad::str(stored.unwrap_or("")),
            "Pod QOS Class may not change as a result of resizing",
        ));
    }
    if !resize_supported(old) {
        out.push(FieldError::forbidden(
            "spec",
            "Pod running on node without support for resize",
        ));
    }
    let ordering = ordering(old_spec, new_spec);
    if !ordering.is_empty() {
        out.extend(ordering);
        return out;
    }
    // Requests and limits may change but not go away; only cpu and memory may change.
    for key in ["initContainers", "containers"] {
        for (i, (was, now)) in list(old_spec, key)
            .iter()
            .zip(list(new_spec, key))
            .enumerate()
        {
            let path = format!("spec.{key}[{i}].resources");
            lists_removed(was, now, &path, "resource", &mut out);
        }
    }
    let mut masked = new_spec.clone();
    for key in ["containers", "initContainers"] {
        let olds = list(old_spec, key);
        let Some(items) = masked.get_mut(key).and_then(Value::as_array_mut) else {
            continue;
        };
        for (i, c) in items.iter_mut().enumerate() {
            let was = olds.get(i).unwrap_or(&null);
            keep_cpu_memory_of(c, was);
            if key == "initContainers" && !json_eq(c, was) {
                out.push(FieldError::forbidden(
                    format!("spec.initContainers[{i}]"),
                    "only cpu and memory resources for init or sidecar containers are mutable",
                ));
                // Reported once: the spec-wide comparison below would repeat it.
                *c = was.clone();
            }
        }
    }
    out.extend(pod_level(old_spec, new_spec));
    // The pod-level resources were checked on their own.
    if let (Some(m), Some(o)) = (masked.as_object_mut(), old_spec.as_object()) {
        match o.get("resources") {
            Some(r) => m.insert("resources".into(), r.clone()),
            None => m.remove("resources"),
        };
    }
    if !json_eq(&masked, old_spec) {
        out.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable",
        ));
    }
    out
}

/// `validatePodLevelResourcesResize` (`InPlacePodLevelResourcesVerticalScaling`, beta and
/// on in 1.36), for a pod with pod-level resources before or after: they may be added but
/// not removed, nor may their requests or limits; only cpu and memory may change.
fn pod_level(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    let is_set = |spec: &Value| {
        ["requests", "limits"].into_iter().any(|part| {
            spec.pointer(&format!("/resources/{part}"))
                .and_then(Value::as_object)
                .is_some_and(|m| !m.is_empty())
        })
    };
    if !is_set(old_spec) && !is_set(new_spec) {
        return Vec::new();
    }
    let (was, now) = (old_spec.get("resources"), new_spec.get("resources"));
    if was.is_some() && now.is_none() {
        return vec![FieldError::forbidden(
            "spec.resources",
            "pod-level resources cannot be removed",
        )];
    }
    let mut out = Vec::new();
    if was.is_some() {
        lists_removed(
            old_spec,
            new_spec,
            "spec.resources",
            "pod-level resource",
            &mut out,
        );
    }
    // `dropCPUMemoryResourceRequirementsUpdates`: the spec shaped like a container, its
    // `resources` with the old cpu and memory.
    let mut masked = serde_json::json!({"resources": now.cloned().unwrap_or(Value::Null)});
    keep_cpu_memory_of(&mut masked, old_spec);
    let was_only = serde_json::json!({"resources": was.cloned().unwrap_or(Value::Null)});
    if !json_eq(&masked, &was_only) {
        out.push(FieldError::forbidden(
            "spec",
            "only cpu and memory resources are mutable at pod-level",
        ));
    }
    out
}

/// `isPodResizeRequestSupported`: the first running container's status must report its
/// resources (a node agent that does not resize leaves them out).
fn resize_supported(old: &Value) -> bool {
    let statuses = old
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array);
    match statuses
        .into_iter()
        .flatten()
        .find(|c| c.pointer("/state/running").is_some())
    {
        Some(running) => running.get("resources").is_some(),
        None => true,
    }
}

/// `validatePodResizeContainerOrdering`: no container added, removed, renamed or moved.
fn ordering(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    for key in ["containers", "initContainers"] {
        let (olds, news) = (list(old_spec, key), list(new_spec, key));
        if olds.len() != news.len() {
            out.push(FieldError::forbidden(
                format!("spec.{key}"),
                format!("{key} may not be added or removed on resize"),
            ));
            continue;
        }
        for (i, (was, now)) in olds.iter().zip(news).enumerate() {
            if str_of(was, "name") != str_of(now, "name") {
                out.push(FieldError::forbidden(
                    format!("spec.{key}[{i}].name"),
                    format!("{key} may not be renamed or reordered on resize"),
                ));
            }
        }
    }
    out
}

/// `resourcesRemoved` of `resources.requests` and `resources.limits` of `was` and `now` (a
/// container, or the spec for pod-level resources): `<path>.requests: Forbidden: <what>
/// requests cannot be removed`, and the same for limits.
fn lists_removed(was: &Value, now: &Value, path: &str, what: &str, out: &mut Vec<FieldError>) {
    for part in ["requests", "limits"] {
        if removed(
            was.pointer(&format!("/resources/{part}")),
            now.pointer(&format!("/resources/{part}")),
        ) {
            out.push(FieldError::forbidden(
                format!("{path}.{part}"),
                format!("{what} {part} cannot be removed"),
            ));
        }
    }
}

/// `resourcesRemoved`: a resource the old list had is missing from the new one.
fn removed(old: Option<&Value>, new: Option<&Value>) -> bool {
    let empty = Map::new();
    let old = old.and_then(Value::as_object).unwrap_or(&empty);
    let new = new.and_then(Value::as_object).unwrap_or(&empty);
    old.keys().any(|k| !new.contains_key(k))
}

/// `dropCPUMemoryResourcesFromContainer`: the container's cpu and memory requests and
/// limits replaced by the old container's (claims dropped, as upstream rebuilds the
/// requirements from the two lists).
fn keep_cpu_memory_of(container: &mut Value, old: &Value) {
    let Some(c) = container.as_object_mut() else {
        return;
    };
    let mut resources = Map::new();
    for part in ["limits", "requests"] {
        let mut merged: Map<String, Value> = c
            .get("resources")
            .and_then(|r| r.get(part))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        merged.retain(|k, _| k != "cpu" && k != "memory");
        for name in ["cpu", "memory"] {
            if let Some(v) = old.pointer(&format!("/resources/{part}/{name}")) {
                merged.insert(name.into(), v.clone());
            }
        }
        if !merged.is_empty() {
            resources.insert(part.into(), Value::Object(merged));
        }
    }
    let old_resources = old.get("resources").and_then(Value::as_object);
    if resources.is_empty() && old_resources.is_none_or(|r| r.is_empty()) {
        c.remove("resources");
    } else {
        c.insert("resources".into(), Value::Object(resources));
    }
}

/// `apiequality.Semantic.DeepEqual` on the JSON: an empty object or list equals an absent
/// one, as Go's nil and empty values do.
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    fn normal(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .filter(|(_, v)| !is_empty(v))
                    .map(|(k, v)| (k.clone(), normal(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(normal).collect()),
            other => other.clone(),
        }
    }
    fn is_empty(v: &Value) -> bool {
        match v {
            Value::Object(m) => m.values().all(is_empty),
            Value::Array(a) => a.is_empty(),
            Value::Null => true,
            _ => false,
        }
    }
    normal(a) == normal(b)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::resize;

    fn pod(cpu: &str) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "35Mi"},
                              "limits": {"cpu": cpu, "memory": "35Mi"}}}]},
            "status": {"qosClass": "Guaranteed", "containerStatuses": [
                {"name": "c", "state": {"running": {}}, "resources": {}}]},
        })
    }

    fn messages(old: &Value, new: &Value) -> Vec<String> {
        resize(old, new).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn cpu_and_memory_may_change() {
        assert!(messages(&pod("20m"), &pod("25m")).is_empty());
    }

    #[test]
    fn the_qos_class_may_not_change() {
        let mut new = pod("25m");
        new["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "30m".into();
        assert_eq!(
            messages(&pod("20m"), &new),
            [
                "spec: Invalid value: \"Guaranteed\": Pod QOS Class may not change as a result of resizing"
            ]
        );
    }

    #[test]
    fn limits_may_not_be_removed_and_other_resources_not_change() {
        let mut new = pod("20m");
        new["spec"]["containers"][0]["resources"]["limits"] = json!({"cpu": "20m"});
        new["spec"]["containers"][0]["resources"]["requests"]["ephemeral-storage"] = "1Gi".into();
        let got = messages(&pod("20m"), &new);
        assert!(got.contains(&"spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed".to_owned()), "{got:?}");
        assert!(
            got.contains(&"spec: Forbidden: only cpu and memory resources are mutable".to_owned()),
            "{got:?}"
        );
    }

    #[test]
    fn a_node_that_does_not_report_resources_cannot_resize() {
        let mut old = pod("20m");
        old["status"]["containerStatuses"][0]
            .as_object_mut()
            .unwrap()
            .remove("resources");
        assert_eq!(
            messages(&old, &pod("25m")),
            ["spec: Forbidden: Pod running on node without support for resize"]
        );
    }

    #[test]
    fn static_pods_and_renames_are_refused() {
        let mut old = pod("20m");
        old["metadata"]["annotations"] = json!({"kubernetes.io/config.mirror": "x"});
        assert_eq!(
            messages(&old, &pod("25m")),
            [": Forbidden: static pods cannot be resized"]
        );
        let mut new = pod("20m");
        new["spec"]["containers"][0]["name"] = "d".into();
        assert_eq!(
            messages(&pod("20m"), &new),
            [
                "spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize"
            ]
        );
    }

    #[test]
    fn pod_level_resources_may_be_added_and_changed_but_not_removed() {
        let with = |resources: Value| {
            let mut p = pod("20m");
            p["spec"]["resources"] = resources;
            p
        };
        // Requests equal to limits keep the pod Guaranteed.
        let both = |c: &str| {
            with(
                json!({"requests": {"cpu": c, "memory": "1Gi"}, "limits": {"cpu": c, "memory": "1Gi"}}),
            )
        };
        assert!(messages(&both("100m"), &both("150m")).is_empty());
        assert!(messages(&pod("20m"), &both("150m")).is_empty(), "added");
        assert_eq!(
            messages(&both("100m"), &pod("20m")),
            ["spec.resources: Forbidden: pod-level resources cannot be removed"]
        );
        let no_limits = with(json!({"requests": {"cpu": "100m", "memory": "1Gi"}}));
        let got = messages(&both("100m"), &no_limits);
        let removed =
            "spec.resources.limits: Forbidden: pod-level resource limits cannot be removed";
        assert!(got.contains(&removed.to_owned()), "{got:?}");
        let mut huge = both("100m");
        huge["spec"]["resources"]["requests"]["hugepages-2Mi"] = "2Mi".into();
        huge["spec"]["resources"]["limits"]["hugepages-2Mi"] = "2Mi".into();
        assert_eq!(
            messages(&both("100m"), &huge),
            ["spec: Forbidden: only cpu and memory resources are mutable at pod-level"]
        );
    }
}
