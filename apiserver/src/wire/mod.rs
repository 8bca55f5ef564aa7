//! Objects as kube-apiserver writes them: it decodes every request into Go structs and
//! encodes them back, so what a client reads is never just what it sent. Fields the Go
//! types do not have are gone; a zero value in a field tagged `omitempty` (`hostNetwork:
//! false`, `nodeName: ""`) is dropped; a field without the tag is always there, with its
//! zero value when unset (`lastProbeTime: null`, `restartCount: 0`, `nodeInfo` of empty
//! strings); times are rewritten in UTC at their precision (`Time` in seconds,
//! `MicroTime` in microseconds); quantities in their canonical form (`1000m` → `1`).
//!
//! [`schema`] holds the Go types of every served kind as data, read from the struct tags
//! of Kubernetes v1.36.2; [`encode`] applies them to a stored object.

pub mod schema;

use serde_json::{Map, Value};

use crate::quantity;
use crate::resources::{self, Resource};

/// How a Go type is encoded in JSON.
#[derive(Debug)]
pub enum Ty {
    /// `string` (and named string types).
    Str,
    /// Any integer type.
    Int,
    /// `float32`, `float64`.
    Float,
    /// `bool`.
    Bool,
    /// `[]byte`: a base64 string.
    Bytes,
    /// `metav1.Time`: RFC 3339 in seconds, `null` when zero.
    Time,
    /// `metav1.MicroTime`: RFC 3339 with six fractional digits, `null` when zero.
    MicroTime,
    /// `resource.Quantity`: its canonical string, `"0"` when zero.
    Quantity,
    /// `intstr.IntOrString`: a number or a string, `0` when zero.
    IntOrString,
    /// Raw JSON (`runtime.RawExtension`, `FieldsV1`): kept as it is.
    Raw,
    /// A pointer: `null` (or nothing with `omitempty`) when nil, else its target with
    /// zero values kept.
    Ptr(&'static Ty),
    /// A slice.
    Slice(&'static Ty),
    /// A map with string keys.
    Map(&'static Ty),
    /// A struct, by its fields.
    Struct(&'static [Field]),
}

/// How server-side apply and field ownership see a list (`+listType`, or the patch
/// strategy where the type has no marker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum List {
    /// Replaced and owned whole.
    Atomic,
    /// A set of scalars, each owned on its own.
    Set,
    /// Items identified by these key fields, each owned on its own.
    Map(&'static [&'static str]),
}

/// One field of a Go struct.
#[derive(Debug)]
pub struct Field {
    /// Its JSON name.
    pub name: &'static str,
    /// Its type.
    pub ty: Ty,
    /// `omitempty`: a zero scalar, an empty slice or map, or a nil pointer is left out.
    pub omitempty: bool,
    /// `omitzero`: a zero value of any type, structs included, is left out.
    pub omitzero: bool,
    /// `inline`: the struct's fields are the enclosing object's.
    pub inline: bool,
    /// For a slice: how its items are told apart.
    pub list: List,
    /// A map or struct owned whole (`+mapType=atomic`, `+structType=atomic`).
    pub atomic: bool,
}

impl Field {
    /// A field without options.
    pub const fn new(name: &'static str, ty: Ty) -> Self {
        Field {
            name,
            ty,
            omitempty: false,
            omitzero: false,
            inline: false,
            list: List::Atomic,
            atomic: false,
        }
    }

    /// A list of items with these key fields (`+listType=map`).
    pub const fn list_map(mut self, keys: &'static [&'static str]) -> Self {
        self.list = List::Map(keys);
        self
    }

    /// A set of scalars (`+listType=set`).
    pub const fn list_set(mut self) -> Self {
        self.list = List::Set;
        self
    }

    /// Owned whole (`+mapType=atomic`, `+structType=atomic`).
    pub const fn atomic(mut self) -> Self {
        self.atomic = true;
        self
    }

    /// With `omitempty`.
    pub const fn omitempty(mut self) -> Self {
        self.omitempty = true;
        self
    }

    /// With `omitzero`.
    pub const fn omitzero(mut self) -> Self {
        self.omitzero = true;
        self
    }

    /// With `inline`.
    pub const fn inline(mut self) -> Self {
        self.inline = true;
        self
    }
}

/// The Go type a resource's objects are stored as.
pub fn root(resource: &Resource) -> Option<&'static [Field]> {
    use schema::*;
    if resource.converted() {
        return Some(EVENTS_EVENT);
    }
    let id = resource.storage().id;
    let of = |r: &Resource| r.id == id;
    Some(if of(&resources::PODS) {
        CORE_POD
    } else if of(&resources::NODES) {
        CORE_NODE
    } else if of(&resources::NAMESPACES) {
        CORE_NAMESPACE
    } else if of(&resources::CONFIGMAPS) {
        CORE_CONFIG_MAP
    } else if of(&resources::SECRETS) {
        CORE_SECRET
    } else if of(&resources::SERVICEACCOUNTS) {
        CORE_SERVICE_ACCOUNT
    } else if of(&resources::SERVICES) {
        CORE_SERVICE
    } else if of(&resources::EVENTS) {
        CORE_EVENT
    } else if of(&resources::LEASES) {
        COORDINATION_LEASE
    } else if of(&resources::RUNTIMECLASSES) {
        NODE_RUNTIME_CLASS
    } else if of(&resources::CSIDRIVERS) {
        STORAGE_CSI_DRIVER
    } else if of(&resources::CSINODES) {
        STORAGE_CSI_NODE
    } else {
        return None;
    })
}

