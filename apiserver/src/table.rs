//! How responses render objects, chosen by `Accept`: plain JSON; `meta.k8s.io/v1 Table`,
//! which `kubectl get` asks for (`application/json;as=Table;v=v1;g=meta.k8s.io`), with the
//! columns upstream's printers give the resources a node agent touches; or
//! `PartialObjectMetadata` (metadata-only clients such as kube-rs `metadata_watcher`).

use bytes::Bytes;
use serde_json::{Value, json};

use crate::meta;
use crate::resources::Resource;
use crate::store::Object;

/// The media type of Table responses.
pub const TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
/// The media type of JSON responses.
pub const JSON: &str = "application/json";

/// How a response renders objects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The objects as stored.
    Json,
    /// A Table.
    Table(Include),
    /// `PartialObjectMetadata` / `PartialObjectMetadataList`.
    Metadata,
}

impl View {
    /// The view the client's first `Accept` choice asks for.
    pub fn from_accept(accept: &str, include_object: Option<&str>) -> Self {
        let first = accept.split(',').next().unwrap_or("");
        if !first.contains("g=meta.k8s.io") {
            View::Json
        } else if first.contains("as=Table") {
            View::Table(Include::parse(include_object))
        } else if first.contains("as=PartialObjectMetadata") {
            View::Metadata
        } else {
            View::Json
        }
    }

    /// The response `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            View::Table(_) => TABLE,
            View::Json | View::Metadata => JSON,
        }
    }

    /// One object rendered as a list's item: for JSON without its type meta.
    pub fn item(self, resource: &Resource, obj: &Object) -> Bytes {
        if resource.converted() && self == View::Json {
            let mut v1 = crate::events::to_v1(&obj.value);
            if let Some(map) = v1.as_object_mut() {
                map.remove("kind");
                map.remove("apiVersion");
            }
            return Bytes::from(serde_json::to_vec(&v1).unwrap_or_default());
        }
        match self {
            View::Json => obj.item_json(),
            _ => self.object(resource, obj),
        }
    }

    /// One object rendered (a watch event's object, or a get response).
    pub fn object(self, resource: &Resource, obj: &Object) -> Bytes {
        if resource.converted() && self == View::Json {
            let v1 = crate::events::to_v1(&obj.value);
            return Bytes::from(serde_json::to_vec(&v1).unwrap_or_default());
        }
        match self {
            View::Json => obj.json.clone(),
            View::Table(include) => {
                let metadata = json!({"resourceVersion": obj.rv.to_string()});
                Bytes::from(
                    serde_json::to_vec(&table(resource, [&obj.value], include, metadata))
                        .unwrap_or_default(),
                )
            }
            View::Metadata => {
                Bytes::from(serde_json::to_vec(&partial(&obj.value)).unwrap_or_default())
            }
        }
    }
}

/// An object's `PartialObjectMetadata`.
pub fn partial(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// No object.
    None,
    /// A `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl Include {
    /// Parses `includeObject`.
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Include::None,
            Some("Object") => Include::Object,
            _ => Include::Metadata,
        }
    }
}

/// Whether an `Accept` header asks for a Table.
pub fn wants_table(accept: &str) -> bool {
    accept
        .split(',')
        .next()
        .is_some_and(|first| first.contains("as=Table") && first.contains("g=meta.k8s.io"))
}

/// Like upstream's `duration.HumanDuration`.
fn age(obj: &Value) -> String {
    age_since(meta::str_field(obj, "creationTimestamp"))
}

/// How long ago `timestamp` was, as kubectl prints ages (`<unknown>` if unset).
fn age_since(timestamp: &str) -> String {
    let Some(created) = meta::parse_time(timestamp) else {
        return "<unknown>".into();
    };
    let s = (chrono::Utc::now() - created).num_seconds().max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    if s < 120 {
        format!("{s}s")
    } else if m < 10 {
        format!("{m}m{}s", s % 60)
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        format!("{h}h{}m", m % 60)
    } else if h < 48 {
        format!("{h}h")
    } else if d < 8 {
        format!("{d}d{}h", h % 24)
    } else {
        format!("{d}d")
    }
}

fn column(name: &str, kind: &str, priority: i32) -> Value {
    let format = if name == "Name" { "name" } else { "" };
    json!({"name": name, "type": kind, "format": format, "description": "", "priority": priority})
}

