//! `metadata.managedFields`: who set which field, as kube-apiserver's field manager
//! records it for every write. An update (create, PUT, non-apply PATCH) gives its manager
//! the fields it added or changed and takes them from every other manager; removed fields
//! belong to nobody. Server-side apply makes the applier own exactly the fields of its
//! configuration: fields it applied before and no longer applies are removed unless
//! another manager owns them, and fields it would change that another manager owns are
//! conflicts (409) unless it forces them. [`set`] is the field-set type, [`compare`]
//! walks objects with their Go types ([`crate::wire`]).

mod apply;
pub mod compare;
pub mod merge;
pub mod set;

pub use apply::{Conflicts, apply};

use std::sync::{LazyLock, OnceLock};

use serde_json::{Value, json};

use crate::meta;
use crate::resources::{self, Resource};
use crate::wire;
use set::{Element, Set};

/// `Apply` or `Update` (or a write that bypasses the field manager).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Any other write.
    Update,
    /// A write the server makes to storage directly (a binding, an eviction's
    /// condition): no manager records it.
    Untracked,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update | Operation::Untracked => "Update",
        }
    }
}

/// Who writes: the manager name (`fieldManager`, else the client's User-Agent up to its
/// first `/`), the subresource written through (`status`), and whether the write is an
/// apply (whose ownership [`apply`] records, not [`update`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Writer {
    /// The manager name.
    pub manager: String,
    /// `Some("status")` for a status write.
    pub subresource: Option<String>,
    /// `Apply` for server-side apply.
    pub operation: Operation,
}

/// The manager of the double's own writes: what kube-controller-manager's controllers do
/// in a cluster (namespace content, node lifecycle).
pub const CONTROLLERS: &str = "kube-controller-manager";

impl Writer {
    /// A writer named `manager`, updating the main resource.
    pub fn named(manager: impl Into<String>) -> Self {
        Writer {
            manager: manager.into(),
            subresource: None,
            operation: Operation::Update,
        }
    }

    /// The same writer, through `subresource`.
    pub fn through(mut self, subresource: Option<&str>) -> Self {
        self.subresource = subresource.map(str::to_owned);
        self
    }

    /// The server itself writing to storage, past the field manager.
    pub fn storage() -> Self {
        Writer {
            operation: Operation::Untracked,
            ..Writer::named("")
        }
    }

    /// The same writer, applying.
    pub fn applying(mut self) -> Self {
        self.operation = Operation::Apply;
        self
    }

    /// The manager of a request: `fieldManager` if given, else the User-Agent's product
    /// (its printable characters, at most 128 bytes), else `unknown`.
    pub fn of_request(field_manager: Option<&str>, user_agent: &str) -> Self {
        let manager = match field_manager {
            Some(m) => m.to_owned(),
            None => {
                let mut out = String::new();
                for c in user_agent
                    .split('/')
                    .next()
                    .unwrap_or("")
                    .chars()
                    .filter(|c| !c.is_control())
                {
                    if out.len() + c.len_utf8() > 128 {
                        break;
                    }
                    out.push(c);
                }
                out
            }
        };
        Writer::named(if manager.is_empty() {
            "unknown".to_owned()
        } else {
            manager
        })
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The manager.
    pub manager: String,
    /// How it wrote.
    pub operation: Operation,
    /// The API version it wrote.
    pub api_version: String,
    /// When its fields last changed.
    pub time: String,
    /// The subresource it wrote through.
    pub subresource: Option<String>,
    /// Its fields.
    pub fields: Set,
}

impl Entry {
    fn same_owner(&self, manager: &str, operation: Operation, subresource: Option<&str>) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource.as_deref() == subresource
    }

    /// How a conflict names this entry (`"kubectl" using v1`).
    fn describe(&self) -> String {
        let mut s = crate::field::go_quote(&self.manager);
        if let Some(sub) = &self.subresource {
            s.push_str(&format!(
                " with subresource {}",
                crate::field::go_quote(sub)
            ));
        }
        if self.operation == Operation::Update {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// The entries of an object.
pub fn read(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            Some(Entry {
                manager: e.get("manager")?.as_str()?.to_owned(),
                operation: match e.get("operation")?.as_str()? {
                    "Apply" => Operation::Apply,
                    _ => Operation::Update,
                },
                api_version: e
                    .get("apiVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                time: e
                    .get("time")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
                subresource: e
                    .get("subresource")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                fields: Set::from_fields_v1(e.get("fieldsV1")?)?,
            })
        })
        .collect()
}

/// Stores `entries` as the object's `managedFields`, in upstream's order (Apply before
/// Update, then by time, manager, version, subresource), empty ones dropped.
pub fn write(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let m = meta::metadata_mut(obj);
    if entries.is_empty() {
        m.remove("managedFields");
        return;
    }
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut v = json!({"manager": e.manager, "operation": e.operation.as_str(),
                "apiVersion": e.api_version, "fieldsType": "FieldsV1",
                "fieldsV1": e.fields.to_fields_v1()});
            if !e.time.is_empty() {
                v["time"] = e.time.clone().into();
            }
            if let Some(sub) = &e.subresource {
                v["subresource"] = sub.clone().into();
            }
            v
        })
        .collect();
    m.insert("managedFields".into(), Value::Array(list));
}