/// Rewrites `object` as kube-apiserver would store and send it (a resource without a
/// known Go type is left alone).
pub fn encode(resource: &Resource, object: &mut Value) {
    if let Some(fields) = root(resource) {
        encode_as(fields, object);
    }
}

/// The zero value of the Go struct `fields` as storage holds it: what a create is
/// compared with by the field manager.
pub fn zero(fields: &[Field]) -> Value {
    Value::Object(encode_struct(fields, None, Form::Stored))
}

/// Rewrites `object` as the Go struct `fields` would encode it once stored.
pub fn encode_as(fields: &[Field], object: &mut Value) {
    if let Value::Object(map) = object {
        *map = encode_struct(fields, Some(map), Form::Stored);
    }
}

/// Rewrites `object` as the Go struct `fields` holds it just decoded, before storage: an
/// empty list sent stays empty (storage makes it nil). The field manager compares this.
pub fn decoded_as(fields: &[Field], object: &mut Value) {
    if let Value::Object(map) = object {
        *map = encode_struct(fields, Some(map), Form::Decoded);
    }
}

/// Where the Go value is: just decoded from a request, or read back from storage.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Decoded,
    Stored,
}

fn encode_struct(
    fields: &[Field],
    object: Option<&Map<String, Value>>,
    form: Form,
) -> Map<String, Value> {
    let mut out = Map::new();
    for field in fields {
        match (&field.ty, field.inline) {
            (Ty::Struct(inner), true) => out.extend(encode_struct(inner, object, form)),
            _ => {
                let value = object.and_then(|o| o.get(field.name));
                if let Some(v) =
                    encode_value(&field.ty, value, field.omitempty, field.omitzero, form)
                {
                    out.insert(field.name.to_owned(), v);
                }
            }
        }
    }
    out
}

/// A scalar: its value, or the zero value when unset; `None` when `omit` drops it.
fn scalar(value: Option<&Value>, zero: Value, omit: bool) -> Option<Value> {
    let v = match value {
        None | Some(Value::Null) => zero.clone(),
        Some(v) => v.clone(),
    };
    let is_zero = match (&v, &zero) {
        (Value::Number(n), Value::Number(_)) => n.as_f64() == Some(0.0),
        _ => v == zero,
    };
    (!(omit && is_zero)).then_some(v)
}

