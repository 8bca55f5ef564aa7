//! Field validation (`fieldValidation=Strict|Warn|Ignore`, upstream's default `Warn`):
//! unknown fields are found by decoding the body into the k8s-openapi type of its kind and
//! comparing what survives the round trip with what was sent. `Strict` refuses the write
//! (400 `strict decoding error: unknown field "…"`), `Warn` answers with `Warning` headers.
//! Accepted or not, unknown fields are not stored: the Go encoding drops them
//! ([`crate::wire`]).
//!
//! The same decoding finds values of the wrong type — a boolean where a string belongs, a
//! time that is not RFC 3339 — which kube-apiserver's decoder refuses whatever the directive:
//! 400 `Pod in version "v1" cannot be handled as a Pod: …`, naming the field. Missing
//! required fields are not decoding errors upstream (validation reports them), so they are
//! left to the other checks here too.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{
    ConfigMap, Event, Namespace, Node, Pod, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::api::node::v1::RuntimeClass;
use k8s_openapi::api::storage::v1::{CSIDriver, CSINode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::resources::Resource;
use crate::status::{Error, Result};

/// `ValidateDryRun`: no value, or `All` alone (a dry run); anything else is the field
/// error every options kind reports.
pub fn dry_run<S: AsRef<str>>(values: &[S]) -> std::result::Result<bool, crate::field::Error> {
    match values {
        [] => Ok(false),
        [all] if all.as_ref() == "All" => Ok(true),
        other => Err(crate::field::Error::not_supported(
            "dryRun",
            crate::field::Value::strings(other),
            &["All"],
        )),
    }
}

/// The `fieldValidation` directive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Directive {
    /// Unknown fields are accepted silently.
    Ignore,
    /// Unknown fields are reported in `Warning` headers (the default).
    Warn,
    /// Unknown fields fail the request.
    Strict,
}

impl Directive {
    /// Parses the query parameter; anything but the three values (or empty) is a 422 of
    /// the request's `options` kind.
    pub fn parse(v: Option<&str>, options: &'static str) -> Result<Self> {
        match v {
            None | Some("" | "Warn") => Ok(Directive::Warn),
            Some("Ignore") => Ok(Directive::Ignore),
            Some("Strict") => Ok(Directive::Strict),
            Some(other) => Err(Error::invalid_options(
                options,
                crate::field::Error::not_supported(
                    "fieldValidation",
                    crate::field::Value::str(other),
                    &["", "Ignore", "Strict", "Warn"],
                ),
            )),
        }
    }
}

/// The object as its k8s-openapi type sees it, or why it does not decode (`field: problem`).
fn round_trip<T: DeserializeOwned + Serialize>(obj: &Value) -> Option<Result<Value, String>> {
    let typed: Result<T, _> = serde_path_to_error::deserialize(obj);
    Some(match typed {
        Ok(typed) => serde_json::to_value(typed).map_err(|e| e.to_string()),
        Err(e) if e.path().to_string() == "." => Err(e.inner().to_string()),
        Err(e) => Err(format!("{}: {}", e.path(), e.inner())),
    })
}

fn typed(resource: &Resource, obj: &Value) -> Option<Result<Value, String>> {
    match (resource.group, resource.plural) {
        ("", "namespaces") => round_trip::<Namespace>(obj),
        ("", "pods") => round_trip::<Pod>(obj),
        ("", "nodes") => round_trip::<Node>(obj),
        ("", "events") => round_trip::<Event>(obj),
        ("", "configmaps") => round_trip::<ConfigMap>(obj),
        ("", "secrets") => round_trip::<Secret>(obj),
        ("", "serviceaccounts") => round_trip::<ServiceAccount>(obj),
        ("", "services") => round_trip::<Service>(obj),
        ("events.k8s.io", "events") => round_trip::<EventV1>(obj),
        ("coordination.k8s.io", "leases") => round_trip::<Lease>(obj),
        ("node.k8s.io", "runtimeclasses") => round_trip::<RuntimeClass>(obj),
        ("storage.k8s.io", "csidrivers") => round_trip::<CSIDriver>(obj),
        ("storage.k8s.io", "csinodes") => round_trip::<CSINode>(obj),
        _ => None,
    }
}

