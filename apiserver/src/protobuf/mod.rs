//! Protobuf request bodies (`application/vnd.kubernetes.protobuf`), read into the JSON the
//! double stores. The messages come from `k8s-pb` (the kube-rs project's prost bindings of
//! the upstream `generated.proto` files); this module maps them to their JSON shape.
//!
//! A body is the magic `k8s\0` followed by a `runtime.Unknown` whose `typeMeta` names the
//! kind and whose `raw` holds the object's message. Read are the kinds `kubectl create
//! namespace|configmap|secret|serviceaccount|service` (and `kubectl expose`) send, those the kubelet writes
//! ([`kubelet`]) and Pods ([`pod`]: a kubelet's mirror pods); any other kind is a 415
//! that says what to do instead.
//! Responses stay JSON, which every client that sends protobuf also accepts.

use std::collections::BTreeMap;

use k8s_pb::api::core::v1 as core;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_pb::apimachinery::pkg::runtime::Unknown;
use prost::Message;
use serde_json::{Map, Value, json};

use crate::status::{Error, Result};

mod kubelet;
mod pod;
mod service;

/// The protobuf media type of the Kubernetes API.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// The kinds whose protobuf bodies are read: what `kubectl create <kind>` and the kubelet
/// (with its default content type) send.
pub const KINDS: [&str; 12] = [
    "Namespace",
    "Service",
    "Pod",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Node",
    "Lease",
    "Event",
    "CSINode",
    "TokenRequest",
    "DeleteOptions",
];

/// Decodes a protobuf request body into the object's JSON.
pub fn decode(body: &[u8]) -> Result<Value> {
    let message = body.strip_prefix(MAGIC).ok_or_else(|| {
        Error::bad_request("provided object is not a protobuf message: missing the k8s\\0 prefix")
    })?;
    let unknown = Unknown::decode(message).map_err(invalid)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let api_version = type_meta.api_version.unwrap_or_default();
    let kind = type_meta.kind.unwrap_or_default();
    let raw = unknown.raw.unwrap_or_default();
    let mut obj = match (api_version.as_str(), kind.as_str()) {
        ("v1", "Namespace") => namespace(core::Namespace::decode(&raw[..]).map_err(invalid)?),
        ("v1", "ConfigMap") => config_map(core::ConfigMap::decode(&raw[..]).map_err(invalid)?),
        ("v1", "Secret") => secret(core::Secret::decode(&raw[..]).map_err(invalid)?),
        ("v1", "Service") => service::service(core::Service::decode(&raw[..]).map_err(invalid)?),
        ("v1", "ServiceAccount") => {
            service_account(core::ServiceAccount::decode(&raw[..]).map_err(invalid)?)
        }
        ("v1", "Node") => kubelet::node(core::Node::decode(&raw[..]).map_err(invalid)?),
        ("v1", "Pod") => pod::pod(core::Pod::decode(&raw[..]).map_err(invalid)?)?,
        ("v1", "Event") => kubelet::event(core::Event::decode(&raw[..]).map_err(invalid)?),
        ("coordination.k8s.io/v1", "Lease") => {
            kubelet::lease(k8s_pb::api::coordination::v1::Lease::decode(&raw[..]).map_err(invalid)?)
        }
        ("storage.k8s.io/v1", "CSINode") => {
            kubelet::csi_node(k8s_pb::api::storage::v1::CSINode::decode(&raw[..]).map_err(invalid)?)
        }
        // Sent with the group version of the resource being deleted.
        (_, "DeleteOptions") => {
            kubelet::delete_options(meta::DeleteOptions::decode(&raw[..]).map_err(invalid)?)
        }
        ("authentication.k8s.io/v1", "TokenRequest") => kubelet::token_request(
            k8s_pb::api::authentication::v1::TokenRequest::decode(&raw[..]).map_err(invalid)?,
        ),
        _ => {
            return Err(Error::UnsupportedMediaType {
                content_type: format!("{MEDIA_TYPE} ({api_version}, Kind={kind})"),
                accepted: &[],
            });
        }
    };
    obj.insert("apiVersion".into(), api_version.into());
    obj.insert("kind".into(), kind.into());
    Ok(Value::Object(obj))
}

