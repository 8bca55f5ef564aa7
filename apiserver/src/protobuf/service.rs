//! A protobuf Service (what `kubectl create service` and `kubectl expose`
//! send) as JSON: its metadata and spec. Go's non-pointer fields arrive even
//! when empty (`""`, `0`, `false`) and are left out, as their JSON `omitempty`
//! would; pointer fields (`allocateLoadBalancerNodePorts`) keep what was sent.

use k8s_pb::api::core::v1 as core;
use serde_json::{Map, Value, json};

use super::pod::int_or_string;
use super::{object_meta, put, strings};

/// An `int32` that JSON omits when zero.
fn nonzero(v: Option<i32>) -> Value {
    v.filter(|n| *n != 0).map_or(Value::Null, Value::from)
}

fn port(p: core::ServicePort) -> Value {
    let mut out = Map::new();
    put(&mut out, "name", p.name.into());
    put(&mut out, "protocol", p.protocol.into());
    put(&mut out, "appProtocol", p.app_protocol.into());
    out.insert("port".into(), p.port.unwrap_or(0).into());
    put(&mut out, "targetPort", int_or_string(p.target_port));
    put(&mut out, "nodePort", nonzero(p.node_port));
    Value::Object(out)
}

pub(super) fn service(s: core::Service) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(s.metadata));
    let Some(spec) = s.spec else {
        return out;
    };
    let mut o = Map::new();
    let ports: Vec<Value> = spec.ports.into_iter().map(port).collect();
    put(&mut o, "ports", ports.into());
    put(&mut o, "selector", strings(spec.selector));
    put(&mut o, "clusterIP", spec.cluster_ip.into());
    put(&mut o, "clusterIPs", spec.cluster_ips.into());
    put(&mut o, "type", spec.r#type.into());
    put(&mut o, "externalIPs", spec.external_ips.into());
    put(&mut o, "sessionAffinity", spec.session_affinity.into());
    put(&mut o, "loadBalancerIP", spec.load_balancer_ip.into());
    put(
        &mut o,
        "loadBalancerSourceRanges",
        spec.load_balancer_source_ranges.into(),
    );
    put(&mut o, "externalName", spec.external_name.into());
    put(
        &mut o,
        "externalTrafficPolicy",
        spec.external_traffic_policy.into(),
    );
    put(
        &mut o,
        "healthCheckNodePort",
        nonzero(spec.health_check_node_port),
    );
    if spec.publish_not_ready_addresses == Some(true) {
        o.insert("publishNotReadyAddresses".into(), true.into());
    }
    let timeout = spec
        .session_affinity_config
        .and_then(|c| c.client_ip)
        .and_then(|c| c.timeout_seconds);
    if let Some(timeout) = timeout {
        o.insert(
            "sessionAffinityConfig".into(),
            json!({"clientIP": {"timeoutSeconds": timeout}}),
        );
    }
    put(&mut o, "ipFamilies", spec.ip_families.into());
    put(&mut o, "ipFamilyPolicy", spec.ip_family_policy.into());
    if let Some(allocate) = spec.allocate_load_balancer_node_ports {
        o.insert("allocateLoadBalancerNodePorts".into(), allocate.into());
    }
    put(&mut o, "loadBalancerClass", spec.load_balancer_class.into());
    put(
        &mut o,
        "internalTrafficPolicy",
        spec.internal_traffic_policy.into(),
    );
    put(
        &mut o,
        "trafficDistribution",
        spec.traffic_distribution.into(),
    );
    out.insert("spec".into(), Value::Object(o));
    out
}
