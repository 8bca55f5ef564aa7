//! The four patch types: JSON merge (RFC 7386), strategic merge, JSON patch (RFC 6902) and
//! server-side apply, which the double treats as a strategic merge of the applied
//! configuration (no field ownership).

use serde_json::Value;

use crate::http::media_type;
use crate::resources::Resource;
use crate::status::{Error, Result};
use crate::strategic;

/// The patch types upstream lists when a PATCH's content type is none of them.
const PATCH_TYPES: &[&str] = &[
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
    "application/strategic-merge-patch+json",
];

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
                accepted: PATCH_TYPES,
            }),
        }
    }
}

/// Parses a JSON request body; when it is malformed, the error is Go's decoder's words.
pub fn parse_json(body: &[u8]) -> std::result::Result<Value, String> {
    serde_json::from_slice(body)
        .map_err(|e| crate::go_json::syntax_error(body).unwrap_or_else(|| e.to_string()))
}

/// Parses a YAML (or JSON, a subset) request body into JSON.
pub fn parse_yaml(body: &[u8]) -> std::result::Result<Value, String> {
    serde_yaml::from_slice::<Value>(body).map_err(|e| format!("error converting YAML to JSON: {e}"))
}

/// The patch body as JSON (YAML for apply), with upstream's 400 when it does not decode
/// into what the patch type is made of (an object; a list of operations).
pub fn parse(kind: PatchType, body: &[u8]) -> Result<Value> {
    let decoding = |detail: String| Error::bad_request(format!("error decoding patch: {detail}"));
    let value = match kind {
        PatchType::Apply => parse_yaml(body).map_err(Error::bad_request)?,
        _ => parse_json(body).map_err(decoding)?,
    };
    let wanted = match kind {
        PatchType::Json if !value.is_array() => "[]handlers.jsonPatchOp",
        PatchType::Merge | PatchType::Strategic if !value.is_object() => "map[string]interface {}",
        _ => return Ok(value),
    };
    Err(decoding(format!(
        "json: cannot unmarshal {} into Go value of type {wanted}",
        crate::go_json::kind_of(&value)
    )))
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
        PatchType::Strategic => strategic::apply(resource, &mut doc, patch)?,
        PatchType::Apply => match crate::managed_fields::merge::merge(resource, &doc, patch) {
            Some(merged) => doc = merged,
            None => strategic::apply(resource, &mut doc, patch)?,
        },
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| Error::bad_request(e.to_string()))?;
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
        assert_eq!(
            parse(PatchType::Merge, b"{nope").unwrap_err().to_string(),
            "error decoding patch: invalid character 'n' looking for beginning of object key string"
        );
        assert_eq!(
            parse(PatchType::Json, b"{}").unwrap_err().to_string(),
            "error decoding patch: json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
        );
        assert_eq!(parse(PatchType::Apply, b"a: [").unwrap_err().code(), 400);
    }
}
