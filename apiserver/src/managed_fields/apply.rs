//! Server-side apply's ownership: what the applier owns after the apply, what it gives up
//! and nobody else holds (removed from the object), and the conflicts with other managers.

use serde_json::Value;

use super::set::{self, Element, Set};
use super::{
    Entry, Operation, Writer, changes, compare, empty, ignored, now, read, without_ignored, write,
};
use crate::resources::Resource;
use crate::wire;

/// Conflicts of an apply: (the other entry's description, the path).
pub type Conflicts = Vec<(String, String)>;

/// Server-side apply of `config` by `writer` (through its subresource) onto `live`
/// (`None`: created by the apply), `merged` being live and config merged. Removes what the
/// manager no longer applies (unless another manager owns it), refuses to change another
/// manager's fields unless `force`, and records the ownership. Returns the object to store.
pub fn apply(
    resource: &Resource,
    live: Option<&Value>,
    config: &Value,
    mut merged: Value,
    writer: &Writer,
    force: bool,
) -> Result<Value, Conflicts> {
    let Some(fields) = wire::root(resource) else {
        return Ok(merged);
    };
    let live_value = live.unwrap_or_else(|| empty(resource));
    let mut entries = read(live_value);
    let (manager, sub) = (writer.manager.as_str(), writer.subresource.as_deref());
    let ignore = ignored(resource, sub);
    // The configuration owns what it sets, as sent: not the zero values its Go type would
    // add (`lastProbeTime: null` of a condition it applies).
    let applied = without_ignored(compare::field_set(fields, config), &ignore);
    let previous = entries
        .iter()
        .find(|e| e.same_owner(manager, Operation::Apply, sub))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    // What this manager gives up and nobody else holds goes away.
    let mut dropped = previous.clone();
    dropped.subtract(&applied);
    for e in entries
        .iter()
        .filter(|e| !e.same_owner(manager, Operation::Apply, sub))
    {
        dropped.subtract(&e.fields);
    }
    prune(&mut merged, &dropped);
    let Some(c) = changes(resource, live_value, &merged, writer) else {
        return Ok(merged);
    };
    let mut conflicts = Vec::new();
    for e in entries
        .iter()
        .filter(|e| !e.same_owner(manager, Operation::Apply, sub))
    {
        let clash = e.fields.intersection(&c.changed);
        for path in clash.paths() {
            conflicts.push((e.describe(), set::path_string(&path)));
        }
    }
    if !conflicts.is_empty() && !force {
        return Err(conflicts);
    }
    for e in entries.iter_mut() {
        e.fields.subtract(&c.removed);
        if !e.same_owner(manager, Operation::Apply, sub) {
            e.fields.subtract(&c.changed);
        }
    }
    let api_version = resource.api_version();
    // Only an apply that changed the object stamps a time (a new entry of one that
    // changed nothing has none).
    let changed = !c.changed.is_empty() || !c.removed.is_empty();
    let stamp = if changed { now() } else { String::new() };
    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, Operation::Apply, sub))
    {
        Some(e) => {
            e.fields = applied;
            if changed {
                e.time = stamp;
            }
        }
        None => entries.push(Entry {
            manager: manager.to_owned(),
            operation: Operation::Apply,
            api_version,
            time: stamp,
            subresource: writer.subresource.clone(),
            fields: applied,
        }),
    }
    write(&mut merged, entries);
    Ok(merged)
}

/// Removes the paths of `dropped` from `value`.
fn prune(value: &mut Value, dropped: &Set) {
    for path in dropped.paths() {
        remove_path(value, &path);
    }
}

fn remove_path(value: &mut Value, path: &[Element]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut at = value;
    for e in parents {
        let next = match (e, at) {
            (Element::Field(f), Value::Object(map)) => map.get_mut(f),
            (Element::Key(k), Value::Array(items)) => items.iter_mut().find(|i| key_matches(i, k)),
            _ => None,
        };
        match next {
            Some(v) => at = v,
            None => return,
        }
    }
    match (last, at) {
        (Element::Field(f), Value::Object(map)) => {
            map.remove(f);
        }
        (Element::Key(k), Value::Array(items)) => items.retain(|i| !key_matches(i, k)),
        (Element::Value(v), Value::Array(items)) => {
            let wanted: Option<Value> = serde_json::from_str(v).ok();
            items.retain(|i| Some(i) != wanted.as_ref());
        }
        _ => {}
    }
}

fn key_matches(item: &Value, key: &str) -> bool {
    let Ok(Value::Object(wanted)) = serde_json::from_str::<Value>(key) else {
        return false;
    };
    wanted.iter().all(|(k, v)| item.get(k) == Some(v))
}
