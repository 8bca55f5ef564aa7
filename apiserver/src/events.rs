//! `events.k8s.io/v1` events are served from the core/v1 event store, as upstream serves one
//! storage in two shapes: bodies are converted to core/v1 on the way in and back on the way
//! out, with upstream's field mapping (`regarding` ↔ `involvedObject`, `note` ↔ `message`,
//! `reportingController` ↔ `reportingComponent`, `deprecated*` ↔ the core legacy fields).
//! So `kubectl get events` and `kubectl describe` show what a kube-rs `Recorder` wrote.

use serde_json::Value;

/// (events.k8s.io/v1 field, core/v1 field) pairs that differ only by name.
const RENAMES: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn convert(mut obj: Value, api_version: &str, from_v1: bool) -> Value {
    if let Some(map) = obj.as_object_mut() {
        for (v1, core) in RENAMES {
            let (from, to) = if from_v1 { (v1, core) } else { (core, v1) };
            if let Some(value) = map.remove(from) {
                map.insert(to.to_string(), value);
            }
        }
        map.insert("apiVersion".into(), api_version.into());
        map.insert("kind".into(), "Event".into());
    }
    obj
}

/// An events.k8s.io/v1 Event as the core/v1 Event it is stored as.
pub fn to_core(v1: Value) -> Value {
    convert(v1, "v1", true)
}

/// A stored core/v1 Event as an events.k8s.io/v1 Event.
pub fn to_v1(core: &Value) -> Value {
    convert(core.clone(), "events.k8s.io/v1", false)
}

/// The core/v1 field an events.k8s.io/v1 field selector label reads.
pub fn core_field(label: &str) -> String {
    for (v1, core) in RENAMES {
        if label == v1 {
            return core.to_string();
        }
        if let Some(rest) = label.strip_prefix(v1).and_then(|r| r.strip_prefix('.')) {
            return format!("{core}.{rest}");
        }
    }
    label.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trip() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"name": "p"}, "note": "hi", "reportingController": "agent",
            "reportingInstance": "n1", "deprecatedCount": 2, "eventTime": "2026-01-01T00:00:00.000000Z"});
        let core = to_core(v1.clone());
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "p");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "agent");
        assert_eq!(core["count"], 2);
        assert_eq!(to_v1(&core), v1);
    }

    #[test]
    fn field_labels() {
        assert_eq!(core_field("regarding.name"), "involvedObject.name");
        assert_eq!(core_field("reportingController"), "reportingComponent");
        assert_eq!(core_field("reason"), "reason");
    }
}