fn encode_value(
    ty: &Ty,
    value: Option<&Value>,
    omitempty: bool,
    omitzero: bool,
    form: Form,
) -> Option<Value> {
    let unset = matches!(value, None | Some(Value::Null));
    let omit = omitempty || omitzero;
    match ty {
        Ty::Str => scalar(value, Value::from(""), omit),
        Ty::Int | Ty::Float => scalar(value, Value::from(0), omit),
        Ty::Bool => scalar(value, Value::from(false), omit),
        Ty::Bytes => match value {
            None | Some(Value::Null) => (!omit).then_some(Value::Null),
            Some(Value::String(s)) if s.is_empty() && omit => None,
            Some(v) => Some(v.clone()),
        },
        Ty::Time | Ty::MicroTime => match value.and_then(Value::as_str) {
            None | Some("") => (!omitzero).then_some(Value::Null),
            Some(s) => Some(Value::from(time(s, matches!(ty, Ty::MicroTime)))),
        },
        Ty::Quantity => Some(match value {
            None | Some(Value::Null) => Value::from("0"),
            Some(Value::String(s)) => {
                Value::from(quantity::canonical(s).unwrap_or_else(|| s.clone()))
            }
            Some(Value::Number(n)) => {
                let s = n.to_string();
                Value::from(quantity::canonical(&s).unwrap_or(s))
            }
            Some(v) => v.clone(),
        }),
        Ty::IntOrString => Some(value.filter(|_| !unset).cloned().unwrap_or(Value::from(0))),
        Ty::Raw => match value {
            None | Some(Value::Null) => (!omit).then_some(Value::Null),
            Some(v) => Some(v.clone()),
        },
        Ty::Ptr(inner) => match value {
            None | Some(Value::Null) => (!omit).then_some(Value::Null),
            Some(v) => {
                Some(encode_value(inner, Some(v), false, false, form).unwrap_or(Value::Null))
            }
        },
        // An empty slice or map comes back from storage (protobuf) as nil: `null`.
        Ty::Slice(item) => match value {
            None | Some(Value::Null) => (!omit).then_some(Value::Null),
            Some(Value::Array(items)) if items.is_empty() => match (omit, form) {
                (true, _) => None,
                (false, Form::Stored) => Some(Value::Null),
                (false, Form::Decoded) => Some(Value::Array(Vec::new())),
            },
            Some(Value::Array(items)) => Some(Value::Array(
                items
                    .iter()
                    .map(|v| encode_value(item, Some(v), false, false, form).unwrap_or(Value::Null))
                    .collect(),
            )),
            Some(v) => Some(v.clone()),
        },
        Ty::Map(item) => match value {
            None | Some(Value::Null) => (!omit).then_some(Value::Null),
            Some(Value::Object(map)) if map.is_empty() => match (omit, form) {
                (true, _) => None,
                (false, Form::Stored) => Some(Value::Null),
                (false, Form::Decoded) => Some(Value::Object(Map::new())),
            },
            Some(Value::Object(map)) => Some(Value::Object(
                map.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            encode_value(item, Some(v), false, false, form).unwrap_or(Value::Null),
                        )
                    })
                    .collect(),
            )),
            Some(v) => Some(v.clone()),
        },
        Ty::Struct(fields) => match value {
            None | Some(Value::Null) => {
                let zero = encode_struct(fields, None, form);
                (!omitzero).then_some(Value::Object(zero))
            }
            Some(Value::Object(map)) => Some(Value::Object(encode_struct(fields, Some(map), form))),
            Some(v) => Some(v.clone()),
        },
    }
}

/// A time as Go writes `metav1.Time` (seconds) or `metav1.MicroTime` (microseconds), in
/// UTC; a string that is not RFC 3339 is kept (the decoder refused it already).
fn time(s: &str, micro: bool) -> String {
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => {
            let t = t.with_timezone(&chrono::Utc);
            if micro {
                t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
            } else {
                t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
            }
        }
        Err(_) => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(v: Value) -> Value {
        let mut v = v;
        encode(&resources::PODS, &mut v);
        v
    }

    #[test]
    fn zero_values_appear_and_empty_ones_go() {
        let p = pod(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "labels": {}},
            "spec": {"hostNetwork": false, "nodeName": "", "automountServiceAccountToken": false,
                "containers": [{"name": "c", "image": "i", "resources": {"requests": {"cpu": "1000m"}}}],
                "unknownField": 1},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "c"}]}
        }));
        assert_eq!(p["spec"].get("hostNetwork"), None);
        assert_eq!(p["spec"].get("nodeName"), None);
        assert_eq!(p["spec"].get("unknownField"), None);
        assert_eq!(p["spec"]["automountServiceAccountToken"], false);
        assert_eq!(p["metadata"].get("labels"), None);
        assert_eq!(
            p["spec"]["containers"][0]["resources"]["requests"]["cpu"],
            "1"
        );
        let condition = &p["status"]["conditions"][0];
        assert_eq!(condition["lastProbeTime"], Value::Null);
        assert_eq!(condition["lastTransitionTime"], Value::Null);
        let status = &p["status"]["containerStatuses"][0];
        assert_eq!(status["restartCount"], 0);
        assert_eq!(status["ready"], false);
        assert_eq!(status["image"], "");
        assert_eq!(status["imageID"], "");
        assert_eq!(status["state"], json!({}));
        assert_eq!(status["lastState"], json!({}));
    }

    #[test]
    fn times_are_written_in_utc_at_their_precision() {
        let mut lease = json!({"spec": {"renewTime": "2026-01-01T01:00:00.1234567+01:00"},
            "metadata": {"creationTimestamp": "2026-01-01T00:00:00.5Z"}});
        encode(&resources::LEASES, &mut lease);
        assert_eq!(lease["spec"]["renewTime"], "2026-01-01T00:00:00.123456Z");
        assert_eq!(
            lease["metadata"]["creationTimestamp"],
            "2026-01-01T00:00:00Z"
        );
    }

    #[test]
    fn a_bare_node_gets_its_zero_status() {
        let mut node = json!({"metadata": {"name": "n"}});
        encode(&resources::NODES, &mut node);
        assert_eq!(
            node["status"]["daemonEndpoints"],
            json!({"kubeletEndpoint": {"Port": 0}})
        );
        assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "");
        assert_eq!(node["spec"], json!({}));
    }
}
