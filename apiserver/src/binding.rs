//! `POST pods/{name}/binding`: how a scheduler assigns a pod to a node, with kube-apiserver's
//! semantics (`pkg/registry/core/pod/storage/storage.go`, `BindingREST`): the Binding must
//! name the pod and a node; the pod must exist (404), match the Binding's `uid` and
//! `resourceVersion` preconditions (409 on `pods`), and be unbound, not being deleted and
//! without scheduling gates (409 on `pods/binding`). The pod gets `spec.nodeName`, the
//! Binding's annotations and the `PodScheduled=True` condition in one write.

use std::sync::Arc;

use http::{HeaderMap, Response};
use serde_json::{Value, json};

use crate::handlers::{Context, named, require_namespace};
use crate::http::{self as h, Body, BodyFormat};
use crate::meta;
use crate::registry::Registry;
use crate::request::Target;
use crate::resources;
use crate::status::{Error, Result};
use crate::store::{EventType, Object};

/// The subresource, as upstream names it in conflicts.
pub const SUBRESOURCE: &str = "pods/binding";

/// `POST pods/{name}/binding`: binds the pod; `201` with a `Success` Status, as upstream.
pub fn serve(
    ctx: &Context,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    dry_run: bool,
) -> Result<Response<Body>> {
    require_namespace(target)?;
    let name = named(target)?;
    let binding = BodyFormat::from_headers(headers)?.parse(body)?;
    let namespace = meta::str_field(&binding, "namespace");
    if !namespace.is_empty() && namespace != target.ns() {
        return Err(Error::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    if meta::str_field(&binding, "name") != name {
        return Err(Error::bad_request(
            "name in URL does not match name in Binding object",
        ));
    }
    bind(&ctx.registry, target.ns(), &binding, dry_run)?;
    Ok(h::json(
        201,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}

/// `ValidatePodBinding`: upstream returns its field errors as a plain error, which leaves
/// as a 500 without a reason.
fn validate(binding: &Value) -> Result<()> {
    let mut errors = Vec::new();
    let kind = binding
        .pointer("/target/kind")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !kind.is_empty() && kind != "Node" {
        errors.push(format!(
            "target.kind: Unsupported value: {kind:?}: supported values: \"Node\", \"<empty>\""
        ));
    }
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if node.is_empty() {
        errors.push("target.name: Required value".into());
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(Error::Unknown {
            message: errors.remove(0),
        }),
        _ => Err(Error::Unknown {
            message: format!("[{}]", errors.join(", ")),
        }),
    }
}

/// Binds the pod named by `binding` (a `v1.Binding` as JSON) in `namespace` to the node of
/// its `target`. Returns the pod as stored (or, with `dry_run`, as it would be).
pub fn bind(
    registry: &Registry,
    namespace: &str,
    binding: &Value,
    dry_run: bool,
) -> Result<Arc<Object>> {
    validate(binding)?;
    let name = meta::str_field(binding, "name");
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let pods = &resources::PODS;
    registry.store.txn_mode(dry_run, |t| {
        let current = t.get(pods, namespace, name).ok_or_else(|| Error::NotFound {
            resource: pods,
            name: name.to_string(),
        })?;
        let pod = &current.value;
        let precondition = |field: &str, want: &str, have: &str| {
            Error::conflict(
                pods,
                name,
                format!(
                    "Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}"
                ),
            )
        };
        let (want_uid, uid) = (meta::str_field(binding, "uid"), meta::str_field(pod, "uid"));
        if !want_uid.is_empty() && want_uid != uid {
            return Err(precondition("UID", want_uid, uid));
        }
        let want_rv = meta::str_field(binding, "resourceVersion");
        let rv = current.rv.to_string();
        if !want_rv.is_empty() && want_rv != rv {
            return Err(precondition("ResourceVersion", want_rv, &rv));
        }
        let conflict = |detail: String| Error::SubresourceConflict {
            subresource: SUBRESOURCE,
            name: name.to_string(),
            detail,
        };
        if !meta::str_field(pod, "deletionTimestamp").is_empty() {
            return Err(conflict(format!(
                "pod {name} is being deleted, cannot be assigned to a host"
            )));
        }
        let bound = meta::path_string(pod, "spec.nodeName");
        if !bound.is_empty() {
            return Err(conflict(format!(
                "pod {name} is already assigned to node {bound:?}"
            )));
        }
        if pod
            .pointer("/spec/schedulingGates")
            .and_then(Value::as_array)
            .is_some_and(|g| !g.is_empty())
        {
            return Err(conflict(format!(
                "pod {name} has non-empty .spec.schedulingGates"
            )));
        }
        let mut pod = pod.clone();
        pod["spec"]["nodeName"] = node.into();
        if let Some(annotations) = binding
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .filter(|a| !a.is_empty())
        {
            let m = meta::metadata_mut(&mut pod);
            let target = m.entry("annotations").or_insert_with(|| json!({}));
            if !target.is_object() {
                *target = json!({});
            }
            for (k, v) in annotations {
                target[k] = v.clone();
            }
        }
        set_scheduled(&mut pod, &meta::now());
        t.put(pods, pod, EventType::Modified)
    })
}

/// `podutil.UpdatePodCondition` with `PodScheduled=True`: the transition time changes only
/// when the status does.
fn set_scheduled(pod: &mut Value, now: &str) {
    if !pod.get("status").is_some_and(Value::is_object) {
        pod["status"] = json!({});
    }
    if !pod["status"].get("conditions").is_some_and(Value::is_array) {
        pod["status"]["conditions"] = json!([]);
    }
    let Some(conditions) = pod["status"]["conditions"].as_array_mut() else {
        return;
    };
    match conditions.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) => {
            if c["status"] != "True" {
                c["lastTransitionTime"] = now.into();
            }
            c["status"] = "True".into();
            if let Some(c) = c.as_object_mut() {
                c.remove("reason");
                c.remove("message");
            }
        }
        None => conditions.push(json!({
            "type": "PodScheduled", "status": "True",
            "lastProbeTime": null, "lastTransitionTime": now,
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_with_pod() -> Registry {
        let r = Registry::new(100, String::new(), crate::Version::NEWEST).unwrap();
        let pod = json!({"metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}});
        r.create(&resources::PODS, "default", pod).unwrap();
        r
    }

    fn binding(node: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"kind": "Node", "name": node}})
    }

    #[test]
    fn binds_once_and_sets_pod_scheduled() {
        let r = registry_with_pod();
        let pod = bind(&r, "default", &binding("n1"), false).unwrap();
        assert_eq!(pod.value["spec"]["nodeName"], "n1");
        let cond = &pod.value["status"]["conditions"][0];
        assert_eq!(cond["type"], "PodScheduled");
        assert_eq!(cond["status"], "True");
        let err = bind(&r, "default", &binding("n2"), false).unwrap_err();
        assert_eq!(err.code(), 409);
        assert_eq!(
            err.to_string(),
            "Operation cannot be fulfilled on pods/binding \"p\": pod p is already assigned to node \"n1\""
        );
    }

    #[test]
    fn dry_run_and_validation_change_nothing() {
        let r = registry_with_pod();
        bind(&r, "default", &binding("n1"), true).unwrap();
        let err = bind(&r, "default", &binding(""), false).unwrap_err();
        assert_eq!((err.code(), err.reason()), (500, ""));
        assert_eq!(err.to_string(), "target.name: Required value");
        let pod = r.get(&resources::PODS, "default", "p").unwrap();
        assert!(pod.value["spec"].get("nodeName").is_none());
    }
}
