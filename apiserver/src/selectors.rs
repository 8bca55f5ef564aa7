//! `labelSelector` (equality- and set-based) and `fieldSelector` parsing and matching,
//! with upstream's grammar (`k8s.io/apimachinery/pkg/labels` and `.../fields`).

use serde_json::Value;

use crate::meta;
use crate::resources::Resource;
use crate::status::{Error, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed `labelSelector`: all requirements must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    requirements: Vec<(String, LabelOp)>,
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn valid_label_key(key: &str) -> bool {
    !key.is_empty()
        && key.len() <= 317
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./".contains(&b))
}

fn value_list(s: &str) -> Result<Vec<String>> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            let found = s.trim().split([' ', ',']).next().unwrap_or_default();
            Error::bad_request(format!(
                "unable to parse requirement: found '{found}' expected: '('"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses a `labelSelector` query value; an empty string selects everything.
    pub fn parse(s: &str) -> Result<Self> {
        let mut requirements = Vec::new();
        for part in split_top_level(s) {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let bad = || {
                Error::bad_request(format!(
                    "unable to parse requirement: invalid label selector {s:?}"
                ))
            };
            let (key, op) = if let Some(key) = part.strip_prefix('!') {
                (key.trim().to_string(), LabelOp::DoesNotExist)
            } else if let Some((k, v)) = part.split_once("!=") {
                (k.trim().to_string(), LabelOp::NotEq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once("==") {
                (k.trim().to_string(), LabelOp::Eq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once('=') {
                (k.trim().to_string(), LabelOp::Eq(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once(" notin ") {
                (k.trim().to_string(), LabelOp::NotIn(value_list(v)?))
            } else if let Some((k, v)) = part.split_once(" in ") {
                (k.trim().to_string(), LabelOp::In(value_list(v)?))
            } else if let Some((_, rest)) = part.split_once(' ') {
                // upstream's lexer: an identifier followed by something that is no operator
                let found = rest.trim().split(' ').next().unwrap_or_default();
                return Err(Error::bad_request(format!(
                    "unable to parse requirement: found '{found}', expected: in, notin, =, ==, !=, gt, lt"
                )));
            } else if part.contains('(') {
                return Err(bad());
            } else {
                (part.to_string(), LabelOp::Exists)
            };
            if !valid_label_key(&key) {
                return Err(bad());
            }
            requirements.push((key, op));
        }
        Ok(LabelSelector { requirements })
    }

    /// Whether the object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.requirements.iter().all(|(key, op)| {
            let value = labels.and_then(|l| l.get(key)).and_then(Value::as_str);
            match op {
                LabelOp::Eq(v) => value == Some(v.as_str()),
                LabelOp::NotEq(v) => value != Some(v.as_str()),
                LabelOp::In(vs) => value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::NotIn(vs) => !value.is_some_and(|x| vs.iter().any(|v| v == x)),
                LabelOp::Exists => value.is_some(),
                LabelOp::DoesNotExist => value.is_none(),
            }
        })
    }
}

/// A parsed `fieldSelector`: `field=value`, `field==value`, `field!=value`, comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    requirements: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a `fieldSelector` for `resource`; a field the resource does not serve is a 400,
    /// as upstream (`field label not supported: ...`), never a silent full list.
    pub fn parse(s: &str, resource: &Resource) -> Result<Self> {
        let mut requirements = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (field, equal, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(Error::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !resource.supports_field(field) {
                return Err(Error::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            let field = if resource.converted() {
                crate::events::core_field(field)
            } else {
                field.to_string()
            };
            requirements.push((field, equal, value.trim().to_string()));
        }
        Ok(FieldSelector { requirements })
    }

    /// Whether the object's fields satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        self.requirements.iter().all(|(field, equal, value)| {
            let actual = match field.as_str() {
                "metadata.name" => meta::str_field(obj, "name").to_string(),
                "metadata.namespace" => meta::str_field(obj, "namespace").to_string(),
                "source" => meta::path_string(obj, "source.component"),
                other => meta::path_string(obj, other),
            };
            (actual == *value) == *equal
        })
    }

    /// The value required for `metadata.name`, if the selector pins one name.
    pub fn pinned_name(&self) -> Option<&str> {
        self.requirements
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }
}

/// A label and a field selector together.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    /// The label selector.
    pub labels: LabelSelector,
    /// The field selector.
    pub fields: FieldSelector,
}

impl Selector {
    /// Whether the object passes both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, PODS};
    use serde_json::json;

    fn pod(labels: Value) -> Value {
        json!({"metadata": {"name": "p", "namespace": "ns", "labels": labels},
               "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}})
    }

    #[test]
    fn equality_and_sets() {
        let p = pod(json!({"app": "web", "tier": "fe"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier in (fe)", true),
            ("app=web,tier=be", false),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).unwrap().matches(&p),
                want,
                "{sel}"
            );
        }
    }

    #[test]
    fn bad_label_selectors_are_rejected() {
        for sel in ["app in web", "a b", "=x"] {
            assert!(LabelSelector::parse(sel).is_err(), "{sel}");
        }
    }

    #[test]
    fn fields() {
        let p = pod(json!({}));
        let s = FieldSelector::parse("spec.nodeName=n1,status.phase!=Failed", &PODS).unwrap();
        assert!(s.matches(&p));
        let s = FieldSelector::parse("metadata.name=q", &PODS).unwrap();
        assert!(!s.matches(&p));
        assert_eq!(s.pinned_name(), Some("q"));
    }

    #[test]
    fn unsupported_field_is_a_bad_request() {
        let err = FieldSelector::parse("spec.nodeName=n1", &CONFIGMAPS).unwrap_err();
        assert_eq!(err.code(), 400);
        assert!(err.to_string().contains("field label not supported"));
    }
}
