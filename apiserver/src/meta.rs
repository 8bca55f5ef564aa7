//! Small helpers over objects kept as JSON: reading and writing `metadata` fields,
//! timestamps in the upstream formats, uids and `generateName` suffixes.

use rand::RngExt;
use serde_json::{Map, Value};

/// `metadata.<field>` as a string, `""` when absent.
pub fn str_field<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The object's `metadata` map, created when missing (the object must be a JSON object).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("made an object above");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("made an object above")
}

/// Sets `metadata.<field>`.
pub fn set(obj: &mut Value, field: &str, value: impl Into<Value>) {
    metadata_mut(obj).insert(field.to_string(), value.into());
}

/// `metadata.finalizers` is non-empty.
pub fn has_finalizers(obj: &Value) -> bool {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|f| !f.is_empty())
}

/// `metadata.finalizers` (non-strings skipped).
pub fn finalizers(obj: &Value) -> Vec<&str> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|f| f.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// A string at a dotted path (`spec.nodeName`); booleans and numbers are printed, missing is `""`.
pub fn path_string(obj: &Value, path: &str) -> String {
    let mut cur = obj;
    for part in path.split('.') {
        match cur.get(part) {
            Some(v) => cur = v,
            None => return String::new(),
        }
    }
    match cur {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Now as a `metav1.Time` (RFC 3339, seconds).
pub fn now() -> String {
    time(chrono::Utc::now())
}

/// A time as a `metav1.Time`.
pub fn time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// Parses a `metav1.Time` or `MicroTime`.
pub fn parse_time(s: &str) -> Option<chrono::DateTime<chrono::Utc>> {
    chrono::DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// A random version-4 UUID, as upstream gives every object.
pub fn new_uid() -> String {
    let mut b: [u8; 16] = rand::rng().random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// Five characters from upstream's `generateName` alphabet (no vowels, no confusable digits).
pub fn name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// Whether `name` is an RFC 1123 subdomain (most object names).
pub fn is_dns_subdomain(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

/// Whether `name` is an RFC 1123 label (namespace names).
pub fn is_dns_label(name: &str) -> bool {
    name.len() <= 63 && !name.contains('.') && is_dns_subdomain(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uid_is_v4_shaped() {
        let u = new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
    }

    #[test]
    fn names() {
        assert!(is_dns_subdomain("a.b-c"));
        assert!(!is_dns_subdomain("A"));
        assert!(!is_dns_subdomain("-a"));
        assert!(!is_dns_label("a.b"));
        assert_eq!(name_suffix().len(), 5);
    }

    #[test]
    fn path_string_prints_scalars() {
        let v = serde_json::json!({"spec": {"nodeName": "n", "hostNetwork": true}});
        assert_eq!(path_string(&v, "spec.nodeName"), "n");
        assert_eq!(path_string(&v, "spec.hostNetwork"), "true");
        assert_eq!(path_string(&v, "status.phase"), "");
    }
}
