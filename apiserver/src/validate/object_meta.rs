//! `ValidateObjectMeta` and `ValidateObjectMetaAccessorUpdate`: names, labels, finalizers
//! of objects being deleted, fields that never change.

use serde_json::Value;

use crate::field::{Error as FieldError, Value as Bad};
use crate::meta;
use crate::resources::{self, Resource};

use super::key_path;

const DNS1123_SUBDOMAIN: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// The messages of `IsDNS1123Subdomain`.
pub(super) fn dns_subdomain_errors(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 253 {
        out.push("must be no more than 253 characters".to_owned());
    }
    if !meta::is_dns_subdomain(value) {
        out.push(DNS1123_SUBDOMAIN.to_owned());
    }
    out
}

/// The messages of `IsDNS1123Label`.
pub(super) fn dns_label_errors(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    if value.len() > 63 {
        out.push("must be no more than 63 characters".to_owned());
    }
    if !meta::is_dns_label(value) {
        // A valid subdomain of the right length that is no label: it has dots.
        out.push(if meta::is_dns_subdomain(value) {
            "must not contain dots".to_owned()
        } else {
            DNS1123_LABEL.to_owned()
        });
    }
    out
}

/// How a kind's names are checked (`NameIsDNSSubdomain`, `NameIsDNSLabel`, the path
/// segment rule of events).
fn name_errors(resource: &Resource, name: &str) -> Vec<String> {
    let id = resource.storage().id;
    if id == resources::NAMESPACES.id {
        dns_label_errors(name)
    } else if id == resources::EVENTS.id {
        match name {
            "." | ".." => vec![format!("may not be '{name}'")],
            _ if name.contains('/') => vec!["may not contain '/'".to_owned()],
            _ if name.contains('%') => vec!["may not contain '%'".to_owned()],
            _ => vec![],
        }
    } else {
        dns_subdomain_errors(name)
    }
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// `ValidateLabels`: keys are qualified names, values at most 63 characters of the
/// label alphabet.
fn labels(obj: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) else {
        return out;
    };
    for (key, value) in labels {
        let (prefix, name) = key
            .rsplit_once('/')
            .map_or(("", key.as_str()), |(p, n)| (p, n));
        if !is_qualified_name_part(name)
            || (key.contains('/') && !dns_subdomain_errors(prefix).is_empty())
        {
            out.push(FieldError::invalid(
                "metadata.labels",
                Bad::str(key),
                QUALIFIED_NAME,
            ));
        }
        let v = value.as_str().unwrap_or("");
        if v.len() > 63 {
            out.push(FieldError::invalid(
                "metadata.labels",
                Bad::str(v),
                "must be no more than 63 characters",
            ));
        }
        if !v.is_empty() && !is_qualified_name_part(v) {
            out.push(FieldError::invalid(
                "metadata.labels",
                Bad::str(v),
                LABEL_VALUE,
            ));
        }
    }
    out
}

/// The metadata of a new object.
pub(super) fn create(resource: &Resource, obj: &Value) -> Vec<FieldError> {
    let name = meta::str_field(obj, "name");
    let mut out: Vec<FieldError> = if name.is_empty() {
        vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )]
    } else {
        name_errors(resource, name)
            .into_iter()
            .map(|msg| FieldError::invalid("metadata.name", Bad::str(name), msg))
            .collect()
    };
    out.extend(labels(obj));
    out
}

/// The metadata of an updated object.
pub(super) fn update(old: &Value, new: &Value) -> Vec<FieldError> {
    let mut out = Vec::new();
    if !meta::str_field(old, "deletionTimestamp").is_empty() {
        let before = meta::finalizers(old);
        let mut extra: Vec<&str> = meta::finalizers(new)
            .into_iter()
            .filter(|f| !before.contains(f))
            .collect();
        extra.sort_unstable();
        extra.dedup();
        if !extra.is_empty() {
            out.push(FieldError::forbidden(
                "metadata.finalizers",
                format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers {}",
                    Bad::strings(&extra).rendered()
                ),
            ));
        }
    }
    let (old_uid, new_uid) = (meta::str_field(old, "uid"), meta::str_field(new, "uid"));
    if old_uid != new_uid {
        out.push(FieldError::invalid(
            "metadata.uid",
            Bad::str(new_uid),
            "field is immutable",
        ));
    }
    out.extend(labels(new));
    out
}

/// `data[key]`-style errors for the keys of a map (`IsConfigMapKey`).
pub(super) fn config_key_errors(path: &str, key: &str) -> Vec<FieldError> {
    const KEY: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";
    let mut messages = Vec::new();
    if key.len() > 253 {
        messages.push("must be no more than 253 characters".to_owned());
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        messages.push(KEY.to_owned());
    }
    match key {
        "." => messages.push("must not be '.'".to_owned()),
        ".." => messages.push("must not be '..'".to_owned()),
        k if k.starts_with("..") => messages.push("must not start with '..'".to_owned()),
        _ => {}
    }
    messages
        .into_iter()
        .map(|m| FieldError::invalid(key_path(path, key), Bad::str(key), m))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_and_labels() {
        let errors = create(
            &resources::CONFIGMAPS,
            &json!({"metadata": {"name": "Not_Valid"}}),
        );
        assert_eq!(errors.len(), 1);
        assert!(errors[0].to_string().starts_with(
            "metadata.name: Invalid value: \"Not_Valid\": a lowercase RFC 1123 subdomain"
        ));
        let errors = create(
            &resources::CONFIGMAPS,
            &json!({"metadata": {"name": "a", "labels": {"ok/x": "y", "bad key": "v", "k": "-no"}}}),
        );
        assert_eq!(errors.len(), 2, "{errors:?}");
        let namespace = |name: &str| {
            create(&resources::NAMESPACES, &json!({"metadata": {"name": name}}))[0].to_string()
        };
        assert!(namespace("a_b").contains("RFC 1123 label"));
        assert!(namespace("a.b").ends_with("must not contain dots"));
        assert!(
            create(
                &resources::EVENTS,
                &json!({"metadata": {"name": "p.17a0b1"}})
            )
            .is_empty()
        );
    }

    #[test]
    fn no_new_finalizers_while_deleting() {
        let old = json!({"metadata": {"uid": "u", "deletionTimestamp": "t", "finalizers": ["a"]}});
        let new = json!({"metadata": {"uid": "u", "finalizers": ["a", "c", "b"]}});
        assert_eq!(
            update(&old, &new)[0].to_string(),
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{\"b\", \"c\"}"
        );
        let moved = json!({"metadata": {"uid": "v"}});
        assert_eq!(
            update(&json!({"metadata": {"uid": "u"}}), &moved)[0].to_string(),
            "metadata.uid: Invalid value: \"v\": field is immutable"
        );
    }
}
