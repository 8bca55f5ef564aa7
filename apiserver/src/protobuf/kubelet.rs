//! The objects a kubelet writes with its default content type (protobuf): its Node, its
//! Lease, Events, its CSINode, service-account TokenRequests and the DeleteOptions of its
//! finalizing pod deletes, mapped to their JSON.

use k8s_pb::api::authentication::v1 as authentication;
use k8s_pb::api::coordination::v1 as coordination;
use k8s_pb::api::core::v1 as core;
use k8s_pb::api::storage::v1 as storage;
use k8s_pb::apimachinery::pkg::api::resource::Quantity;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value, json};

use super::{object_meta, object_reference, put};

/// The instant a `Timestamp` message stands for. Go writes a zero `metav1.Time` or
/// `MicroTime` as an empty message (`Time.Marshal`), which it reads back as the zero time,
/// `null` in JSON; a set time always carries its seconds.
fn instant(seconds: Option<i64>, nanos: Option<i32>) -> Option<chrono::DateTime<chrono::Utc>> {
    if seconds.is_none() && nanos.is_none() {
        return None;
    }
    let nanos = u32::try_from(nanos.unwrap_or(0)).unwrap_or(0);
    chrono::DateTime::from_timestamp(seconds.unwrap_or(0), nanos)
}

/// A `metav1.Time` as JSON carries it: RFC 3339 in seconds.
fn time(t: Option<meta::Time>) -> Value {
    t.and_then(|t| instant(t.seconds, t.nanos))
        .map_or(Value::Null, |t| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true).into()
        })
}

/// A `metav1.MicroTime`: RFC 3339 with microseconds.
fn micro_time(t: Option<meta::MicroTime>) -> Value {
    t.and_then(|t| instant(t.seconds, t.nanos))
        .map_or(Value::Null, |t| {
            t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
                .into()
        })
}

fn quantities(map: impl IntoIterator<Item = (String, Quantity)>) -> Value {
    Value::Object(
        map.into_iter()
            .map(|(k, q)| (k, q.string.unwrap_or_default().into()))
            .collect(),
    )
}