fn invalid(error: prost::DecodeError) -> Error {
    Error::bad_request(format!("failed to decode the protobuf body: {error}"))
}

/// Inserts `value` under `key` unless it is empty.
pub(crate) fn put(map: &mut Map<String, Value>, key: &str, value: Value) {
    let empty = match &value {
        Value::Null => true,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    };
    if !empty {
        map.insert(key.to_string(), value);
    }
}

pub(crate) fn strings(map: BTreeMap<String, String>) -> Value {
    Value::Object(map.into_iter().map(|(k, v)| (k, v.into())).collect())
}

/// The client-settable part of `ObjectMeta` (the server sets the rest).
pub(crate) fn object_meta(m: Option<meta::ObjectMeta>) -> Value {
    let m = m.unwrap_or_default();
    let mut out = Map::new();
    put(&mut out, "name", m.name.into());
    put(&mut out, "generateName", m.generate_name.into());
    put(&mut out, "namespace", m.namespace.into());
    put(&mut out, "uid", m.uid.into());
    put(&mut out, "resourceVersion", m.resource_version.into());
    put(&mut out, "labels", strings(m.labels.into_iter().collect()));
    put(
        &mut out,
        "annotations",
        strings(m.annotations.into_iter().collect()),
    );
    put(&mut out, "finalizers", m.finalizers.into());
    let owners: Vec<Value> = m
        .owner_references
        .into_iter()
        .map(|o| {
            let mut r = Map::new();
            put(&mut r, "apiVersion", o.api_version.into());
            put(&mut r, "kind", o.kind.into());
            put(&mut r, "name", o.name.into());
            put(&mut r, "uid", o.uid.into());
            if let Some(c) = o.controller {
                r.insert("controller".into(), c.into());
            }
            if let Some(b) = o.block_owner_deletion {
                r.insert("blockOwnerDeletion".into(), b.into());
            }
            Value::Object(r)
        })
        .collect();
    put(&mut out, "ownerReferences", owners.into());
    Value::Object(out)
}

fn namespace(ns: core::Namespace) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(ns.metadata));
    if let Some(spec) = ns.spec {
        out.insert("spec".into(), json!({"finalizers": spec.finalizers}));
    }
    out
}

fn config_map(cm: core::ConfigMap) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(cm.metadata));
    put(&mut out, "data", strings(cm.data.into_iter().collect()));
    put(
        &mut out,
        "binaryData",
        base64_values(cm.binary_data.into_iter().collect()),
    );
    if let Some(immutable) = cm.immutable {
        out.insert("immutable".into(), immutable.into());
    }
    out
}

fn secret(s: core::Secret) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(s.metadata));
    put(
        &mut out,
        "data",
        base64_values(s.data.into_iter().collect()),
    );
    put(
        &mut out,
        "stringData",
        strings(s.string_data.into_iter().collect()),
    );
    put(&mut out, "type", s.r#type.into());
    if let Some(immutable) = s.immutable {
        out.insert("immutable".into(), immutable.into());
    }
    out
}

fn service_account(sa: core::ServiceAccount) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("metadata".into(), object_meta(sa.metadata));
    let secrets: Vec<Value> = sa
        .secrets
        .into_iter()
        .map(|r| object_reference(Some(r)))
        .collect();
    put(&mut out, "secrets", secrets.into());
    let pull: Vec<Value> = sa
        .image_pull_secrets
        .into_iter()
        .map(|r| json!({"name": r.name.unwrap_or_default()}))
        .collect();
    put(&mut out, "imagePullSecrets", pull.into());
    if let Some(automount) = sa.automount_service_account_token {
        out.insert("automountServiceAccountToken".into(), automount.into());
    }
    out
}

