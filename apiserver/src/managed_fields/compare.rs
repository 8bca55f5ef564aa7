//! Walking an object with its Go type: the field set of a value (what an applier sets)
//! and what changed between two values (what an updater now owns), as structured-merge-
//! diff computes them: leaves and list items are paths; a map, list or struct that was
//! not there before is a path too. An atomic list, map or struct is one leaf.

use serde_json::{Map, Value};

use super::set::{Element, Set};
use crate::wire::{Field, List, Ty};

/// How the walk sees a value.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    Leaf,
    Struct(&'static [Field]),
    Map(&'static Ty),
    /// A keyed list: its item type, key fields, and whether items are atomic.
    Keyed(&'static Ty, &'static [&'static str], bool),
    Set,
}

fn deref(ty: &'static Ty) -> &'static Ty {
    match ty {
        Ty::Ptr(inner) => deref(inner),
        other => other,
    }
}

/// `atomic` is the field's marker: the map or struct is one leaf, or a keyed list's
/// items are.
pub(super) fn shape_of(ty: &'static Ty, list: List, atomic: bool) -> Shape {
    match (deref(ty), list) {
        (Ty::Slice(item), List::Map(keys)) => Shape::Keyed(item, keys, atomic),
        (Ty::Slice(_), List::Set) => Shape::Set,
        (_, _) if atomic => Shape::Leaf,
        (Ty::Struct(fields), _) => Shape::Struct(fields),
        (Ty::Map(item), _) => Shape::Map(item),
        _ => Shape::Leaf,
    }
}

/// The fields of a struct, inline ones flattened.
pub(super) fn fields_of(fields: &'static [Field], out: &mut Vec<&'static Field>) {
    for f in fields {
        match (&f.ty, f.inline) {
            (Ty::Struct(inner), true) => fields_of(inner, out),
            _ => out.push(f),
        }
    }
}

/// The children of a value: element, its value, its shape. Borrowed: the walk goes as
/// deep as the object, and a copy per level would copy every subtree once per ancestor.
fn children(shape: Shape, v: &Value) -> Vec<(Element, &Value, Shape)> {
    match shape {
        Shape::Leaf => vec![],
        Shape::Struct(fields) => {
            let Some(map) = v.as_object() else {
                return vec![];
            };
            let mut all = Vec::new();
            fields_of(fields, &mut all);
            all.into_iter()
                .filter_map(|f| {
                    let value = map.get(f.name)?;
                    Some((
                        Element::Field(f.name.to_owned()),
                        value,
                        shape_of(&f.ty, f.list, f.atomic),
                    ))
                })
                .collect()
        }
        Shape::Map(item) => v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| {
                (
                    Element::Field(k.clone()),
                    v,
                    shape_of(item, List::Atomic, false),
                )
            })
            .collect(),
        Shape::Keyed(item, keys, atomic) => v
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| {
                (
                    Element::Key(key_of(i, keys)),
                    i,
                    shape_of(item, List::Atomic, atomic),
                )
            })
            .collect(),
        Shape::Set => v
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| (Element::Value(i.to_string()), i, Shape::Leaf))
            .collect(),
    }
}

/// A keyed item's identity: its key fields as JSON, in name order.
pub fn key_of(item: &Value, keys: &[&str]) -> String {
    let mut fields: Vec<&str> = keys.to_vec();
    fields.sort_unstable();
    let map: Map<String, Value> = fields
        .into_iter()
        .filter_map(|k| Some((k.to_owned(), item.get(k)?.clone())))
        .collect();
    Value::Object(map).to_string()
}

/// What one write changed: paths added or modified, paths removed.
#[derive(Debug, Default)]
pub struct Changes {
    /// Added or modified (owned by the writer from now on).
    pub changed: Set,
    /// Removed (owned by nobody any more).
    pub removed: Set,
}

/// Compares two versions of an object of the Go type `fields`.
pub fn compare(fields: &'static [Field], old: &Value, new: &Value) -> Changes {
    let mut out = Changes::default();
    walk(
        Shape::Struct(fields),
        Some(old),
        Some(new),
        &mut out.changed,
        &mut out.removed,
    );
    out
}

/// Null, or an empty list or map.
fn empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(m) => m.is_empty(),
        _ => false,
    }
}