/// The Node a kubelet registers: labels, taints, capacity, conditions, addresses, …
pub fn node(node: core::Node) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(node.metadata));
    let spec = node.spec.unwrap_or_default();
    let mut s = Map::new();
    put(&mut s, "podCIDR", spec.pod_cidr.into());
    put(&mut s, "podCIDRs", spec.pod_cid_rs.into());
    put(&mut s, "providerID", spec.provider_id.into());
    if let Some(unschedulable) = spec.unschedulable {
        s.insert("unschedulable".into(), unschedulable.into());
    }
    let taints: Vec<Value> = spec
        .taints
        .into_iter()
        .map(|t| {
            let mut o = Map::new();
            put(&mut o, "key", t.key.into());
            put(&mut o, "value", t.value.into());
            put(&mut o, "effect", t.effect.into());
            put(&mut o, "timeAdded", time(t.time_added));
            Value::Object(o)
        })
        .collect();
    put(&mut s, "taints", taints.into());
    out.insert("spec".into(), Value::Object(s));

    let status = node.status.unwrap_or_default();
    let mut st = Map::new();
    put(&mut st, "capacity", quantities(status.capacity));
    put(&mut st, "allocatable", quantities(status.allocatable));
    put(&mut st, "phase", status.phase.into());
    let conditions: Vec<Value> = status
        .conditions
        .into_iter()
        .map(|c| {
            let mut o = Map::new();
            put(&mut o, "type", c.r#type.into());
            put(&mut o, "status", c.status.into());
            put(&mut o, "lastHeartbeatTime", time(c.last_heartbeat_time));
            put(&mut o, "lastTransitionTime", time(c.last_transition_time));
            put(&mut o, "reason", c.reason.into());
            put(&mut o, "message", c.message.into());
            Value::Object(o)
        })
        .collect();
    put(&mut st, "conditions", conditions.into());
    let addresses: Vec<Value> = status
        .addresses
        .into_iter()
        .map(|a| json!({"type": a.r#type.unwrap_or_default(), "address": a.address.unwrap_or_default()}))
        .collect();
    put(&mut st, "addresses", addresses.into());
    if let Some(endpoints) = status.daemon_endpoints {
        let port = endpoints.kubelet_endpoint.and_then(|e| e.port).unwrap_or(0);
        st.insert(
            "daemonEndpoints".into(),
            json!({"kubeletEndpoint": {"Port": port}}),
        );
    }
    if let Some(info) = status.node_info {
        let mut o = Map::new();
        for (key, value) in [
            ("machineID", info.machine_id),
            ("systemUUID", info.system_uuid),
            ("bootID", info.boot_id),
            ("kernelVersion", info.kernel_version),
            ("osImage", info.os_image),
            ("containerRuntimeVersion", info.container_runtime_version),
            ("kubeletVersion", info.kubelet_version),
            ("kubeProxyVersion", info.kube_proxy_version),
            ("operatingSystem", info.operating_system),
            ("architecture", info.architecture),
        ] {
            // Every field of NodeSystemInfo is required: kube-apiserver writes "" too.
            o.insert(key.into(), value.unwrap_or_default().into());
        }
        st.insert("nodeInfo".into(), Value::Object(o));
    }
    let images: Vec<Value> = status
        .images
        .into_iter()
        .map(|i| {
            let mut o = Map::new();
            put(&mut o, "names", i.names.into());
            if let Some(size) = i.size_bytes {
                o.insert("sizeBytes".into(), size.into());
            }
            Value::Object(o)
        })
        .collect();
    put(&mut st, "images", images.into());
    put(&mut st, "volumesInUse", status.volumes_in_use.into());
    out.insert("status".into(), Value::Object(st));
    out
}

/// The node's Lease in `kube-node-lease`.
pub fn lease(lease: coordination::Lease) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(lease.metadata));
    let spec = lease.spec.unwrap_or_default();
    let mut s = Map::new();
    put(&mut s, "holderIdentity", spec.holder_identity.into());
    if let Some(seconds) = spec.lease_duration_seconds {
        s.insert("leaseDurationSeconds".into(), seconds.into());
    }
    put(&mut s, "acquireTime", micro_time(spec.acquire_time));
    put(&mut s, "renewTime", micro_time(spec.renew_time));
    if let Some(transitions) = spec.lease_transitions {
        s.insert("leaseTransitions".into(), transitions.into());
    }
    out.insert("spec".into(), Value::Object(s));
    out
}

/// A core/v1 Event the kubelet records.
pub fn event(event: core::Event) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(event.metadata));
    out.insert(
        "involvedObject".into(),
        object_reference(event.involved_object),
    );
    put(&mut out, "reason", event.reason.into());
    put(&mut out, "message", event.message.into());
    if let Some(source) = event.source {
        let mut o = Map::new();
        put(&mut o, "component", source.component.into());
        put(&mut o, "host", source.host.into());
        out.insert("source".into(), Value::Object(o));
    }
    out.insert("firstTimestamp".into(), time(event.first_timestamp));
    out.insert("lastTimestamp".into(), time(event.last_timestamp));
    if let Some(count) = event.count {
        out.insert("count".into(), count.into());
    }
    put(&mut out, "type", event.r#type.into());
    out.insert("eventTime".into(), micro_time(event.event_time));
    if let Some(series) = event.series {
        out.insert(
            "series".into(),
            json!({"count": series.count.unwrap_or(0),
                   "lastObservedTime": micro_time(series.last_observed_time)}),
        );
    }
    put(&mut out, "action", event.action.into());
    put(&mut out, "related", object_reference(event.related));
    out.insert(
        "reportingComponent".into(),
        event.reporting_component.unwrap_or_default().into(),
    );
    out.insert(
        "reportingInstance".into(),
        event.reporting_instance.unwrap_or_default().into(),
    );
    out
}

/// The kubelet's CSINode (its CSI drivers; none on fake-cri).
pub fn csi_node(node: storage::CSINode) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(node.metadata));
    let drivers: Vec<Value> = node
        .spec
        .unwrap_or_default()
        .drivers
        .into_iter()
        .map(|d| {
            let mut o = Map::new();
            put(&mut o, "name", d.name.into());
            put(&mut o, "nodeID", d.node_id.into());
            put(&mut o, "topologyKeys", d.topology_keys.into());
            if let Some(count) = d.allocatable.and_then(|a| a.count) {
                o.insert("allocatable".into(), json!({"count": count}));
            }
            Value::Object(o)
        })
        .collect();
    out.insert("spec".into(), json!({"drivers": drivers}));
    out
}