/// An `ObjectReference` (a service account's secrets, an event's object).
pub(crate) fn object_reference(r: Option<core::ObjectReference>) -> Value {
    let Some(r) = r else { return Value::Null };
    let mut o = Map::new();
    put(&mut o, "kind", r.kind.into());
    put(&mut o, "namespace", r.namespace.into());
    put(&mut o, "name", r.name.into());
    put(&mut o, "uid", r.uid.into());
    put(&mut o, "apiVersion", r.api_version.into());
    put(&mut o, "resourceVersion", r.resource_version.into());
    put(&mut o, "fieldPath", r.field_path.into());
    Value::Object(o)
}

/// Bytes as JSON carries them: base64.
fn base64_values(map: BTreeMap<String, Vec<u8>>) -> Value {
    use base64::Engine as _;
    Value::Object(
        map.into_iter()
            .map(|(k, v)| {
                let encoded = base64::engine::general_purpose::STANDARD.encode(v);
                (k, encoded.into())
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_pb::apimachinery::pkg::runtime::TypeMeta;

    fn envelope(kind: &str, raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("v1".into()),
                kind: Some(kind.into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
            content_type: Some(String::new()),
        };
        [MAGIC.to_vec(), unknown.encode_to_vec()].concat()
    }

    fn named(name: &str) -> Option<meta::ObjectMeta> {
        Some(meta::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        })
    }

    #[test]
    fn kubectl_generator_bodies_decode() {
        let ns = core::Namespace {
            metadata: named("x"),
            ..Default::default()
        };
        assert_eq!(
            decode(&envelope("Namespace", ns.encode_to_vec())).unwrap(),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}})
        );
        let cm = core::ConfigMap {
            metadata: named("c"),
            data: [("a".to_string(), "b".to_string())].into_iter().collect(),
            ..Default::default()
        };
        assert_eq!(
            decode(&envelope("ConfigMap", cm.encode_to_vec())).unwrap()["data"],
            json!({"a": "b"})
        );
        let secret = core::Secret {
            metadata: named("s"),
            data: [("k".to_string(), b"v".to_vec())].into_iter().collect(),
            r#type: Some("Opaque".into()),
            ..Default::default()
        };
        let decoded = decode(&envelope("Secret", secret.encode_to_vec())).unwrap();
        assert_eq!(decoded["data"], json!({"k": "dg=="}));
        assert_eq!(decoded["type"], "Opaque");
        // `kubectl create service clusterip fooservice --tcp=8765:8080`: Go's empty
        // non-pointer fields are sent and left out again.
        let service = core::Service {
            metadata: named("fooservice"),
            spec: Some(core::ServiceSpec {
                ports: vec![core::ServicePort {
                    name: Some("8765-8080".into()),
                    protocol: Some("TCP".into()),
                    port: Some(8765),
                    target_port: Some(k8s_pb::apimachinery::pkg::util::intstr::IntOrString {
                        r#type: Some(0),
                        int_val: Some(8080),
                        str_val: Some(String::new()),
                    }),
                    node_port: Some(0),
                    ..Default::default()
                }],
                selector: [("app".to_string(), "fooservice".to_string())].into(),
                cluster_ip: Some(String::new()),
                r#type: Some("ClusterIP".into()),
                session_affinity: Some(String::new()),
                publish_not_ready_addresses: Some(false),
                ..Default::default()
            }),
            ..Default::default()
        };
        let decoded = decode(&envelope("Service", service.encode_to_vec())).unwrap();
        assert_eq!(
            decoded["spec"],
            json!({
                "ports": [{"name": "8765-8080", "protocol": "TCP", "port": 8765, "targetPort": 8080}],
                "selector": {"app": "fooservice"},
                "type": "ClusterIP"
            })
        );
    }

    #[test]
    fn bad_bodies_are_refused() {
        assert_eq!(decode(b"{}").unwrap_err().code(), 400);
        assert_eq!(decode(b"k8s\0\xff\xff").unwrap_err().code(), 400);
        assert_eq!(
            decode(&envelope("Endpoints", Vec::new()))
                .unwrap_err()
                .code(),
            415
        );
    }
}
