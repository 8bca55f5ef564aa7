//! The four patch types: JSON merge (RFC 7386), strategic merge, JSON patch (RFC 6902) and
//! server-side apply, which the double treats as a strategic merge of the applied
//! configuration (no field ownership).

use serde_json::Value;

use crate::http::media_type;
use crate::resources::Resource;
use crate::status::{Error, Result};
use crate::strategic;

/// The patch format, from the request's `Content-Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/json-patch+json`.
    Json,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type a `Content-Type` names, or 415.
    pub fn from_content_type(content_type: &str) -> Result<Self> {
        match media_type(content_type).as_str() {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/apply-patch+yaml" => Ok(PatchType::Apply),
            _ => Err(Error::UnsupportedMediaType {
                content_type: content_type.to_string(),
            }),
        }
    }
}

/// Parses a JSON request body, 400 with the parser's message when it is malformed.
pub fn parse_json(body: &[u8]) -> Result<Value> {
    serde_json::from_slice(body).map_err(|e| {
        Error::bad_request(format!(
            "the body of the request could not be decoded as JSON: {e}"
        ))
    })
}

/// Parses a YAML (or JSON, a subset) request body into JSON.
pub fn parse_yaml(body: &[u8]) -> Result<Value> {
    serde_yaml::from_slice::<Value>(body).map_err(|e| {
        Error::bad_request(format!(
            "the body of the request could not be decoded as YAML: {e}"
        ))
    })
}

/// The patch body as JSON (YAML for apply).
pub fn parse(kind: PatchType, body: &[u8]) -> Result<Value> {
    match kind {
        PatchType::Apply => parse_yaml(body),
        _ => parse_json(body),
    }
}

/// Applies a parsed patch to `current`, returning the patched object.
pub fn apply(
    resource: &'static Resource,
    kind: PatchType,
    current: &Value,
    patch: &Value,
    name: &str,
) -> Result<Value> {
    let mut doc = current.clone();
    match kind {
        PatchType::Merge => {
            if !patch.is_object() {
                return Err(Error::bad_request("merge patch must be a JSON object"));
            }
            json_patch::merge(&mut doc, patch);
        }
        PatchType::Strategic | PatchType::Apply => strategic::apply(resource, &mut doc, patch)?,
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone()).map_err(|e| {
                Error::bad_request(format!("the JSON patch could not be decoded: {e}"))
            })?;
            json_patch::patch(&mut doc, &ops).map_err(|e| {
                tracing::debug!(resource = resource.plural, name, error = %e, "JSON patch not applied");
                Error::PatchRejected
            })?;
        }
    }
    Ok(doc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::CONFIGMAPS;
    use serde_json::json;

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8").unwrap(),
            PatchType::Merge
        );
        assert_eq!(
            PatchType::from_content_type("application/json")
                .unwrap_err()
                .code(),
            415
        );
    }

    #[test]
    fn merge_json_and_apply() {
        let cm = json!({"data": {"a": "1", "b": "2"}});
        let out = apply(
            &CONFIGMAPS,
            PatchType::Merge,
            &cm,
            &json!({"data": {"a": null}}),
            "x",
        )
        .unwrap();
        assert_eq!(out["data"], json!({"b": "2"}));
        let ops = json!([{"op": "replace", "path": "/data/a", "value": "9"}]);
        let out = apply(&CONFIGMAPS, PatchType::Json, &cm, &ops, "x").unwrap();
        assert_eq!(out["data"]["a"], "9");
        let bad = json!([{"op": "test", "path": "/data/a", "value": "0"}]);
        assert_eq!(
            apply(&CONFIGMAPS, PatchType::Json, &cm, &bad, "x")
                .unwrap_err()
                .code(),
            422
        );
        let yaml = parse(PatchType::Apply, b"data:\n  c: '3'\n").unwrap();
        let out = apply(&CONFIGMAPS, PatchType::Apply, &cm, &yaml, "x").unwrap();
        assert_eq!(out["data"]["c"], "3");
    }

    #[test]
    fn malformed_bodies_are_bad_requests() {
        assert_eq!(parse_json(b"{nope").unwrap_err().code(), 400);
        assert_eq!(parse_yaml(b"a: [").unwrap_err().code(), 400);
    }
}