fn field(name: &str) -> Element {
    Element::Field(name.to_owned())
}

/// Paths nobody owns: type and server-set metadata (`StripMetaManager`), and what the
/// written part resets (a main write resets the status, a status write the spec).
fn ignored(resource: &Resource, subresource: Option<&str>) -> Set {
    let mut out = Set::default();
    out.child(field("apiVersion")).member = true;
    out.child(field("kind")).member = true;
    let metadata = out.child(field("metadata"));
    metadata.member = true;
    for f in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "generation",
        "managedFields",
        "resourceVersion",
    ] {
        metadata.child(field(f)).member = true;
    }
    if resource.status_subresource {
        match subresource {
            Some("status") => {
                out.child(field("spec")).member = true;
                if std::ptr::eq(resources::ALL[resource.id], &resources::PODS) {
                    let m = out.child(field("metadata"));
                    m.child(field("deletionTimestamp")).member = true;
                    m.child(field("ownerReferences")).member = true;
                }
            }
            _ => out.child(field("status")).member = true,
        }
    }
    out
}

/// Removes from `set` every path at or below an ignored one.
fn without_ignored(mut set: Set, ignored: &Set) -> Set {
    // `metadata` itself is ignored, not what is below it.
    let mut subtrees = ignored.clone();
    subtrees.child(field("metadata")).member = false;
    set.subtract_subtrees(&subtrees);
    set.subtract(ignored);
    set
}

fn now() -> String {
    meta::now()
}

/// The zero object of `resource`'s Go type: what a create is compared with. Made once per
/// resource: every create of a kind compares with the same zero object.
fn empty(resource: &Resource) -> &'static Value {
    static ZEROS: LazyLock<Vec<OnceLock<Value>>> =
        LazyLock::new(|| resources::ALL.iter().map(|_| OnceLock::new()).collect());
    ZEROS[resource.id].get_or_init(|| {
        let v = wire::root(resource).map_or_else(|| json!({}), wire::zero);
        if resource.converted() {
            // The zero value in storage shape, for `changes` to convert like the others.
            return crate::events::to_core(v);
        }
        v
    })
}

/// What `old` → `new` changed, for `resource` (`new` and `old` as stored, their
/// `managedFields` left out).
fn changes(
    resource: &Resource,
    old: &Value,
    new: &Value,
    writer: &Writer,
) -> Option<compare::Changes> {
    let fields = wire::root(resource)?;
    // The live object as storage holds it, the new one as just decoded; both in the shape
    // of the API the writer used (events.k8s.io/v1 events are stored as core ones).
    let strip = |v: &Value, decoded: bool| {
        let mut v = if resource.converted() {
            crate::events::to_v1(v)
        } else {
            v.clone()
        };
        meta::metadata_mut(&mut v).remove("managedFields");
        if decoded {
            wire::decoded_as(fields, &mut v);
        } else {
            wire::encode_as(fields, &mut v);
        }
        v
    };
    let mut c = compare::compare(fields, &strip(old, false), &strip(new, true));
    let ignore = ignored(resource, writer.subresource.as_deref());
    c.changed = without_ignored(c.changed, &ignore);
    c.removed = without_ignored(c.removed, &ignore);
    Some(c)
}

