//! Field errors as upstream's `k8s.io/apimachinery/pkg/util/validation/field` writes them:
//! every validation failure names its field path, what kind of failure it is and, where
//! upstream shows it, the bad value printed as Go prints it. [`crate::status::Error::Invalid`]
//! carries a list of them into a 422 `Status` with one cause each.

use std::fmt;

/// What is wrong with a field (`field.ErrorType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `FieldValueNotFound`
    NotFound,
    /// `FieldValueRequired`
    Required,
    /// `FieldValueDuplicate`
    Duplicate,
    /// `FieldValueInvalid`
    Invalid,
    /// `FieldValueNotSupported`
    NotSupported,
    /// `FieldValueForbidden`
    Forbidden,
    /// `FieldValueTooLong`
    TooLong,
    /// `FieldValueTooMany`
    TooMany,
}

impl Kind {
    /// The `StatusCause.reason`.
    pub fn reason(self) -> &'static str {
        match self {
            Kind::NotFound => "FieldValueNotFound",
            Kind::Required => "FieldValueRequired",
            Kind::Duplicate => "FieldValueDuplicate",
            Kind::Invalid => "FieldValueInvalid",
            Kind::NotSupported => "FieldValueNotSupported",
            Kind::Forbidden => "FieldValueForbidden",
            Kind::TooLong => "FieldValueTooLong",
            Kind::TooMany => "FieldValueTooMany",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Kind::NotFound => "Not found",
            Kind::Required => "Required value",
            Kind::Duplicate => "Duplicate value",
            Kind::Invalid => "Invalid value",
            Kind::NotSupported => "Unsupported value",
            Kind::Forbidden => "Forbidden",
            Kind::TooLong => "Too long",
            Kind::TooMany => "Too many",
        }
    }
}

/// A bad value as Go's `%q`, `%v` or `%#v` prints it in a field error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Value(String);

impl Value {
    /// A string, quoted as Go's `%q` does.
    pub fn str(s: &str) -> Self {
        Value(go_quote(s))
    }

    /// A number or a boolean, as `%v` prints it.
    pub fn plain(v: impl fmt::Display) -> Self {
        Value(v.to_string())
    }

    /// A `[]string`, as `%#v` prints it: `[]string{"a", "b"}`.
    pub fn strings<S: AsRef<str>>(items: &[S]) -> Self {
        let quoted: Vec<String> = items.iter().map(|s| go_quote(s.as_ref())).collect();
        Value(format!("[]string{{{}}}", quoted.join(", ")))
    }

    /// Printed as given (a Go rendering that has no constructor here, e.g. `0x0`).
    pub fn raw(s: impl Into<String>) -> Self {
        Value(s.into())
    }

    /// The value as it is printed.
    pub fn rendered(&self) -> &str {
        &self.0
    }
}

/// Go's `%q` of a string: double quotes, with `"` and `\` escaped and control characters
/// written as escapes.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One field error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What is wrong.
    pub kind: Kind,
    /// The field path, e.g. `spec.containers[0].image`.
    pub field: String,
    /// The bad value, where upstream prints one.
    pub value: Option<Value>,
    /// More words.
    pub detail: String,
}

impl Error {
    /// `field.Required`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(Kind::Required, field, None, detail)
    }

    /// `field.Forbidden`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(Kind::Forbidden, field, None, detail)
    }

    /// `field.Invalid`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(Kind::Invalid, field, Some(value), detail)
    }

    /// `field.TooLong` (1.29+'s wording): a value longer than `max` bytes.
    pub fn too_long(field: impl Into<String>, max: usize) -> Self {
        let unit = if max == 1 { "byte" } else { "bytes" };
        Self::new(
            Kind::TooLong,
            field,
            None,
            format!("may not be more than {max} {unit}"),
        )
    }

    /// `field.TooMany`: a list of `actual` items where at most `max` may be.
    pub fn too_many(field: impl Into<String>, actual: usize, max: usize) -> Self {
        let unit = if max == 1 { "item" } else { "items" };
        Self::new(
            Kind::TooMany,
            field,
            Some(Value::plain(actual)),
            format!("must have at most {max} {unit}"),
        )
    }

    /// `field.Duplicate`.
    pub fn duplicate(field: impl Into<String>, value: Value) -> Self {
        Self::new(Kind::Duplicate, field, Some(value), "")
    }

    /// `field.NotSupported`: the value is not one of `supported`.
    pub fn not_supported(field: impl Into<String>, value: Value, supported: &[&str]) -> Self {
        let quoted: Vec<String> = supported.iter().map(|s| go_quote(s)).collect();
        Self::new(
            Kind::NotSupported,
            field,
            Some(value),
            format!("supported values: {}", quoted.join(", ")),
        )
    }

    fn new(
        kind: Kind,
        field: impl Into<String>,
        value: Option<Value>,
        detail: impl Into<String>,
    ) -> Self {
        Error {
            kind,
            field: field.into(),
            value,
            detail: detail.into(),
        }
    }

    /// `ErrorBody`: the error without its field (a `StatusCause.message`).
    pub fn body(&self) -> String {
        let mut s = self.kind.words().to_owned();
        let shows_value = !matches!(self.kind, Kind::Required | Kind::Forbidden | Kind::TooLong);
        if let (true, Some(value)) = (shows_value, &self.value) {
            s.push_str(": ");
            s.push_str(&value.0);
        }
        if !self.detail.is_empty() {
            s.push_str(": ");
            s.push_str(&self.detail);
        }
        s
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// `ErrorList.ToAggregate().Error()`: one error as it is, several as `[a, b]`, each
/// message once.
pub fn aggregate(errors: &[Error]) -> String {
    let mut seen: Vec<String> = Vec::new();
    for e in errors {
        let message = e.to_string();
        if !seen.contains(&message) {
            seen.push(message);
        }
    }
    match seen.len() {
        1 => seen.remove(0),
        _ => format!("[{}]", seen.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_read_as_upstreams() {
        let e = Error::invalid("metadata.name", Value::str("Not_Valid"), "a lowercase name");
        assert_eq!(
            e.to_string(),
            "metadata.name: Invalid value: \"Not_Valid\": a lowercase name"
        );
        assert_eq!(
            Error::required("spec.containers", "").to_string(),
            "spec.containers: Required value"
        );
        let e = Error::not_supported("dryRun", Value::strings(&["Sure"]), &["All"]);
        assert_eq!(
            e.body(),
            "Unsupported value: []string{\"Sure\"}: supported values: \"All\""
        );
        assert_eq!(e.kind.reason(), "FieldValueNotSupported");
        let d = Error::duplicate("spec.containers[1].name", Value::str("x"));
        assert_eq!(
            d.to_string(),
            "spec.containers[1].name: Duplicate value: \"x\""
        );
        assert_eq!(aggregate(&[d.clone(), d.clone()]), d.to_string());
        assert_eq!(
            aggregate(&[d, Error::forbidden("spec", "no")]),
            "[spec.containers[1].name: Duplicate value: \"x\", spec: Forbidden: no]"
        );
    }
}
