//! Normalizing a transcript: what two correct servers may answer differently is replaced
//! by what it stands for, everything else is kept exactly.
//!
//! - `uid`s (and any UUID in a string) become `uid#1`, `uid#2`, … in order of first
//!   appearance, `resourceVersion`s of objects `rv#1`, `rv#2`, …: two servers agree when
//!   the same answers carry the same and different versions, whatever the numbers.
//! - A list's or a bookmark's `resourceVersion` becomes `<list>` once checked to be a
//!   version at least as new as every item's: etcd's revision counts writes the
//!   scenario does not see (kube-apiserver's own leases), so its value is not comparable.
//! - Times become `<time>` (`<time.6>` with six fractional digits, as MicroTime is
//!   written), so their format is still compared.
//! - The run's namespace becomes `{ns}`, a `generateName` suffix `<suffix>`, a token
//!   `<jwt>`, the name suffix of the ServiceAccount token volume `<suffix>`.
//! - A list's `continue` token becomes `<continue>` (opaque to clients); a version quoted
//!   in a message (`precondition (812)`) its symbol, or `<rv>` when the run never saw it.
//! - The go-cmp diff upstream appends to a refused pod update becomes `<diff>`.
//! - `managedFields` entries are compared in a fixed order (upstream sorts them by a time
//!   in seconds).

use std::collections::HashMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use crate::run::{Record, Transcript};

static TIME: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.(\d+))?(Z|[+-]\d\d:\d\d)$").unwrap()
});
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
});
/// Where a message quotes a resourceVersion.
static VERSION_IN_TEXT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(\(|resource version: |ResourceVersion: )(\d+)").unwrap());
/// Upstream follows this refusal with a go-cmp diff of its internal pod spec, whose layout
/// go-cmp keeps unstable on purpose: only the sentence is compared.
static POD_UPDATE_DIFF: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?s)(pod updates may not change fields other than [^\n]*)\n.*").unwrap()
});
static TOKEN_VOLUME: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"kube-api-access-[a-z0-9]{5}").unwrap());

#[derive(Default)]
struct Symbols {
    namespace: String,
    uids: HashMap<String, usize>,
    rvs: HashMap<String, usize>,
}

impl Symbols {
    fn uid(&mut self, uid: &str) -> String {
        let next = self.uids.len() + 1;
        format!("uid#{}", self.uids.entry(uid.to_string()).or_insert(next))
    }

    fn rv(&mut self, rv: &str) -> String {
        if rv.is_empty() {
            return String::new();
        }
        let next = self.rvs.len() + 1;
        format!("rv#{}", self.rvs.entry(rv.to_string()).or_insert(next))
    }

    fn string(&mut self, s: &str) -> String {
        if let Some(c) = TIME.captures(s) {
            return match c.get(2) {
                Some(fraction) => format!("<time.{}>", fraction.as_str().len()),
                None => "<time>".into(),
            };
        }
        if s.starts_with("eyJ") && s.matches('.').count() == 2 {
            return "<jwt>".into();
        }
        let mut out = s.to_string();
        if !self.namespace.is_empty() {
            out = out.replace(&self.namespace, "{ns}");
        }
        if UUID.is_match(&out) {
            out = UUID
                .replace_all(&out, |c: &regex::Captures<'_>| self.uid(&c[0]))
                .into_owned();
        }
        if VERSION_IN_TEXT.is_match(&out) {
            out = VERSION_IN_TEXT
                .replace_all(&out, |c: &regex::Captures<'_>| {
                    let version = match self.rvs.get(&c[2]) {
                        Some(n) => format!("rv#{n}"),
                        None => "<rv>".into(),
                    };
                    format!("{}{version}", &c[1])
                })
                .into_owned();
        }
        out = POD_UPDATE_DIFF.replace(&out, "$1\n<diff>").into_owned();
        TOKEN_VOLUME
            .replace_all(&out, "kube-api-access-<suffix>")
            .into_owned()
    }

    /// `value` normalized; `collection`: its `metadata.resourceVersion` is a list's or a
    /// bookmark's.
    fn value(&mut self, value: &Value, collection: bool) -> Value {
        match value {
            Value::String(s) => Value::String(self.string(s)),
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.value(v, false)).collect())
            }
            Value::Object(map) => {
                let is_list = collection
                    || map.contains_key("items")
                    || map
                        .get("kind")
                        .and_then(Value::as_str)
                        .is_some_and(|k| k.ends_with("List"));
                let mut out = Map::new();
                for (k, v) in map {
                    let v = match (k.as_str(), v) {
                        ("metadata", Value::Object(meta)) => self.metadata(meta, is_list, map),
                        _ => self.value(v, false),
                    };
                    out.insert(self.string(k), v);
                }
                Value::Object(out)
            }
            other => other.clone(),
        }
    }

    fn metadata(
        &mut self,
        meta: &Map<String, Value>,
        collection: bool,
        object: &Map<String, Value>,
    ) -> Value {
        let mut out = Map::new();
        // The uid first, so that `uid#n` numbers follow the objects, not the strings
        // that happen to come before it.
        if let Some(Value::String(uid)) = meta.get("uid") {
            self.uid(uid);
        }
        for (k, v) in meta {
            let v = match (k.as_str(), v) {
                // Upstream orders entries by time, in seconds: two entries written in
                // the same second or not change places. Compared in a fixed order.
                ("managedFields", Value::Array(entries)) => {
                    let mut entries: Vec<Value> =
                        entries.iter().map(|e| self.value(e, false)).collect();
                    let key = |e: &Value| {
                        ["operation", "manager", "subresource", "apiVersion"]
                            .map(|f| e.get(f).and_then(Value::as_str).unwrap_or("").to_owned())
                    };
                    entries.sort_by_key(key);
                    Value::Array(entries)
                }
                ("resourceVersion", Value::String(rv)) if collection => {
                    Value::String(list_version(rv, object))
                }
                ("resourceVersion", Value::String(rv)) => Value::String(self.rv(rv)),
                // Opaque to clients: only whether there is one counts.
                ("continue", Value::String(token)) if !token.is_empty() => {
                    Value::String("<continue>".into())
                }
                ("name", Value::String(name)) => {
                    let prefix = meta
                        .get("generateName")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    match name.strip_prefix(prefix) {
                        Some(rest) if !prefix.is_empty() && !rest.is_empty() => {
                            Value::String(format!("{}<suffix>", self.string(prefix)))
                        }
                        _ => Value::String(self.string(name)),
                    }
                }
                _ => self.value(v, false),
            };
            out.insert(k.clone(), v);
        }
        Value::Object(out)
    }
}