/// Records an update by `writer`: `new` gets the managed fields `old` had, with what
/// changed now owned by the writer. `old` is `None` for a create. An apply's ownership
/// was recorded by [`apply`] already: `new` keeps it.
pub fn update(resource: &Resource, old: Option<&Value>, new: &mut Value, writer: &Writer) {
    match writer.operation {
        Operation::Apply => return,
        Operation::Untracked => {
            // Whatever the write carried, the stored ownership stays.
            match old.and_then(|o| o.pointer("/metadata/managedFields")) {
                Some(entries) => {
                    meta::metadata_mut(new).insert("managedFields".into(), entries.clone());
                }
                None => {
                    meta::metadata_mut(new).remove("managedFields");
                }
            }
            return;
        }
        Operation::Update => {}
    }
    let before = old.unwrap_or_else(|| empty(resource));
    // Objects nobody tracks stay untracked until someone applies (upstream's
    // `SkipNonAppliedManager`): an update of an object without managed fields records none.
    if old.is_some_and(|o| read(o).is_empty()) {
        meta::metadata_mut(new).remove("managedFields");
        return;
    }
    // A client that sends managedFields sets them (`[]` clears them); else they stay.
    // Through a subresource the stored ones always stay (`decodeLiveOrNew`).
    let mut entries = match new.pointer("/metadata/managedFields") {
        Some(Value::Array(_)) if old.is_some() && writer.subresource.is_none() => read(new),
        _ => old.map(read).unwrap_or_default(),
    };
    let Some(c) = changes(resource, before, new, writer) else {
        return;
    };
    let sub = writer.subresource.as_deref();
    for e in entries.iter_mut() {
        e.fields.subtract(&c.removed);
        if !e.same_owner(&writer.manager, Operation::Update, sub) {
            e.fields.subtract(&c.changed);
        }
    }
    if !c.changed.is_empty() {
        let api_version = resource.api_version();
        match entries
            .iter_mut()
            .find(|e| e.same_owner(&writer.manager, Operation::Update, sub))
        {
            Some(e) => {
                // The write changed the object: its manager's time is now.
                e.fields.union(&c.changed);
                e.time = now();
            }
            None => entries.push(Entry {
                manager: writer.manager.clone(),
                operation: Operation::Update,
                api_version,
                time: now(),
                subresource: writer.subresource.clone(),
                fields: c.changed,
            }),
        }
    }
    write(new, entries);
}

/// The entry a create through a subresource that stores nothing records on its answer
/// (a TokenRequest): what the request set, owned by `writer`.
pub fn record_created(
    fields: &'static [wire::Field],
    api_version: &str,
    object: &mut Value,
    writer: &Writer,
) {
    let zero = wire::zero(fields);
    let mut decoded = object.clone();
    wire::decoded_as(fields, &mut decoded);
    let mut ignore = Set::default();
    ignore.child(field("apiVersion")).member = true;
    ignore.child(field("kind")).member = true;
    ignore.child(field("metadata")).member = true;
    ignore.child(field("status")).member = true;
    let mut changed = compare::compare(fields, &zero, &decoded).changed;
    changed.subtract_subtrees(&ignore);
    write(
        object,
        vec![Entry {
            manager: writer.manager.clone(),
            operation: Operation::Update,
            api_version: api_version.to_owned(),
            time: now(),
            subresource: writer.subresource.clone(),
            fields: changed,
        }],
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::CONFIGMAPS;

    #[test]
    fn updates_move_ownership() {
        let mut created = json!({"metadata": {"name": "a"}, "data": {"k": "v", "j": "w"}});
        update(&CONFIGMAPS, None, &mut created, &Writer::named("curl"));
        let mut patched = created.clone();
        patched["data"]["k"] = "v2".into();
        update(
            &CONFIGMAPS,
            Some(&created),
            &mut patched,
            &Writer::named("kubectl"),
        );
        let entries = read(&patched);
        assert_eq!(entries.len(), 2);
        let fields: Vec<Value> = entries.iter().map(|e| e.fields.to_fields_v1()).collect();
        assert!(
            fields.contains(&json!({"f:data": {".": {}, "f:j": {}}})),
            "{fields:?}"
        );
        assert!(
            fields.contains(&json!({"f:data": {"f:k": {}}})),
            "{fields:?}"
        );
    }

    #[test]
    fn apply_conflicts_and_prunes() {
        let fid = Writer::named("fid").applying();
        let mut live = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        update(&CONFIGMAPS, None, &mut live, &Writer::named("kubectl"));
        let config = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "mine"}});
        let mut merged = live.clone();
        merged["data"]["k"] = "mine".into();
        let conflicts = apply(
            &CONFIGMAPS,
            Some(&live),
            &config,
            merged.clone(),
            &fid,
            false,
        )
        .unwrap_err();
        assert_eq!(
            conflicts,
            [("\"kubectl\" using v1".to_owned(), ".data.k".to_owned())]
        );
        let owned = apply(&CONFIGMAPS, Some(&live), &config, merged, &fid, true).unwrap();
        // Re-applied without the label it set before: the label goes.
        let first = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "labels": {"x": "1"}}});
        let mut merged = owned.clone();
        merged["metadata"]["labels"] = json!({"x": "1"});
        let labelled = apply(&CONFIGMAPS, Some(&owned), &first, merged, &fid, false).unwrap();
        let second = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "mine"}});
        let after = apply(
            &CONFIGMAPS,
            Some(&labelled),
            &second,
            labelled.clone(),
            &fid,
            false,
        )
        .unwrap();
        assert!(
            after["metadata"]
                .get("labels")
                .is_none_or(|l| l.get("x").is_none()),
            "{after}"
        );
    }
}
