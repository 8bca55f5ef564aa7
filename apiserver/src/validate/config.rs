//! `ValidateConfigMap`, `ValidateSecret` and their updates: keys, immutability, the keys
//! each Secret type requires.

use serde_json::Value;

use crate::field::{Error as FieldError, Value as Bad};

use super::key_path;
use super::object_meta::config_key_errors;

fn keys<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = &'a String> {
    obj.get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| m.keys())
}

/// A ConfigMap's keys: valid, and not in both `data` and `binaryData`.
pub(super) fn config_map(obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    for key in keys(obj, "data") {
        out.extend(config_key_errors("data", key));
        if obj
            .pointer("/binaryData")
            .and_then(|b| b.get(key))
            .is_some()
        {
            out.push(FieldError::invalid(
                key_path("data", key),
                Bad::str(key),
                "duplicate of key present in binaryData",
            ));
        }
    }
    for key in keys(obj, "binaryData") {
        out.extend(config_key_errors("binaryData", key));
    }
    out
}

fn immutable(obj: &Value) -> bool {
    obj.get("immutable").and_then(Value::as_bool) == Some(true)
}

/// What an immutable object refuses: `immutable` unset, any of `fields` changed.
fn frozen(old: &Value, new: &Value, fields: &[&str]) -> Vec<FieldError> {
    const FROZEN: &str = "field is immutable when `immutable` is set";
    let mut out = Vec::new();
    if !immutable(old) {
        return out;
    }
    if !immutable(new) {
        out.push(FieldError::forbidden("immutable", FROZEN));
    }
    for field in fields {
        let empty = |v: Option<&Value>| {
            v.filter(|v| !v.is_null() && v.as_object().is_none_or(|m| !m.is_empty()))
                .cloned()
        };
        if empty(old.get(*field)) != empty(new.get(*field)) {
            out.push(FieldError::forbidden(*field, FROZEN));
        }
    }
    out
}

/// A ConfigMap update.
pub(super) fn config_map_update(old: &Value, new: &Value) -> Vec<FieldError> {
    frozen(old, new, &["data", "binaryData"])
}

/// A Secret's keys and the keys its type requires.
pub(super) fn secret(obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    for key in keys(obj, "data") {
        out.extend(config_key_errors("data", key));
    }
    let has = |key: &str| obj.pointer("/data").and_then(|d| d.get(key)).is_some();
    let required = |key: &str| FieldError::required(key_path("data", key), "");
    match obj.get("type").and_then(Value::as_str).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let annotated = obj
                .pointer("/metadata/annotations/kubernetes.io~1service-account.name")
                .and_then(Value::as_str)
                .is_some_and(|v| !v.is_empty());
            if !annotated {
                out.push(FieldError::required(
                    "metadata.annotations[kubernetes.io/service-account.name]",
                    "",
                ));
            }
        }
        "kubernetes.io/dockercfg" if !has(".dockercfg") => out.push(required(".dockercfg")),
        "kubernetes.io/dockerconfigjson" if !has(".dockerconfigjson") => {
            out.push(required(".dockerconfigjson"))
        }
        "kubernetes.io/basic-auth" if !has("username") && !has("password") => {
            out.push(FieldError::required("data[username]", ""));
            out.push(FieldError::required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" if !has("ssh-privatekey") => out.push(required("ssh-privatekey")),
        "kubernetes.io/tls" => {
            for key in ["tls.crt", "tls.key"] {
                if !has(key) {
                    out.push(required(key));
                }
            }
        }
        _ => {}
    }
    out
}

/// A Secret update: its type never changes; immutable ones keep their data.
pub(super) fn secret_update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let (before, after) = (old.get("type"), new.get("type"));
    if before != after {
        let shown = after.and_then(Value::as_str).unwrap_or("");
        out.push(FieldError::invalid(
            "type",
            Bad::str(shown),
            "field is immutable",
        ));
    }
    out.extend(frozen(old, new, &["data"]));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn config_keys_and_secret_types() {
        let e = config_map(&json!({"data": {"bad key": "1", "ok": "2"}}));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].field, "data[bad key]");
        let e = secret(&json!({"type": "kubernetes.io/tls", "data": {"tls.crt": ""}}));
        assert_eq!(e[0].to_string(), "data[tls.key]: Required value");
    }

    #[test]
    fn immutable_objects_keep_their_data() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert_eq!(
            config_map_update(&old, &json!({"immutable": true, "data": {"a": "2"}}))[0].field,
            "data"
        );
        assert_eq!(
            config_map_update(&old, &json!({"immutable": false, "data": {"a": "1"}}))[0].field,
            "immutable"
        );
        assert!(config_map_update(&old, &old).is_empty());
    }
}
