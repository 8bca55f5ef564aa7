//! The node-lifecycle rule of kube-controller-manager's node lifecycle controller: a node
//! whose Lease in `kube-node-lease` has not been renewed within the grace period (40 s
//! upstream) gets every condition set to `Unknown` (reason `NodeStatusUnknown`) and the
//! `node.kubernetes.io/unreachable:NoSchedule` taint; the taint goes when the Lease is fresh
//! again and the agent reports `Ready=True`.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::handlers::Context;
use crate::managed_fields::{self, Writer};
use crate::meta;
use crate::registry::Registry;
use crate::resources;
use crate::strategy::Part;

/// The taint key for a node the controller cannot hear from.
pub const UNREACHABLE_TAINT: &str = "node.kubernetes.io/unreachable";
const CONDITIONS: [&str; 4] = ["Ready", "MemoryPressure", "DiskPressure", "PIDPressure"];

/// Runs the rule every `grace / 8` (at most every second) until `stop` changes.
pub async fn run(ctx: Arc<Context>, grace: Duration, mut stop: tokio::sync::watch::Receiver<u64>) {
    let period = (grace / 8).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut tick = tokio::time::interval(period);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            _ = tick.tick() => check(&ctx.registry, grace, Utc::now()),
        }
    }
}

fn last_renewal(registry: &Registry, node: &Value) -> Option<DateTime<Utc>> {
    let name = meta::str_field(node, "name");
    registry
        .get(&resources::LEASES, "kube-node-lease", name)
        .ok()
        .and_then(|lease| {
            lease
                .value
                .pointer("/spec/renewTime")
                .and_then(Value::as_str)
                .and_then(meta::parse_time)
        })
        .or_else(|| meta::parse_time(meta::str_field(node, "creationTimestamp")))
}

fn has_taint(node: &Value) -> bool {
    node.pointer("/spec/taints")
        .and_then(Value::as_array)
        .is_some_and(|t| {
            t.iter()
                .any(|t| t["key"] == UNREACHABLE_TAINT && t["effect"] == "NoSchedule")
        })
}

fn ready(node: &Value) -> bool {
    node.pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        })
}

fn mark_unknown(node: &mut Value, now: &str) {
    if !node.get("status").is_some_and(Value::is_object) {
        node["status"] = json!({});
    }
    if !node["status"]
        .get("conditions")
        .is_some_and(Value::is_array)
    {
        node["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = node["status"]["conditions"].as_array_mut() else {
        return;
    };
    for kind in CONDITIONS {
        match conditions.iter_mut().find(|c| c["type"] == kind) {
            Some(c) if c["status"] != "Unknown" => {
                c["status"] = "Unknown".into();
                c["reason"] = "NodeStatusUnknown".into();
                c["message"] = "Kubelet stopped posting node status.".into();
                c["lastTransitionTime"] = now.into();
            }
            Some(_) => {}
            None => conditions.push(json!({
                "type": kind, "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                "message": "Kubelet never posted node status.",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            })),
        }
    }
}

/// One pass over all nodes at time `now`.
pub fn check(registry: &Registry, grace: Duration, now: DateTime<Utc>) {
    let nodes = registry.store.txn(|t| t.list(&resources::NODES, None));
    let grace = chrono::Duration::from_std(grace).unwrap_or(chrono::Duration::seconds(40));
    // The node lifecycle controller writes through the API: its fields are its own.
    let controller = Writer::named(managed_fields::CONTROLLERS);
    for node in nodes {
        let name = node.name().to_string();
        let stale = last_renewal(registry, &node.value).is_none_or(|t| now - t > grace);
        let stamp = meta::time(now);
        // Conflicts with a concurrent writer are retried on the next pass.
        if stale {
            let _ = registry.update_mode(
                &resources::NODES,
                "",
                &name,
                Part::Status,
                false,
                (false, &controller),
                |cur| {
                    let mut n = cur.cloned().unwrap_or_default();
                    mark_unknown(&mut n, &stamp);
                    Ok(n)
                },
            );
            if !has_taint(&node.value) {
                let _ = registry.update_mode(&resources::NODES, "", &name, Part::Main, false, (false, &controller), |cur| {
                    let mut n = cur.cloned().unwrap_or_default();
                    if !n.get("spec").is_some_and(Value::is_object) {
                        n["spec"] = json!({});
                    }
                    let taint = json!({"key": UNREACHABLE_TAINT, "effect": "NoSchedule", "timeAdded": stamp});
                    match n["spec"].get_mut("taints").and_then(Value::as_array_mut) {
                        Some(taints) => taints.push(taint),
                        None => n["spec"]["taints"] = json!([taint]),
                    }
                    Ok(n)
                });
            }
        } else if has_taint(&node.value) && ready(&node.value) {
            let _ = registry.update_mode(
                &resources::NODES,
                "",
                &name,
                Part::Main,
                false,
                (false, &controller),
                |cur| {
                    let mut n = cur.cloned().unwrap_or_default();
                    if let Some(taints) =
                        n.pointer_mut("/spec/taints").and_then(Value::as_array_mut)
                    {
                        taints.retain(|t| t["key"] != UNREACHABLE_TAINT);
                    }
                    Ok(n)
                },
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> Registry {
        let r = Registry::new(100, String::new(), crate::Version::NEWEST).unwrap();
        let node = json!({"metadata": {"name": "n1"}, "status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
        r.create(&resources::NODES, "", node).unwrap();
        r
    }

    #[test]
    fn stale_lease_marks_node_unknown_and_fresh_ready_clears_taint() {
        let r = setup();
        let later = Utc::now() + chrono::Duration::seconds(100);
        check(&r, Duration::from_secs(40), later);
        let node = r.get(&resources::NODES, "", "n1").unwrap();
        assert!(has_taint(&node.value));
        let conds = node.value["status"]["conditions"].as_array().unwrap();
        assert_eq!(conds.len(), 4);
        assert!(conds.iter().all(|c| c["status"] == "Unknown"));
        assert_eq!(conds[0]["reason"], "NodeStatusUnknown");

        let lease = json!({"metadata": {"name": "n1"}, "spec": {"renewTime": meta::time(later)}});
        r.create(&resources::LEASES, "kube-node-lease", lease)
            .unwrap();
        check(&r, Duration::from_secs(40), later);
        assert!(
            has_taint(&r.get(&resources::NODES, "", "n1").unwrap().value),
            "not Ready yet"
        );
        r.update(&resources::NODES, "", "n1", Part::Status, false, |cur| {
            let mut n = cur.cloned().unwrap();
            n["status"]["conditions"][0]["status"] = "True".into();
            Ok(n)
        })
        .unwrap();
        check(&r, Duration::from_secs(40), later);
        assert!(!has_taint(
            &r.get(&resources::NODES, "", "n1").unwrap().value
        ));
    }
}
