//! Comparing two normalized transcripts: every place where they differ, by step and
//! JSON path.

use std::fmt;

use serde_json::Value;

use crate::run::Record;
use crate::scenario::{Scenario, Step};

/// One difference between what the reference server answered and what the server under
/// test answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Divergence {
    /// 1-based step.
    pub step: usize,
    /// What the step did (`PUT /api/v1/namespaces/{ns}/pods/p/status`).
    pub request: String,
    /// Where in the record (`/body/metadata/labels`).
    pub path: String,
    /// The reference's value (`None`: absent).
    pub expected: Option<Value>,
    /// The other server's value (`None`: absent).
    pub actual: Option<Value>,
}

impl fmt::Display for Divergence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: &Option<Value>| match v {
            None => "(absent)".to_string(),
            Some(v) => {
                let s = v.to_string();
                match s.char_indices().nth(400) {
                    Some((cut, _)) => format!("{}…", &s[..cut]),
                    None => s,
                }
            }
        };
        write!(
            f,
            "step {} ({}) at {}: expected {}, got {}",
            self.step,
            self.request,
            if self.path.is_empty() {
                "/"
            } else {
                &self.path
            },
            show(&self.expected),
            show(&self.actual)
        )
    }
}

/// A step as one line.
pub fn describe(step: &Step) -> String {
    match step {
        Step::Request {
            method,
            path,
            query,
            ..
        } => {
            let q: Vec<String> = query.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let method = format!("{method:?}").to_uppercase();
            if q.is_empty() {
                format!("{method} {path}")
            } else {
                format!("{method} {path}?{}", q.join("&"))
            }
        }
        Step::Watch { id, path, .. } => format!("watch {id} on {path}"),
        Step::Events { watch, .. } => format!("events of {watch}"),
        Step::Close { watch } => format!("close {watch}"),
    }
}

/// Every divergence of `actual` from `expected` (both normalized) for `scenario`.
pub fn diff(scenario: &Scenario, expected: &[Record], actual: &[Record]) -> Vec<Divergence> {
    let mut out = Vec::new();
    for (i, step) in scenario.steps.iter().enumerate() {
        let e = expected.get(i).map(record_value);
        let a = actual.get(i).map(record_value);
        let mut found = Vec::new();
        compare(String::new(), e.as_ref(), a.as_ref(), &mut found);
        out.extend(
            found
                .into_iter()
                .map(|(path, expected, actual)| Divergence {
                    step: i + 1,
                    request: describe(step),
                    path,
                    expected,
                    actual,
                }),
        );
    }
    out
}

fn record_value(record: &Record) -> Value {
    serde_json::to_value(record).unwrap_or(Value::Null)
}

type Found = Vec<(String, Option<Value>, Option<Value>)>;

fn compare(path: String, e: Option<&Value>, a: Option<&Value>, out: &mut Found) {
    match (e, a) {
        (Some(Value::Object(e)), Some(Value::Object(a))) => {
            let mut keys: Vec<&String> = e.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                compare(
                    format!("{path}/{}", k.replace('~', "~0").replace('/', "~1")),
                    e.get(k),
                    a.get(k),
                    out,
                );
            }
        }
        (Some(Value::Array(e)), Some(Value::Array(a))) if e.len() == a.len() => {
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                compare(format!("{path}/{i}"), Some(e), Some(a), out);
            }
        }
        (e, a) if e == a => {}
        (e, a) => out.push((path, e.cloned(), a.cloned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn differences_are_found_by_path() {
        let scenario: Scenario = serde_yaml::from_str(
            "name: x\ndescription: d\nsteps:\n  - do: request\n    method: GET\n    path: /api/v1/pods\n",
        )
        .unwrap();
        let e = [Record::Response {
            status: 200,
            warnings: vec![],
            body: json!({"a": 1, "b": [1, 2], "c": "x"}),
        }];
        let a = [Record::Response {
            status: 409,
            warnings: vec![],
            body: json!({"a": 1, "b": [1, 3], "d": true}),
        }];
        let d = diff(&scenario, &e, &a);
        let paths: Vec<&str> = d.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["/body/b/1", "/body/c", "/body/d", "/status"]);
        assert_eq!(d[0].request, "GET /api/v1/pods");
        assert!(diff(&scenario, &e, &e).is_empty());
    }
}
