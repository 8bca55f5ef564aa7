//! Fields of a case's Pod manifest that the Kubernetes types do not know.

use super::locate::{Anchor, Problem, problem};
use super::model::Case;

/// Fields of the pod and peer manifests that the Kubernetes types do not know (k8s-openapi
/// ignores them silently, so `restartPolcy: Never` would quietly run with `Always`).
pub(super) fn unknown_manifest_fields(text: &str, case: &Case) -> Vec<Problem> {
    let Ok(raw) = serde_yaml::from_str::<serde_yaml::Value>(text) else {
        return Vec::new();
    };
    let as_json = |v: &serde_yaml::Value| serde_json::to_value(v).ok();
    let mut unknown = Vec::new();
    if let (Some(raw_pod), Ok(typed)) = (
        raw.get("pod").and_then(as_json),
        serde_json::to_value(&*case.pod),
    ) {
        diff_keys(&raw_pod, &typed, "pod", &mut unknown);
    }
    if let (Some(raw_peers), Ok(typed)) = (
        raw.get("peers").and_then(as_json),
        serde_json::to_value(&case.peers),
    ) {
        diff_keys(&raw_peers, &typed, "peers", &mut unknown);
    }
    unknown
        .into_iter()
        .map(|(path, key)| {
            problem(
                Anchor::Key(key.clone()),
                format!("{path}: unknown field `{key}` in the Pod manifest (a typo? Kubernetes would ignore it)"),
            )
        })
        .collect()
}

fn diff_keys(
    raw: &serde_json::Value,
    typed: &serde_json::Value,
    path: &str,
    out: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    match (raw, typed) {
        (Value::Object(r), Value::Object(t)) => {
            for (k, v) in r {
                if v.is_null() {
                    continue;
                }
                match t.get(k) {
                    Some(tv) => diff_keys(v, tv, &format!("{path}.{k}"), out),
                    // Free-form maps (labels, annotations) come back whole, so a missing key is unknown.
                    None => out.push((path.to_string(), k.clone())),
                }
            }
        }
        (Value::Array(r), Value::Array(t)) => {
            for (i, (rv, tv)) in r.iter().zip(t.iter()).enumerate() {
                diff_keys(rv, tv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}