/// `<list>` when `rv` is a version no older than any item's, else what is wrong.
fn list_version(rv: &str, object: &Map<String, Value>) -> String {
    let Ok(version) = rv.parse::<u64>() else {
        return format!("<list: not a number: {rv}>");
    };
    let newest = object
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|i| {
            i.pointer("/metadata/resourceVersion")?
                .as_str()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .unwrap_or(0);
    if version < newest {
        return "<list: older than an item>".into();
    }
    "<list>".into()
}

/// The transcript with everything two correct servers may choose differently replaced.
pub fn normalize(transcript: &Transcript) -> Vec<Record> {
    let mut symbols = Symbols {
        namespace: transcript.namespace.clone(),
        ..Default::default()
    };
    transcript
        .records
        .iter()
        .map(|record| match record {
            Record::Response {
                status,
                warnings,
                body,
            } => Record::Response {
                status: *status,
                warnings: warnings.iter().map(|w| symbols.string(w)).collect(),
                body: symbols.value(body, false),
            },
            Record::Watch { status, body } => Record::Watch {
                status: *status,
                body: body.as_ref().map(|b| symbols.value(b, false)),
            },
            Record::Events { events, ended } => Record::Events {
                events: events
                    .iter()
                    .map(|e| {
                        let bookmark = e["type"] == "BOOKMARK";
                        let mut out = Map::new();
                        if let Value::Object(map) = e {
                            for (k, v) in map {
                                let v = if k == "object" {
                                    symbols.value(v, bookmark)
                                } else {
                                    symbols.value(v, false)
                                };
                                out.insert(k.clone(), v);
                            }
                        }
                        Value::Object(out)
                    })
                    .collect(),
                ended: *ended,
            },
            Record::Closed => Record::Closed,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn transcript(records: Vec<Record>) -> Transcript {
        Transcript {
            namespace: "fid-x1".into(),
            records,
        }
    }

    #[test]
    fn versions_and_uids_become_symbols_in_order() {
        let t = transcript(vec![
            Record::Response {
                status: 201,
                warnings: vec![],
                body: json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "fid-x1",
                    "uid": "0b7f6d2e-1111-4a4a-9b9b-0123456789ab", "resourceVersion": "812",
                    "creationTimestamp": "2026-11-26T01:02:03Z", "managedFields": [
                        {"manager": "b", "operation": "Update", "time": "2026-11-26T01:02:03Z"},
                        {"manager": "a", "operation": "Update", "time": "2026-11-26T01:02:04Z"}]}}),
            },
            Record::Response {
                status: 200,
                warnings: vec![],
                body: json!({"kind": "PodList", "metadata": {"resourceVersion": "900"}, "items": [
                    {"metadata": {"name": "p", "uid": "0b7f6d2e-1111-4a4a-9b9b-0123456789ab", "resourceVersion": "812"}}]}),
            },
        ]);
        let n = normalize(&t);
        let Record::Response { body, .. } = &n[0] else {
            panic!()
        };
        assert_eq!(
            body,
            &json!({"kind": "Pod", "metadata": {"name": "p", "namespace": "{ns}", "uid": "uid#1",
                "resourceVersion": "rv#1", "creationTimestamp": "<time>", "managedFields": [
                    {"manager": "a", "operation": "Update", "time": "<time>"},
                    {"manager": "b", "operation": "Update", "time": "<time>"}]}})
        );
        let Record::Response { body, .. } = &n[1] else {
            panic!()
        };
        assert_eq!(body["metadata"]["resourceVersion"], "<list>");
        assert_eq!(body["items"][0]["metadata"]["resourceVersion"], "rv#1");
    }

    #[test]
    fn a_list_older_than_its_items_is_named() {
        let t = transcript(vec![Record::Response {
            status: 200,
            warnings: vec![],
            body: json!({"metadata": {"resourceVersion": "5"}, "items": [{"metadata": {"resourceVersion": "7"}}]}),
        }]);
        let Record::Response { body, .. } = &normalize(&t)[0] else {
            panic!()
        };
        assert_eq!(
            body["metadata"]["resourceVersion"],
            "<list: older than an item>"
        );
    }

    #[test]
    fn generated_names_times_and_messages() {
        let t = transcript(vec![Record::Response {
            status: 409,
            warnings: vec![],
            body: json!({"message": "Precondition failed: UID in precondition: 0b7f6d2e-1111-4a4a-9b9b-0123456789ab",
                "metadata": {"generateName": "web-", "name": "web-x7k2p"},
                "renewTime": "2026-11-26T01:02:03.123456Z"}),
        }]);
        let Record::Response { body, .. } = &normalize(&t)[0] else {
            panic!()
        };
        assert_eq!(
            body["message"],
            "Precondition failed: UID in precondition: uid#1"
        );
        assert_eq!(body["metadata"]["name"], "web-<suffix>");
        assert_eq!(body["renewTime"], "<time.6>");
    }
}