/// A service-account TokenRequest (`serviceaccounts/<name>/token`).
pub fn token_request(request: authentication::TokenRequest) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(request.metadata));
    let spec = request.spec.unwrap_or_default();
    let mut s = Map::new();
    s.insert("audiences".into(), spec.audiences.into());
    if let Some(seconds) = spec.expiration_seconds {
        s.insert("expirationSeconds".into(), seconds.into());
    }
    if let Some(bound) = spec.bound_object_ref {
        let mut o = Map::new();
        put(&mut o, "kind", bound.kind.into());
        put(&mut o, "apiVersion", bound.api_version.into());
        put(&mut o, "name", bound.name.into());
        put(&mut o, "uid", bound.u_id.into());
        s.insert("boundObjectRef".into(), Value::Object(o));
    }
    out.insert("spec".into(), Value::Object(s));
    out
}

/// The options of a delete (the kubelet's finalizing delete: grace 0, the pod's UID).
pub fn delete_options(options: meta::DeleteOptions) -> Map<String, Value> {
    let mut out = Map::new();
    if let Some(grace) = options.grace_period_seconds {
        out.insert("gracePeriodSeconds".into(), grace.into());
    }
    if let Some(p) = options.preconditions {
        let mut o = Map::new();
        put(&mut o, "uid", p.uid.into());
        put(&mut o, "resourceVersion", p.resource_version.into());
        out.insert("preconditions".into(), Value::Object(o));
    }
    if let Some(orphan) = options.orphan_dependents {
        out.insert("orphanDependents".into(), orphan.into());
    }
    put(
        &mut out,
        "propagationPolicy",
        options.propagation_policy.into(),
    );
    put(&mut out, "dryRun", options.dry_run.into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339() {
        let t = meta::Time {
            seconds: Some(1_764_000_000),
            nanos: Some(0),
        };
        assert_eq!(time(Some(t)), "2025-11-24T16:00:00Z");
        let m = meta::MicroTime {
            seconds: Some(1_764_000_000),
            nanos: Some(123_456_789),
        };
        assert_eq!(micro_time(Some(m)), "2025-11-24T16:00:00.123456Z");
        assert_eq!(time(None), Value::Null);
        // Go's zero time: an empty message, null in JSON (not the Unix epoch).
        assert_eq!(time(Some(meta::Time::default())), Value::Null);
        assert_eq!(micro_time(Some(meta::MicroTime::default())), Value::Null);
    }

    #[test]
    fn a_registering_node_keeps_what_the_kubelet_sent() {
        let node = core::Node {
            metadata: Some(meta::ObjectMeta {
                name: Some("n1".into()),
                labels: [("kubernetes.io/os".to_string(), "linux".to_string())]
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            spec: Some(Default::default()),
            status: Some(core::NodeStatus {
                capacity: [(
                    "cpu".to_string(),
                    Quantity {
                        string: Some("2".into()),
                    },
                )]
                .into_iter()
                .collect(),
                conditions: vec![core::NodeCondition {
                    r#type: Some("Ready".into()),
                    status: Some("True".into()),
                    ..Default::default()
                }],
                daemon_endpoints: Some(core::NodeDaemonEndpoints {
                    kubelet_endpoint: Some(core::DaemonEndpoint { port: Some(10250) }),
                }),
                ..Default::default()
            }),
        };
        let json = Value::Object(super::node(node));
        assert_eq!(json["metadata"]["labels"]["kubernetes.io/os"], "linux");
        assert_eq!(json["status"]["capacity"]["cpu"], "2");
        assert_eq!(json["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(
            json["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"],
            10250
        );
    }

    #[test]
    fn a_lease_renewal_keeps_microseconds() {
        let lease = coordination::Lease {
            metadata: None,
            spec: Some(coordination::LeaseSpec {
                holder_identity: Some("n1".into()),
                lease_duration_seconds: Some(40),
                renew_time: Some(meta::MicroTime {
                    seconds: Some(1_764_000_000),
                    nanos: Some(5_000),
                }),
                ..Default::default()
            }),
        };
        let json = Value::Object(super::lease(lease));
        assert_eq!(
            json["spec"],
            json!({"holderIdentity": "n1", "leaseDurationSeconds": 40,
                   "renewTime": "2025-11-24T16:00:00.000005Z"})
        );
    }

    #[test]
    fn a_finalizing_delete_keeps_grace_and_uid() {
        let options = meta::DeleteOptions {
            grace_period_seconds: Some(0),
            preconditions: Some(meta::Preconditions {
                uid: Some("u".into()),
                resource_version: None,
            }),
            ..Default::default()
        };
        assert_eq!(
            Value::Object(delete_options(options)),
            json!({"gracePeriodSeconds": 0, "preconditions": {"uid": "u"}})
        );
    }
}