fn walk(
    shape: Shape,
    old: Option<&Value>,
    new: Option<&Value>,
    changed: &mut Set,
    removed: &mut Set,
) {
    // Lists and maps empty (or null) on both sides compare as leaves, which keeps null
    // and empty apart (`emptyPromoteToLeaf`).
    let both_empty = matches!(shape, Shape::Map(_) | Shape::Keyed(..) | Shape::Set)
        && old.is_some_and(empty)
        && new.is_some_and(empty);
    let leaf = matches!(shape, Shape::Leaf) || both_empty;
    match (old, new) {
        (None, None) => {}
        (None, Some(n)) => {
            changed.member = true;
            for (e, v, s) in children(shape, n) {
                walk(s, None, Some(v), changed.child(e), &mut Set::default());
            }
        }
        (Some(o), None) => {
            removed.member = true;
            for (e, v, s) in children(shape, o) {
                walk(s, Some(v), None, &mut Set::default(), removed.child(e));
            }
        }
        (Some(o), Some(n)) if leaf => {
            if o != n {
                changed.member = true;
            }
        }
        (Some(o), Some(n)) => {
            let before = children(shape, o);
            let after = children(shape, n);
            for (e, v, s) in &after {
                let was = before.iter().find(|(b, ..)| b == e).map(|(_, v, _)| *v);
                walk(
                    *s,
                    was,
                    Some(v),
                    changed.child(e.clone()),
                    removed.child(e.clone()),
                );
            }
            for (e, v, s) in &before {
                if !after.iter().any(|(a, ..)| a == e) {
                    walk(
                        *s,
                        Some(v),
                        None,
                        &mut Set::default(),
                        removed.child(e.clone()),
                    );
                }
            }
        }
    }
    changed.children.retain(|_, s| !s.is_empty());
    removed.children.retain(|_, s| !s.is_empty());
}

/// The field set of a value (`ToFieldSet`): its leaves and list items.
pub fn field_set(fields: &'static [Field], value: &Value) -> Set {
    let mut out = Set::default();
    fill(Shape::Struct(fields), value, &mut out, false);
    out
}

fn fill(shape: Shape, value: &Value, out: &mut Set, item: bool) {
    match shape {
        Shape::Leaf => out.member = true,
        _ => {
            out.member |= item;
            for (e, v, s) in children(shape, value) {
                let is_item = matches!(e, Element::Key(_) | Element::Value(_));
                fill(s, v, out.child(e), is_item);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::schema::{CORE_CONFIG_MAP, CORE_POD};
    use serde_json::json;

    #[test]
    fn a_created_pod_owns_what_upstream_says() {
        let empty = crate::wire::zero(CORE_POD);
        let mut pod = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["x/y"]},
            "spec": {"containers": [{"name": "c", "image": "busybox", "ports": [{"containerPort": 80, "protocol": "TCP"}]}],
                "dnsPolicy": "ClusterFirst"}});
        crate::wire::encode_as(CORE_POD, &mut pod);
        let changes = compare(CORE_POD, &empty, &pod);
        let v = changes.changed.to_fields_v1();
        assert_eq!(
            v["f:metadata"],
            json!({"f:finalizers": {".": {}, "v:\"x/y\"": {}}, "f:labels": {".": {}, "f:a": {}}})
        );
        let c = &v["f:spec"]["f:containers"]["k:{\"name\":\"c\"}"];
        assert_eq!(c["."], json!({}));
        assert_eq!(
            c["f:ports"]["k:{\"containerPort\":80,\"protocol\":\"TCP\"}"]["f:protocol"],
            json!({})
        );
        assert_eq!(c["f:resources"], json!({}));
        assert!(v["f:spec"].get(".").is_none() && v["f:spec"]["f:containers"].get(".").is_none());
        assert_eq!(v["f:spec"]["f:dnsPolicy"], json!({}));
    }

    #[test]
    fn changes_and_removals() {
        let old = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"k": "v"}});
        let new = json!({"metadata": {"labels": {"a": "3"}}, "data": {"k": "v", "j": "w"}});
        let c = compare(CORE_CONFIG_MAP, &old, &new);
        assert_eq!(
            c.changed.to_fields_v1(),
            json!({"f:data": {"f:j": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert_eq!(
            c.removed.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {"f:b": {}}}})
        );
        assert_eq!(
            field_set(CORE_CONFIG_MAP, &new).to_fields_v1(),
            json!({"f:data": {"f:j": {}, "f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
    }
}