fn columns(resource: &Resource) -> Vec<Value> {
    if (resource.group, resource.plural) == ("", "events") {
        // Upstream's event printer: the name last, and only with `-o wide`.
        return vec![
            column("Last Seen", "string", 0),
            column("Type", "string", 0),
            column("Reason", "string", 0),
            column("Object", "string", 0),
            column("Subobject", "string", 1),
            column("Source", "string", 1),
            column("Message", "string", 0),
            column("First Seen", "string", 1),
            column("Count", "string", 1),
            column("Name", "string", 1),
        ];
    }
    let mut cols = vec![column("Name", "string", 0)];
    match (resource.group, resource.plural) {
        ("", "pods") => cols.extend([
            column("Ready", "string", 0),
            column("Status", "string", 0),
            column("Restarts", "string", 0),
            column("Age", "string", 0),
            column("IP", "string", 1),
            column("Node", "string", 1),
        ]),
        ("", "nodes") => cols.extend([
            column("Status", "string", 0),
            column("Roles", "string", 0),
            column("Age", "string", 0),
            column("Version", "string", 0),
            column("Internal-IP", "string", 1),
        ]),
        ("", "namespaces") => {
            cols.extend([column("Status", "string", 0), column("Age", "string", 0)])
        }
        ("", "configmaps") => {
            cols.extend([column("Data", "integer", 0), column("Age", "string", 0)])
        }
        ("", "secrets") => cols.extend([
            column("Type", "string", 0),
            column("Data", "integer", 0),
            column("Age", "string", 0),
        ]),
        ("coordination.k8s.io", "leases") => {
            cols.extend([column("Holder", "string", 0), column("Age", "string", 0)])
        }
        _ => cols.push(column("Age", "string", 0)),
    }
    cols
}

fn pod_cells(pod: &Value) -> Vec<Value> {
    let statuses = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let total = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let ready = statuses.iter().filter(|s| s["ready"] == true).count();
    let restarts: i64 = statuses
        .iter()
        .filter_map(|s| s["restartCount"].as_i64())
        .sum();
    let mut status = meta::path_string(pod, "status.reason");
    if status.is_empty() {
        status = meta::path_string(pod, "status.phase");
    }
    for s in &statuses {
        for state in ["waiting", "terminated"] {
            if let Some(reason) = s
                .pointer(&format!("/state/{state}/reason"))
                .and_then(Value::as_str)
            {
                status = reason.to_string();
            }
        }
    }
    if !meta::str_field(pod, "deletionTimestamp").is_empty() {
        status = "Terminating".into();
    }
    let or_none = |s: String| {
        if s.is_empty() {
            "<none>".to_string()
        } else {
            s
        }
    };
    vec![
        format!("{ready}/{total}").into(),
        status.into(),
        restarts.to_string().into(),
        age(pod).into(),
        or_none(meta::path_string(pod, "status.podIP")).into(),
        or_none(meta::path_string(pod, "spec.nodeName")).into(),
    ]
}

fn node_cells(node: &Value) -> Vec<Value> {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|c| c.iter().find(|c| c["type"] == "Ready"))
        .is_some_and(|c| c["status"] == "True");
    let mut status = if ready { "Ready" } else { "NotReady" }.to_string();
    if node.pointer("/spec/unschedulable") == Some(&Value::Bool(true)) {
        status.push_str(",SchedulingDisabled");
    }
    let roles: Vec<&str> = node
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
        .map(|l| {
            l.keys()
                .filter_map(|k| k.strip_prefix("node-role.kubernetes.io/"))
                .collect()
        })
        .unwrap_or_default();
    let internal_ip = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
        .and_then(|a| a["address"].as_str())
        .unwrap_or("<none>");
    vec![
        status.into(),
        if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }
        .into(),
        age(node).into(),
        meta::path_string(node, "status.nodeInfo.kubeletVersion").into(),
        internal_ip.into(),
    ]
}

fn count(obj: &Value, fields: &[&str]) -> Value {
    fields
        .iter()
        .filter_map(|f| obj.get(*f).and_then(Value::as_object))
        .map(|m| m.len())
        .sum::<usize>()
        .into()
}

/// The cells of a core/v1 Event, as upstream's event printer fills them.
fn event_cells(event: &Value) -> Vec<Value> {
    let field = |path: &str| meta::path_string(event, path);
    let last_seen = [
        "series.lastObservedTime",
        "lastTimestamp",
        "eventTime",
        "metadata.creationTimestamp",
    ]
    .iter()
    .map(|p| field(p))
    .find(|t| !t.is_empty())
    .unwrap_or_default();
    let mut source = field("source.component");
    let host = field("source.host");
    if !host.is_empty() {
        source = format!("{source}, {host}");
    }
    let count = event
        .pointer("/count")
        .and_then(Value::as_i64)
        .unwrap_or(1)
        .to_string();
    vec![
        age_since(&last_seen).into(),
        field("type").into(),
        field("reason").into(),
        format!(
            "{}/{}",
            field("involvedObject.kind").to_lowercase(),
            field("involvedObject.name")
        )
        .into(),
        field("involvedObject.fieldPath").into(),
        source.into(),
        field("message").into(),
        age_since(&field("firstTimestamp")).into(),
        count.into(),
        meta::str_field(event, "name").into(),
    ]
}

