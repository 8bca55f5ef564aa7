//! Server-side apply's merge of a configuration into the live object, as
//! structured-merge-diff merges typed values: scalars, atomic lists and atomic maps or
//! structs are replaced; structs and maps are merged field by field; the items of a keyed
//! list or a set are merged by identity, live items the configuration does not name keep
//! their places and the configuration's order is kept among the items it names.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::compare::{Shape, fields_of, key_of, shape_of};
use crate::resources::Resource;
use crate::wire::{self, List};

/// `config` merged into `live`, by the Go type of `resource`'s objects; `None` when the
/// double has no type for it.
pub fn merge(resource: &Resource, live: &Value, config: &Value) -> Option<Value> {
    let fields = wire::root(resource)?;
    Some(merge_as(Shape::Struct(fields), live, config))
}

fn merge_as(shape: Shape, live: &Value, config: &Value) -> Value {
    match (shape, live, config) {
        (Shape::Struct(fields), Value::Object(l), Value::Object(c)) => {
            let mut all = Vec::new();
            fields_of(fields, &mut all);
            let mut out = l.clone();
            for (name, value) in c {
                let merged = match (all.iter().find(|f| f.name == name), l.get(name)) {
                    (Some(f), Some(before)) => {
                        merge_as(shape_of(&f.ty, f.list, f.atomic), before, value)
                    }
                    _ => value.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Shape::Map(item), Value::Object(l), Value::Object(c)) => {
            let mut out = l.clone();
            for (name, value) in c {
                let merged = match l.get(name) {
                    Some(before) => merge_as(shape_of(item, List::Atomic, false), before, value),
                    None => value.clone(),
                };
                out.insert(name.clone(), merged);
            }
            Value::Object(out)
        }
        (Shape::Keyed(item, keys, atomic), Value::Array(l), Value::Array(c)) => {
            let identity = |v: &Value| key_of(v, keys);
            let item_shape = shape_of(item, List::Atomic, atomic);
            Value::Array(merge_items(l, c, identity, |l, c| {
                merge_as(item_shape, l, c)
            }))
        }
        (Shape::Set, Value::Array(l), Value::Array(c)) => {
            Value::Array(merge_items(l, c, Value::to_string, |_, c| c.clone()))
        }
        _ => config.clone(),
    }
}

/// structured-merge-diff's `visitListItems`: walks both lists at once; a live item the
/// configuration does not name is kept where it is, the configuration's items come in its
/// order (merged with the live item of the same identity), and a live item the
/// configuration names waits for its turn in the configuration's order.
fn merge_items(
    live: &[Value],
    config: &[Value],
    identity: impl Fn(&Value) -> String,
    merge: impl Fn(&Value, &Value) -> Value,
) -> Vec<Value> {
    let live_ids: Vec<String> = live.iter().map(&identity).collect();
    let config_ids: Vec<String> = config.iter().map(&identity).collect();
    let live_at: HashMap<&str, usize> = live_ids
        .iter()
        .enumerate()
        .map(|(i, id)| (id.as_str(), i))
        .collect();
    let in_config: HashSet<&str> = config_ids.iter().map(String::as_str).collect();
    let mut shared = config_ids
        .iter()
        .filter(|id| live_at.contains_key(id.as_str()));
    let mut next_shared = shared.next();
    let mut merged: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(live.len() + config.len());
    let (mut l, mut c) = (0, 0);
    while l < live.len() || c < config.len() {
        if l < live.len() && c < config.len() {
            if live_ids[l] == config_ids[c] {
                merged.insert(&config_ids[c]);
                out.push(merge(&live[l], &config[c]));
                (l, c) = (l + 1, c + 1);
                next_shared = shared.next();
                continue;
            }
            let wanted_later = next_shared.is_some_and(|n| *n != live_ids[l]);
            if in_config.contains(live_ids[l].as_str()) && wanted_later {
                l += 1;
                continue;
            }
        }
        if l < live.len() {
            if !in_config.contains(live_ids[l].as_str()) {
                out.push(live[l].clone());
                l += 1;
                continue;
            }
            if merged.contains(live_ids[l].as_str()) {
                l += 1;
                continue;
            }
        }
        if c < config.len() {
            let id = config_ids[c].as_str();
            merged.insert(id);
            out.push(match live_at.get(id) {
                Some(&i) => merge(&live[i], &config[c]),
                None => config[c].clone(),
            });
            c += 1;
            if next_shared.is_some_and(|n| n == id) {
                next_shared = shared.next();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::PODS;
    use serde_json::json;

    fn conditions(pod: &Value) -> Vec<&str> {
        pod["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].as_str().unwrap())
            .collect()
    }

    #[test]
    fn live_items_keep_their_places_and_new_ones_follow() {
        let live = json!({"status": {"conditions": [{"type": "Gate", "status": "False"}]}});
        let config = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let out = merge(&PODS, &live, &config).unwrap();
        assert_eq!(conditions(&out), ["Gate", "Ready"]);
    }

    #[test]
    fn named_items_come_in_the_configurations_order_and_merge() {
        let live = json!({"status": {"conditions": [
            {"type": "A", "status": "True", "reason": "r"},
            {"type": "X", "status": "True"},
            {"type": "B", "status": "True"},
        ]}});
        let config = json!({"status": {"conditions": [
            {"type": "B", "status": "False"}, {"type": "A", "status": "False"},
        ]}});
        let out = merge(&PODS, &live, &config).unwrap();
        assert_eq!(conditions(&out), ["X", "B", "A"]);
        assert_eq!(
            out["status"]["conditions"][2]["reason"], "r",
            "merged, not replaced"
        );
        assert_eq!(out["status"]["conditions"][2]["status"], "False");
    }

    #[test]
    fn atomic_lists_are_replaced_and_structs_merged() {
        let live = json!({"spec": {"tolerations": [{"key": "a"}], "nodeName": "n"}});
        let config = json!({"spec": {"tolerations": [{"key": "b"}]}});
        let out = merge(&PODS, &live, &config).unwrap();
        assert_eq!(out["spec"]["tolerations"], json!([{"key": "b"}]));
        assert_eq!(out["spec"]["nodeName"], "n");
    }
}
