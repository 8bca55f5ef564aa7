//! A minimal scheduler for a one-node cluster (`nodeconform up`): every pod without
//! `spec.nodeName` is bound to one node through [`crate::binding`], as kube-scheduler binds
//! with `POST pods/{name}/binding`, and gets kube-scheduler's `Scheduled` event
//! (`Successfully assigned <ns>/<pod> to <node>`). Off unless
//! [`crate::Builder::bind_unscheduled_pods_to`] names the node.
//!
//! What it leaves to a real scheduler: a pod waits while the node does not exist or is
//! cordoned (`spec.unschedulable`), and pods with scheduling gates or another
//! `schedulerName` are left alone; taints, affinity, resources and ports are not looked at.

use std::sync::Arc;

use chrono::Utc;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::binding;
use crate::handlers::Context;
use crate::meta;
use crate::registry::Registry;
use crate::resources;
use crate::store::{Object, WatchStart};

/// kube-scheduler's name, in `spec.schedulerName` (its default) and in its events.
pub const SCHEDULER_NAME: &str = "default-scheduler";

/// Binds unscheduled pods to `node` now, and again on every pod or node change, until `stop`
/// changes.
pub async fn run(ctx: Arc<Context>, node: String, mut stop: tokio::sync::watch::Receiver<u64>) {
    let registry = &ctx.registry;
    let Ok(subscription) = registry
        .store
        .watch(&resources::PODS, WatchStart::After(u64::MAX))
    else {
        return tracing::error!("the scheduler cannot watch pods");
    };
    let mut live = subscription.live;
    schedule(registry, &node);
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            event = live.recv() => match event {
                Ok(e) if e.resource != resources::PODS.id && e.resource != resources::NODES.id => {}
                Ok(_) | Err(RecvError::Lagged(_)) => {
                    schedule(registry, &node);
                }
                Err(RecvError::Closed) => return,
            },
        }
    }
}

/// Whether the scheduler should bind `pod`.
fn unscheduled(pod: &Value) -> bool {
    let scheduler = meta::path_string(pod, "spec.schedulerName");
    meta::path_string(pod, "spec.nodeName").is_empty()
        && meta::str_field(pod, "deletionTimestamp").is_empty()
        && (scheduler.is_empty() || scheduler == SCHEDULER_NAME)
        && pod
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
        && !matches!(
            meta::path_string(pod, "status.phase").as_str(),
            "Succeeded" | "Failed"
        )
}

/// One pass: binds every unscheduled pod to `node` if the node exists and is schedulable.
/// Returns the pods it bound.
pub fn schedule(registry: &Registry, node: &str) -> Vec<Arc<Object>> {
    let (pods, target) = registry.store.txn(|t| {
        (
            t.list(&resources::PODS, None),
            t.get(&resources::NODES, "", node),
        )
    });
    let Some(target) = target else {
        return Vec::new();
    };
    if target
        .value
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false)
    {
        return Vec::new();
    }
    let mut bound = Vec::new();
    for pod in pods.iter().filter(|p| unscheduled(&p.value)) {
        let request = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": pod.name(), "namespace": pod.namespace(),
                "uid": meta::str_field(&pod.value, "uid")},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        // A pod changed or deleted since the list is picked up by the next pass.
        match binding::bind(registry, pod.namespace(), &request, false) {
            Ok(pod) => {
                record_scheduled(registry, &pod, node);
                bound.push(pod);
            }
            Err(e) => tracing::debug!(pod = %pod.name(), error = %e, "not bound"),
        }
    }
    bound
}

/// kube-scheduler's `Scheduled` event, written as its events.k8s.io/v1 recorder writes it
/// (seen through core/v1: `eventTime`, `action`, `reportingComponent`, no timestamps).
fn record_scheduled(registry: &Registry, pod: &Object, node: &str) {
    let now = Utc::now();
    let (namespace, name) = (pod.namespace(), pod.name());
    let event = json!({
        "metadata": {"name": format!("{name}.{:x}", now.timestamp_nanos_opt().unwrap_or_default())},
        "involvedObject": {
            "apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": name,
            "uid": meta::str_field(&pod.value, "uid"), "resourceVersion": pod.rv.to_string(),
        },
        "reason": "Scheduled",
        "message": format!("Successfully assigned {namespace}/{name} to {node}"),
        "type": "Normal",
        "action": "Binding",
        "eventTime": now.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string(),
        "reportingComponent": SCHEDULER_NAME,
        "reportingInstance": format!("{SCHEDULER_NAME}-nodeconform"),
        "source": {},
    });
    if let Err(e) = registry.create(&resources::EVENTS, namespace, event) {
        tracing::debug!(pod = %name, error = %e, "Scheduled event not recorded");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> Registry {
        let r = Registry::new(100, String::new(), crate::Version::NEWEST).unwrap();
        for (name, node) in [("free", None), ("bound", Some("other"))] {
            let mut pod = json!({"metadata": {"name": name},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
            if let Some(node) = node {
                pod["spec"]["nodeName"] = node.into();
            }
            r.create(&resources::PODS, "default", pod).unwrap();
        }
        r
    }

    #[test]
    fn binds_only_unscheduled_pods_once_the_node_exists() {
        let r = registry();
        assert!(schedule(&r, "n1").is_empty(), "no node yet");
        r.create(&resources::NODES, "", json!({"metadata": {"name": "n1"}}))
            .unwrap();
        let bound = schedule(&r, "n1");
        assert_eq!(bound.len(), 1);
        assert_eq!(bound[0].name(), "free");
        assert_eq!(bound[0].value["spec"]["nodeName"], "n1");
        let other = r.get(&resources::PODS, "default", "bound").unwrap();
        assert_eq!(other.value["spec"]["nodeName"], "other");
        let events = r.store.txn(|t| t.list(&resources::EVENTS, Some("default")));
        assert_eq!(events.len(), 1);
        assert_eq!(
            events[0].value["message"],
            "Successfully assigned default/free to n1"
        );
        assert!(schedule(&r, "n1").is_empty(), "nothing left to bind");
    }

    #[test]
    fn a_cordoned_node_gets_nothing() {
        let r = registry();
        let node = json!({"metadata": {"name": "n1"}, "spec": {"unschedulable": true}});
        r.create(&resources::NODES, "", node).unwrap();
        assert!(schedule(&r, "n1").is_empty());
    }
}