fn diff(sent: &Value, kept: &Value, path: &str, out: &mut Vec<String>) {
    match (sent, kept) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a.iter().filter(|(_, v)| !v.is_null()) {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match b.get(k) {
                    Some(kv) => diff(v, kv, &p, out),
                    None => out.push(p),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            for (i, (v, kv)) in a.iter().zip(b).enumerate() {
                diff(v, kv, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// The unknown fields of a full object body, as `spec.containers[0].foo` paths. A body that
/// does not decode as its kind at all is left to the other validation.
pub fn unknown_fields(resource: &Resource, obj: &Value) -> Vec<String> {
    match typed(resource, obj) {
        Some(Ok(kept)) => unknown_in(obj, &kept),
        _ => Vec::new(),
    }
}

/// What was sent and did not survive the round trip through the typed object.
fn unknown_in(sent: &Value, kept: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff(sent, kept, "", &mut out);
    out
}

fn strict_error(resource: &Resource, problems: &[String]) -> Error {
    Error::bad_request(format!(
        "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
        problems.join(", "),
        kind = resource.kind,
        version = resource.version,
    ))
}

/// With `Strict`, a JSON body that repeats a key is refused (`duplicate field
/// "metadata.name"`); the other directives let the last value win, as Go's decoder does.
pub fn check_duplicates(resource: &Resource, body: &[u8], directive: Directive) -> Result<()> {
    if directive != Directive::Strict {
        return Ok(());
    }
    let found = std::cell::RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    // A body that is not JSON is the decoder's to report.
    let _ = serde::de::DeserializeSeed::deserialize(
        Duplicates {
            path: String::new(),
            found: &found,
        },
        &mut de,
    );
    let found = found.into_inner();
    if found.is_empty() {
        return Ok(());
    }
    let list: Vec<String> = found
        .iter()
        .map(|f| format!("duplicate field \"{f}\""))
        .collect();
    Err(strict_error(resource, &list))
}

/// Walks a JSON document and records the paths of keys that appear twice in one object.
struct Duplicates<'a> {
    path: String,
    found: &'a std::cell::RefCell<Vec<String>>,
}

impl Duplicates<'_> {
    fn child(&self, segment: &str) -> Self {
        let path = match (self.path.is_empty(), segment.starts_with('[')) {
            (true, _) | (_, true) => format!("{}{segment}", self.path),
            _ => format!("{}.{segment}", self.path),
        };
        Duplicates {
            path,
            found: self.found,
        }
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Duplicates<'_> {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Duplicates<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<(), A::Error> {
        let mut seen = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                self.found.borrow_mut().push(self.child(&key).path);
            }
            map.next_value_seed(self.child(&key))?;
        }
        Ok(())
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> std::result::Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(self.child(&format!("[{i}]")))?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    fn visit_bool<E>(self, _: bool) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> std::result::Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> std::result::Result<(), E> {
        Ok(())
    }
}

/// Refuses values of the wrong type as kube-apiserver's decoder does, then applies the
/// directive: `Err` for `Strict` with unknown fields, else the warnings to send.
pub fn check(resource: &Resource, obj: &Value, directive: Directive) -> Result<Vec<String>> {
    let kept = match typed(resource, obj) {
        Some(Ok(kept)) => kept,
        // Missing required fields are validation's to report, not the decoder's.
        Some(Err(problem)) if !problem.contains("missing field") => {
            return Err(Error::bad_request(format!(
                "{kind} in version \"{version}\" cannot be handled as a {kind}: {problem}",
                kind = resource.kind,
                version = resource.version,
            )));
        }
        Some(Err(_)) | None => return Ok(Vec::new()),
    };
    if directive == Directive::Ignore {
        return Ok(Vec::new());
    }
    let unknown = unknown_in(obj, &kept);
    if directive == Directive::Strict && !unknown.is_empty() {
        let list: Vec<String> = unknown
            .iter()
            .map(|f| format!("unknown field \"{f}\""))
            .collect();
        return Err(strict_error(resource, &list));
    }
    Ok(unknown
        .into_iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, LEASES, PODS};
    use serde_json::json;

    #[test]
    fn finds_unknown_fields_at_any_depth() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "creationTimestamp": null},
            "spec": {"containers": [{"name": "c", "image": "i", "imagePullPolcy": "Always"}], "nodeNme": "n"},
            "status": {}});
        assert_eq!(
            unknown_fields(&PODS, &pod),
            ["spec.containers[0].imagePullPolcy", "spec.nodeNme"]
        );
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "b"}, "binaryData": {}});
        assert!(unknown_fields(&CONFIGMAPS, &cm).is_empty());
    }

    #[test]
    fn values_of_the_wrong_type_are_refused_whatever_the_directive() {
        let pod = json!({"metadata": {"name": "p"}, "spec": {"containers": [
            {"name": "c", "image": "i", "env": [{"name": false}]}]}});
        let err = check(&PODS, &pod, Directive::Ignore).unwrap_err();
        assert_eq!(err.code(), 400);
        let message = err.to_string();
        assert!(
            message.starts_with("Pod in version \"v1\" cannot be handled as a Pod: ")
                && message.contains("spec.containers[0].env[0].name"),
            "{message}"
        );
        let lease = json!({"metadata": {"name": "n"}, "spec": {"renewTime": "yesterday"}});
        let err = check(&LEASES, &lease, Directive::Warn).unwrap_err();
        assert!(err.to_string().contains("spec.renewTime"), "{err}");
        // A missing required field is validation's to report, not the decoder's.
        let bare = json!({"metadata": {"name": "p"}, "spec": {}});
        assert!(check(&PODS, &bare, Directive::Warn).is_ok());
    }

    #[test]
    fn directives() {
        let cm = json!({"metadata": {"name": "c"}, "dta": {}});
        assert_eq!(
            check(&CONFIGMAPS, &cm, Directive::Strict)
                .unwrap_err()
                .code(),
            400
        );
        assert_eq!(
            check(&CONFIGMAPS, &cm, Directive::Warn).unwrap(),
            ["unknown field \"dta\""]
        );
        assert!(
            check(&CONFIGMAPS, &cm, Directive::Ignore)
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            Directive::parse(Some("Loose"), "CreateOptions")
                .unwrap_err()
                .code(),
            422
        );
    }
}