/// One Table row for an object.
pub fn row(resource: &Resource, obj: &Value, include: Include) -> Value {
    let mut cells: Vec<Value> = vec![meta::str_field(obj, "name").into()];
    match (resource.group, resource.plural) {
        ("", "events") => cells = event_cells(obj),
        ("", "pods") => cells.extend(pod_cells(obj)),
        ("", "nodes") => cells.extend(node_cells(obj)),
        ("", "namespaces") => cells.extend([
            meta::path_string(obj, "status.phase").into(),
            age(obj).into(),
        ]),
        ("", "configmaps") => cells.extend([count(obj, &["data", "binaryData"]), age(obj).into()]),
        ("", "secrets") => cells.extend([
            meta::path_string(obj, "type").into(),
            count(obj, &["data"]),
            age(obj).into(),
        ]),
        ("coordination.k8s.io", "leases") => cells.extend([
            meta::path_string(obj, "spec.holderIdentity").into(),
            age(obj).into(),
        ]),
        _ => cells.push(age(obj).into()),
    }
    let mut row = json!({"cells": cells});
    match include {
        Include::None => {}
        Include::Object => row["object"] = obj.clone(),
        Include::Metadata => row["object"] = partial(obj),
    }
    row
}

/// A Table of objects.
pub fn table<'a>(
    resource: &Resource,
    objects: impl IntoIterator<Item = &'a Value>,
    include: Include,
    metadata: Value,
) -> Value {
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": columns(resource),
        "rows": objects.into_iter().map(|o| row(resource, o, include)).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, EVENTS, PODS};

    #[test]
    fn accept_header() {
        let kubectl = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
        assert_eq!(
            View::from_accept(kubectl, None),
            View::Table(Include::Metadata)
        );
        assert_eq!(View::from_accept("application/json", None), View::Json);
        let meta = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
        assert_eq!(View::from_accept(meta, None), View::Metadata);
    }

    #[test]
    fn pod_row() {
        let pod = json!({"metadata": {"name": "p", "creationTimestamp": meta::now()},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}], "nodeName": "n"},
            "status": {"phase": "Running", "containerStatuses": [{"name": "a", "ready": true, "restartCount": 2}]}});
        let t = table(&PODS, [&pod], Include::Metadata, json!({}));
        let cells = &t["rows"][0]["cells"];
        assert_eq!(cells[0], "p");
        assert_eq!(cells[1], "1/2");
        assert_eq!(cells[2], "Running");
        assert_eq!(cells[3], "2");
        assert_eq!(
            t["columnDefinitions"].as_array().unwrap().len(),
            cells.as_array().unwrap().len()
        );
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn event_row_like_kubectl_get_events() {
        let event = json!({"metadata": {"name": "p.17", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
            "type": "Normal", "reason": "Started", "message": "Started container c",
            "source": {"component": "kubelet", "host": "n"}, "count": 3,
            "firstTimestamp": meta::now(), "lastTimestamp": meta::now()});
        let t = table(&EVENTS, [&event], Include::None, json!({}));
        let cells = &t["rows"][0]["cells"];
        assert_eq!(
            t["columnDefinitions"].as_array().unwrap().len(),
            cells.as_array().unwrap().len()
        );
        assert_eq!(t["columnDefinitions"][0]["name"], "Last Seen");
        assert_eq!(cells[1], "Normal");
        assert_eq!(cells[2], "Started");
        assert_eq!(cells[3], "pod/p");
        assert_eq!(cells[4], "spec.containers{c}");
        assert_eq!(cells[5], "kubelet, n");
        assert_eq!(cells[6], "Started container c");
        assert_eq!(cells[8], "3");
        assert_eq!(cells[9], "p.17");
    }

    #[test]
    fn generic_columns_match_cells() {
        let cm = json!({"metadata": {"name": "c"}, "data": {"a": "b"}});
        let t = table(&CONFIGMAPS, [&cm], Include::None, json!({}));
        assert_eq!(t["rows"][0]["cells"][1], 1);
    }
}
