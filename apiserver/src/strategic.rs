//! Strategic merge patch, after `k8s.io/apimachinery/pkg/util/strategicpatch`: maps merge
//! recursively, `null` deletes, lists that upstream tags `patchStrategy:"merge"` merge by their
//! `patchMergeKey` (or as a set of scalars), other lists are replaced. The directives
//! `$patch` (`replace`, `merge`, `delete`), `$retainKeys`, `$setElementOrder/<list>` and
//! `$deleteFromPrimitiveList/<list>` are honoured.

use serde_json::{Map, Value};

use crate::resources::{ListMerge, Resource};
use crate::status::{Error, Result};

const SET_ORDER: &str = "$setElementOrder/";
const DELETE_PRIMITIVE: &str = "$deleteFromPrimitiveList/";

fn child(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

fn bad(message: impl Into<String>) -> Error {
    Error::bad_request(message)
}

/// Applies a strategic merge `patch` to `original` for `resource`.
pub fn apply(resource: &Resource, original: &mut Value, patch: &Value) -> Result<()> {
    let patch = patch
        .as_object()
        .ok_or_else(|| bad("strategic merge patch must be a JSON object"))?;
    if !original.is_object() {
        *original = Value::Object(Map::new());
    }
    let map = original.as_object_mut().expect("made an object above");
    merge_map(resource, map, patch, "")
}

/// A patch value with its directives removed, as it lands where nothing existed before.
fn clean(resource: &Resource, value: &Value, path: &str) -> Result<Value> {
    match value {
        Value::Object(p) => {
            let mut out = Map::new();
            merge_map(resource, &mut out, p, path)?;
            Ok(Value::Object(out))
        }
        Value::Array(items) => {
            let mut out = Vec::new();
            for item in items {
                if item.get("$patch").is_some() {
                    continue;
                }
                out.push(clean(resource, item, path)?);
            }
            Ok(Value::Array(out))
        }
        other => Ok(other.clone()),
    }
}

fn merge_map(
    resource: &Resource,
    orig: &mut Map<String, Value>,
    patch: &Map<String, Value>,
    path: &str,
) -> Result<()> {
    match patch.get("$patch").map(|v| v.as_str()) {
        None | Some(Some("merge")) => {}
        Some(Some("replace")) => {
            orig.clear();
            let rest: Map<String, Value> = patch
                .iter()
                .filter(|(k, _)| k.as_str() != "$patch")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            return merge_map(resource, orig, &rest, path);
        }
        Some(Some("delete")) => {
            orig.clear();
            return Ok(());
        }
        Some(other) => {
            return Err(bad(format!(
                "unknown patch type found: {other:?} at {path:?}; expected replace, merge or delete"
            )));
        }
    }
    let mut orders: Vec<(&str, &Vec<Value>)> = Vec::new();
    for (key, value) in patch {
        if key == "$patch" {
            continue;
        }
        if key == "$retainKeys" {
            continue;
        }
        if let Some(list) = key.strip_prefix(SET_ORDER) {
            let order = value
                .as_array()
                .ok_or_else(|| bad(format!("{key} must be a list")))?;
            orders.push((list, order));
            continue;
        }
        if let Some(list) = key.strip_prefix(DELETE_PRIMITIVE) {
            let remove = value
                .as_array()
                .ok_or_else(|| bad(format!("{key} must be a list")))?;
            if let Some(Value::Array(items)) = orig.get_mut(list) {
                items.retain(|i| !remove.contains(i));
            }
            continue;
        }
        if key.starts_with('$') {
            return Err(bad(format!("unknown patch directive {key:?}")));
        }
        let sub = child(path, key);
        if value.is_null() {
            orig.remove(key);
            continue;
        }
        let order = patch
            .get(&format!("{SET_ORDER}{key}"))
            .and_then(Value::as_array)
            .map(Vec::as_slice);
        match (orig.get_mut(key), value) {
            (Some(Value::Object(o)), Value::Object(p)) => merge_map(resource, o, p, &sub)?,
            (Some(Value::Array(o)), Value::Array(p)) => match resource.list_merge(&sub) {
                Some(ListMerge::Key(merge_key)) => {
                    let original = o.clone();
                    merge_list(resource, o, p, merge_key, &sub)?;
                    let kept: Vec<Value> = p
                        .iter()
                        .filter(|i| i.get("$patch").is_none())
                        .cloned()
                        .collect();
                    order_like_upstream(o, &original, order.unwrap_or(&kept), Some(merge_key));
                }
                Some(ListMerge::Set) => {
                    let original = o.clone();
                    for item in p {
                        if !o.contains(item) {
                            o.push(item.clone());
                        }
                    }
                    order_like_upstream(o, &original, order.unwrap_or(p), None);
                }
                // Atomic: the patch's list, directives and nulls removed, is the new list.
                None => {
                    orig.insert(key.clone(), clean(resource, value, &sub)?);
                }
            },
            _ => {
                let value = clean(resource, value, &sub)?;
                orig.insert(key.clone(), value);
            }
        }
    }
    // An order for a list the patch did not touch still orders it.
    for (list, order) in orders
        .into_iter()
        .filter(|(list, _)| !patch.contains_key(*list))
    {
        let merge_key = match resource.list_merge(&child(path, list)) {
            Some(ListMerge::Key(k)) => Some(k),
            _ => None,
        };
        if let Some(Value::Array(items)) = orig.get_mut(list) {
            let original = items.clone();
            order_like_upstream(items, &original, order, merge_key);
        }
    }
    if let Some(retain) = patch.get("$retainKeys") {
        let retain = retain
            .as_array()
            .ok_or_else(|| bad("$retainKeys must be a list"))?;
        orig.retain(|k, _| retain.iter().any(|r| r.as_str() == Some(k)));
    }
    Ok(())
}

fn merge_list(
    resource: &Resource,
    orig: &mut Vec<Value>,
    patch: &[Value],
    merge_key: &str,
    path: &str,
) -> Result<()> {
    if patch
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"))
    {
        *orig = patch
            .iter()
            .filter(|i| i.get("$patch").is_none())
            .map(|i| clean(resource, i, path))
            .collect::<Result<_>>()?;
        return Ok(());
    }
    for item in patch {
        let Some(fields) = item.as_object() else {
            if !orig.contains(item) {
                orig.push(item.clone());
            }
            continue;
        };
        let key_value = fields.get(merge_key).ok_or_else(|| {
            bad(format!(
                "map: {item} does not contain declared merge key: {merge_key}"
            ))
        })?;
        let pos = orig
            .iter()
            .position(|o| o.get(merge_key) == Some(key_value));
        match fields.get("$patch").and_then(Value::as_str) {
            Some("delete") => {
                orig.retain(|o| o.get(merge_key) != Some(key_value));
            }
            Some("replace") => {
                let mut fields = fields.clone();
                fields.remove("$patch");
                let replaced = clean(resource, &Value::Object(fields), path)?;
                match pos {
                    Some(p) => orig[p] = replaced,
                    None => orig.push(replaced),
                }
            }
            _ => match pos.map(|p| &mut orig[p]) {
                Some(Value::Object(existing)) => merge_map(resource, existing, fields, path)?,
                _ => orig.push(clean(resource, item, path)?),
            },
        }
    }
    Ok(())
}

/// The order upstream gives a merged list (`normalizeElementOrder`): the items the patch
/// names (in `patch_order`: the patch's own list or its `$setElementOrder`) keep that
/// order, the items only the server had keep theirs, and the two are interleaved by their
/// positions in the `original` list, a patch item the server did not know coming first.
fn order_like_upstream(
    items: &mut Vec<Value>,
    original: &[Value],
    patch_order: &[Value],
    merge_key: Option<&str>,
) {
    let key_of = |v: &Value| -> Value {
        match merge_key {
            Some(k) => v.get(k).cloned().unwrap_or(Value::Null),
            None => v.clone(),
        }
    };
    let index = |list: &[Value], item: &Value| list.iter().position(|i| key_of(i) == key_of(item));
    let (mut from_patch, mut server_only): (Vec<Value>, Vec<Value>) = items
        .drain(..)
        .partition(|i| index(patch_order, i).is_some());
    from_patch.sort_by_key(|i| index(patch_order, i));
    server_only.sort_by_key(|i| index(original, i));
    let (mut left, mut right) = (
        server_only.into_iter().peekable(),
        from_patch.into_iter().peekable(),
    );
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (index(original, l), index(original, r)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        let next = if take_left { left.next() } else { right.next() };
        items.extend(next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{NODES, PODS};
    use serde_json::json;

    #[test]
    fn kubelet_node_status_patch() {
        let mut node = json!({"status": {
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "A"},
                {"type": "Ready", "status": "False", "reason": "B"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}});
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "MemoryPressure"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "addresses": [{"type": "Hostname", "address": "n1"}]}});
        apply(&NODES, &mut node, &patch).unwrap();
        let conds = node["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds[0]["type"], "Ready");
        assert_eq!(conds[0]["status"], "True");
        assert_eq!(conds[0]["reason"], "B");
        assert_eq!(conds[1]["type"], "MemoryPressure");
        assert_eq!(node["status"]["addresses"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn keyed_items_merge_and_delete_directive() {
        let mut pod = json!({"spec": {"containers": [{"name": "a", "image": "x"}, {"name": "b"}]},
                             "metadata": {"finalizers": ["x"]}});
        let patch = json!({"spec": {"containers": [{"name": "a", "image": "y"}, {"name": "b", "$patch": "delete"}]},
                           "metadata": {"finalizers": ["y", "x"], "labels": {"l": "v"}}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(
            pod["spec"]["containers"],
            json!([{"name": "a", "image": "y"}])
        );
        // Items the patch names keep the patch's order (`normalizeElementOrder`).
        assert_eq!(pod["metadata"]["finalizers"], json!(["y", "x"]));
        assert_eq!(pod["metadata"]["labels"]["l"], "v");
    }

    #[test]
    fn merged_lists_are_ordered_as_upstream_orders_them() {
        // New items first, server-only items after, as kube-apiserver 1.28.7 answers
        // (fidelity/scenarios/patch-strategic-pod.yaml).
        let mut pod = json!({"metadata": {"finalizers": ["a", "b"]}, "spec": {"containers": [
            {"name": "c1", "image": "x"}, {"name": "c2", "image": "x"}]}});
        let patch = json!({"metadata": {"finalizers": ["c"], "$deleteFromPrimitiveList/finalizers": ["a"]},
            "spec": {"containers": [{"name": "c2", "image": "y"}]}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(pod["metadata"]["finalizers"], json!(["c", "b"]));
        let names: Vec<&str> = pod["spec"]["containers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            ["c1", "c2"],
            "a patched item keeps its place among the server's"
        );
    }

    /// The status patches kubelet 1.28 sends (`CreateTwoWayMergePatch` of old and new
    /// status against `v1.Pod`): conditions merge by `type` with `$setElementOrder`, fields a
    /// condition lost are `null`, and `containerStatuses`, which has no patch strategy,
    /// comes whole and replaces the stored list.
    #[test]
    fn kubelet_pod_status_patches_store_what_kube_apiserver_stores() {
        let order = json!([{"type": "Initialized"}, {"type": "Ready"},
                           {"type": "ContainersReady"}, {"type": "PodScheduled"}]);
        let creating = json!({"metadata": {"uid": "u"}, "status": {
            "phase": "Pending", "qosClass": "BestEffort", "startTime": "2026-11-25T00:00:00Z",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T00:00:00Z"},
                {"type": "Ready", "status": "False", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T00:00:00Z",
                 "reason": "ContainersNotReady", "message": "containers with unready status: [c]"},
                {"type": "ContainersReady", "status": "False", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T00:00:00Z",
                 "reason": "ContainersNotReady", "message": "containers with unready status: [c]"},
                {"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T00:00:00Z"}],
            "containerStatuses": [{"name": "c", "image": "busybox", "imageID": "", "ready": false,
                "restartCount": 0, "started": false, "lastState": {},
                "state": {"waiting": {"reason": "ContainerCreating"}}}]}});
        let mut pod = creating.clone();

        let running = json!({"name": "c", "image": "busybox:latest", "imageID": "sha256:1",
            "containerID": "containerd://1", "ready": true, "restartCount": 0, "started": true,
            "lastState": {}, "state": {"running": {"startedAt": "2026-11-25T00:00:01Z"}}});
        let patch = json!({"metadata": {"uid": "u"}, "status": {
            "$setElementOrder/conditions": order,
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-25T00:00:01Z", "message": null, "reason": null},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-25T00:00:01Z", "message": null, "reason": null}],
            "containerStatuses": [running],
            "hostIP": "10.0.0.1", "phase": "Running", "podIP": "10.88.0.2", "podIPs": [{"ip": "10.88.0.2"}]}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(pod["status"]["containerStatuses"], json!([running]));
        assert_eq!(
            pod["status"]["conditions"][1],
            json!({"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-25T00:00:01Z"})
        );
        assert_eq!(pod["status"]["podIPs"], json!([{"ip": "10.88.0.2"}]));

        let terminated = json!({"name": "c", "image": "busybox:latest", "imageID": "sha256:1",
            "containerID": "containerd://1", "ready": false, "restartCount": 0, "started": false,
            "lastState": {}, "state": {"terminated": {"exitCode": 1, "reason": "Error",
                "containerID": "containerd://1", "startedAt": "2026-11-25T00:00:01Z",
                "finishedAt": "2026-11-25T00:00:02Z"}}});
        let patch = json!({"metadata": {"uid": "u"}, "status": {
            "$setElementOrder/conditions": order,
            "conditions": [
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-25T00:00:02Z", "reason": "PodFailed"},
                {"type": "ContainersReady", "status": "False", "lastTransitionTime": "2026-11-25T00:00:02Z", "reason": "PodFailed"}],
            "containerStatuses": [terminated],
            "phase": "Failed"}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(
            pod["status"]["containerStatuses"][0]["state"], terminated["state"],
            "only the terminated state is left: no running, no waiting"
        );
        assert_eq!(pod["status"]["phase"], "Failed");
        assert_eq!(pod["status"]["conditions"][1]["reason"], "PodFailed");
        assert_eq!(pod["status"]["conditions"][0]["type"], "Initialized");

        // A crash loop: the terminated state moves to lastState, the container waits.
        let mut pod = creating;
        let backoff = json!({"name": "c", "image": "busybox:latest", "imageID": "sha256:1",
            "containerID": "containerd://1", "ready": false, "restartCount": 1, "started": false,
            "lastState": {"terminated": terminated["state"]["terminated"].clone()},
            "state": {"waiting": {"reason": "CrashLoopBackOff",
                "message": "back-off 10s restarting failed container=c pod=p_ns(u)"}}});
        let patch = json!({"metadata": {"uid": "u"}, "status": {
            "$setElementOrder/conditions": order,
            "containerStatuses": [backoff], "phase": "Running"}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(pod["status"]["containerStatuses"], json!([backoff]));
    }

    #[test]
    fn unkeyed_lists_are_replaced_and_null_deletes() {
        let mut pod = json!({"spec": {"tolerations": [{"key": "a"}], "nodeName": "n"}});
        apply(
            &PODS,
            &mut pod,
            &json!({"spec": {"tolerations": [{"key": "b"}], "nodeName": null}}),
        )
        .unwrap();
        assert_eq!(pod["spec"], json!({"tolerations": [{"key": "b"}]}));
    }

    #[test]
    fn directives_replace_and_primitive_delete() {
        let mut pod =
            json!({"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}});
        let patch = json!({"metadata": {"labels": {"$patch": "replace", "c": "3"},
                                        "$deleteFromPrimitiveList/finalizers": ["x"]}});
        apply(&PODS, &mut pod, &patch).unwrap();
        assert_eq!(pod["metadata"]["labels"], json!({"c": "3"}));
        assert_eq!(pod["metadata"]["finalizers"], json!(["y"]));
    }

    #[test]
    fn missing_merge_key_is_an_error() {
        let mut pod = json!({"status": {"conditions": [{"type": "Ready"}]}});
        let err = apply(
            &PODS,
            &mut pod,
            &json!({"status": {"conditions": [{"status": "True"}]}}),
        );
        assert_eq!(err.unwrap_err().code(), 400);
    }
}
