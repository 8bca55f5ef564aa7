//! Reading the fields of an object as its JSON arrives, for the validators.

use serde_json::Value;

use crate::field::{Error as FieldError, Value as Bad};

/// The string at `key` of an object (`""` when absent or not a string).
pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

/// The items of the list at `key` of an object (none when absent or not a list).
pub(super) fn list<'a>(obj: &'a Value, key: &str) -> &'a [Value] {
    obj.get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// `value` is one of `allowed`: a required value when empty, else unsupported.
pub(super) fn one_of(errors: &mut Vec<FieldError>, path: &str, value: &str, allowed: &[&str]) {
    match value {
        "" => errors.push(FieldError::required(path, "")),
        v if allowed.contains(&v) => {}
        v => errors.push(FieldError::not_supported(path, Bad::str(v), allowed)),
    }
}
