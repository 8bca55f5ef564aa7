//! Per-resource write rules, after upstream's registry strategies (`PrepareForCreate`,
//! `PrepareForUpdate`, defaulting and the validation a node agent can run into).

use serde_json::{Value, json};

use crate::defaults;
use crate::managed_fields::{self, Operation, Writer};
use crate::meta;
use crate::resources::{self, Resource};
use crate::status::{Error, Result};
use crate::validate;
use crate::version::Version;
use crate::wire;

mod pod;

pub(crate) use pod::qos_class as pod_qos_class;

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The main resource: everything but `status` (for resources with a status subresource).
    Main,
    /// The `status` subresource: only `status`.
    Status,
    /// `pods/resize`: only the containers' resources and resize policies (and the
    /// pod-level resources).
    Resize,
}

impl Part {
    /// The subresource a write of this part goes through, as managed fields record it.
    pub fn subresource(self) -> Option<&'static str> {
        match self {
            Part::Main => None,
            Part::Status => Some("status"),
            Part::Resize => Some("resize"),
        }
    }
}

/// Refuses a body of another kind or API version, in the decoder's words (before any
/// other check looks at the body).
pub fn check_type(resource: &Resource, obj: &Value) -> Result<()> {
    let api_version = resource.api_version();
    match obj.get("apiVersion").and_then(Value::as_str) {
        Some(v) if !v.is_empty() && v != api_version => {
            return Err(Error::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({api_version})"
            )));
        }
        _ => {}
    }
    match obj.get("kind").and_then(Value::as_str) {
        Some("Status") if resource.kind != "Status" => {
            Err(Error::bad_request(status_body(resource, obj)))
        }
        Some(k) if !k.is_empty() && k != resource.kind => {
            Err(Error::bad_request(other_kind(resource, k)))
        }
        _ => Ok(()),
    }
}

/// A Status sent where an object belongs (a client writing back the answer to a failed
/// read): it is decoded as a Status first, so its fields' types are checked before the
/// conversion fails.
fn status_body(resource: &Resource, obj: &Value) -> String {
    for (field, want) in [
        ("status", "string"),
        ("message", "string"),
        ("reason", "string"),
        ("code", "int32"),
    ] {
        let wrong = match obj.get(field) {
            None | Some(Value::Null) => false,
            Some(v) => (want == "string" && !v.is_string()) || (want == "int32" && !v.is_number()),
        };
        if wrong {
            return format!(
                "Status in version \"{}\" cannot be handled as a {}: json: cannot unmarshal {} \
                 into Go struct field Status.{field} of type {want}",
                resource.version,
                resource.kind,
                crate::go_json::kind_of(&obj[field])
            );
        }
    }
    other_kind(resource, "Status")
}

fn ensure_type(resource: &Resource, obj: &mut Value) -> Result<()> {
    let map = obj.as_object_mut().ok_or_else(|| {
        Error::bad_request(format!(
            "the body of the request is not a JSON object of kind {}",
            resource.kind
        ))
    })?;
    check_type(resource, &Value::Object(map.clone()))?;
    let api_version = resource.api_version();
    map.insert("apiVersion".into(), api_version.into());
    map.insert("kind".into(), resource.kind.into());
    Ok(())
}

/// The decoder's words for a body of another kind: a kind of the same group version
/// cannot be converted, any other kind is not registered there.
fn other_kind(resource: &Resource, kind: &str) -> String {
    const CORE_KINDS: &[&str] = &[
        "Binding",
        "ComponentStatus",
        "ConfigMap",
        "Endpoints",
        "Event",
        "LimitRange",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
        "PodTemplate",
        "ReplicationController",
        "ResourceQuota",
        "Secret",
        "Service",
        "ServiceAccount",
    ];
    let version = resource.api_version();
    // `Status` (and the other meta kinds) are registered in every group version.
    let known = resources::ALL
        .iter()
        .any(|r| r.kind == kind && r.api_version() == version)
        || (resource.group.is_empty() && CORE_KINDS.contains(&kind))
        || [
            "Status",
            "DeleteOptions",
            "ListOptions",
            "GetOptions",
            "CreateOptions",
        ]
        .contains(&kind);
    if known {
        let internal = if resource.group.is_empty() {
            "core"
        } else {
            resource.group.split('.').next().unwrap_or(resource.group)
        };
        format!(
            "{kind} in version \"{v}\" cannot be handled as a {target}: converting ({v}.{kind}) to \
             ({internal}.{target}): unknown conversion",
            v = resource.version,
            target = resource.kind
        )
    } else {
        format!(
            "no kind \"{kind}\" is registered for version \"{version}\" in scheme \
             \"pkg/api/legacyscheme/scheme.go:30\""
        )
    }
}

/// Checks the body's namespace against the URL's, filling it in when absent.
fn ensure_namespace(resource: &Resource, obj: &mut Value, namespace: &str) -> Result<()> {
    let body_ns = meta::str_field(obj, "namespace").to_string();
    if resource.namespaced {
        if !body_ns.is_empty() && body_ns != namespace {
            return Err(Error::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        meta::set(obj, "namespace", namespace);
    } else {
        meta::metadata_mut(obj).remove("namespace");
    }
    Ok(())
}

/// Turns a create request body into the object to store: server-set metadata, defaults,
/// validation. `namespace` is the URL's ("" for cluster-scoped).
pub fn prepare_for_create(
    requested: &Resource,
    mut obj: Value,
    namespace: &str,
    writer: &Writer,
    version: Version,
) -> Result<Value> {
    // Objects of a converted resource (events.k8s.io/v1 events) arrive in their storage
    // shape; only validation needs to know which API they came through.
    let resource = requested.storage();
    ensure_type(resource, &mut obj)?;
    ensure_namespace(resource, &mut obj, namespace)?;
    let mut name = meta::str_field(&obj, "name").to_string();
    let generate = meta::str_field(&obj, "generateName").to_string();
    if name.is_empty() && !generate.is_empty() {
        name = format!("{generate}{}", meta::name_suffix());
        meta::set(&mut obj, "name", name.clone());
    }
    let m = meta::metadata_mut(&mut obj);
    let fields = [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
    ];
    for field in fields {
        m.remove(field);
    }
    // An apply that creates brings its ownership; any other create starts afresh.
    if writer.operation != Operation::Apply {
        m.remove("managedFields");
    }
    m.insert("uid".into(), meta::new_uid().into());
    m.insert("creationTimestamp".into(), meta::now().into());
    // Of the kinds served here only pods get a `generation`, from 1.33 (ReplicationControllers,
    // PodTemplates and the apps/batch kinds have one too): a client's value is replaced or
    // dropped as upstream does.
    if std::ptr::eq(resource, &resources::PODS) && version.pods_have_generation() {
        meta::set(&mut obj, "generation", 1);
    } else {
        meta::metadata_mut(&mut obj).remove("generation");
    }
    defaults::apply(resource, &mut obj);
    // The field manager sees the decoded request: defaults, no admission, no strategy.
    managed_fields::update(requested, None, &mut obj, writer);
    if std::ptr::eq(resource, &resources::PODS) {
        pod::create(&mut obj)?;
    } else if std::ptr::eq(resource, &resources::NODES) {
        defaults::admit_node(&mut obj);
    } else if std::ptr::eq(resource, &resources::NAMESPACES) {
        obj["spec"] = json!({"finalizers": ["kubernetes"]});
        obj["status"] = json!({"phase": "Active"});
    }
    validate::create(requested, &obj, version)?;
    wire::encode(resource, &mut obj);
    Ok(obj)
}

/// Merges an update into the stored object the way upstream's strategies do: a main write
/// keeps the stored status (for resources with a status subresource), a status write keeps
/// everything but status, server-owned metadata never changes, and `generation` bumps when
/// `spec` changes.
pub fn prepare_for_update(
    requested: &Resource,
    old: &Value,
    mut new: Value,
    part: Part,
    writer: &Writer,
    version: Version,
) -> Result<Value> {
    let resource = requested.storage();
    ensure_type(resource, &mut new)?;
    defaults::apply(resource, &mut new);
    let writer = writer.clone().through(part.subresource());
    managed_fields::update(requested, Some(old), &mut new, &writer);
    let mut out = match part {
        // The status strategies of upstream's core kinds keep the spec as stored and
        // take everything else from the request, metadata included: labels, annotations
        // and finalizers written through `/status` are stored (a blind status overwrite
        // from a stale copy takes them back). A pod's owner references stay as stored.
        Part::Status => {
            let mut out = new;
            match old.get("spec") {
                Some(spec) => out["spec"] = spec.clone(),
                None => {
                    if let Some(m) = out.as_object_mut() {
                        m.remove("spec");
                    }
                }
            }
            if std::ptr::eq(resource, &resources::PODS) {
                let m = meta::metadata_mut(&mut out);
                match old.pointer("/metadata/ownerReferences") {
                    Some(refs) => m.insert("ownerReferences".into(), refs.clone()),
                    None => m.remove("ownerReferences"),
                };
            }
            out
        }
        Part::Resize => pod::resize(old, new),
        Part::Main => {
            if resource.status_subresource {
                match old.get("status") {
                    Some(status) => new["status"] = status.clone(),
                    None => {
                        if let Some(m) = new.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            if std::ptr::eq(resource, &resources::NAMESPACES) {
                new["spec"] = old.get("spec").cloned().unwrap_or(json!({}));
            }
            new
        }
    };
    let old_meta = old.get("metadata").cloned().unwrap_or(json!({}));
    let m = meta::metadata_mut(&mut out);
    // `rest.BeforeUpdate`: the stored uid when none is given (another one fails
    // validation), the stored grace period when none is given; the rest never changes.
    for (field, only_if_unset) in [
        ("uid", true),
        ("deletionGracePeriodSeconds", true),
        ("creationTimestamp", false),
        ("name", false),
        ("namespace", false),
        ("deletionTimestamp", false),
        ("generateName", false),
        ("generation", false),
    ] {
        let unset = m.get(field).is_none_or(|v| v.is_null() || v == "");
        if only_if_unset && !unset {
            continue;
        }
        match old_meta.get(field) {
            Some(v) => m.insert(field.to_string(), v.clone()),
            None => m.remove(field),
        };
    }
    m.remove("selfLink");
    if std::ptr::eq(resource, &resources::PODS) && part == Part::Main {
        defaults::admit_pod_update(&mut out);
    }
    if std::ptr::eq(resource, &resources::PODS) && version.pods_have_generation() {
        pod::generation(old, &mut out, part);
    }
    validate::update(resource, old, &out, part, version)?;
    wire::encode(resource, &mut out);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{CONFIGMAPS, NODES, PODS};

    fn pod() -> Value {
        json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    #[test]
    fn pod_create_sets_server_fields_and_defaults() {
        let p =
            prepare_for_create(&PODS, pod(), "ns", &Writer::storage(), Version::NEWEST).unwrap();
        assert_eq!(p["metadata"]["namespace"], "ns");
        assert_eq!(p["metadata"]["generation"], 1, "from 1.33");
        let old =
            prepare_for_create(&PODS, pod(), "ns", &Writer::storage(), Version::V1_28).unwrap();
        assert!(
            old["metadata"].get("generation").is_none(),
            "1.28 pods have none"
        );
        assert_eq!(p["spec"]["restartPolicy"], "Always");
        assert_eq!(p["spec"]["containers"][0]["imagePullPolicy"], "Always");
        assert_eq!(p["status"]["phase"], "Pending");
        assert_eq!(p["status"]["qosClass"], "BestEffort");
        assert_eq!(p["kind"], "Pod");
    }

    #[test]
    fn generate_name_and_missing_name() {
        let cm = json!({"metadata": {"generateName": "x-"}});
        let cm =
            prepare_for_create(&CONFIGMAPS, cm, "ns", &Writer::storage(), Version::NEWEST).unwrap();
        assert!(meta::str_field(&cm, "name").starts_with("x-"));
        let err = prepare_for_create(
            &CONFIGMAPS,
            json!({"metadata": {}}),
            "ns",
            &Writer::storage(),
            Version::NEWEST,
        )
        .unwrap_err();
        assert_eq!(err.code(), 422);
    }

    #[test]
    fn namespace_mismatch_is_bad_request() {
        let cm = json!({"metadata": {"name": "a", "namespace": "other"}});
        assert_eq!(
            prepare_for_create(&CONFIGMAPS, cm, "ns", &Writer::storage(), Version::NEWEST)
                .unwrap_err()
                .code(),
            400
        );
    }

    #[test]
    fn main_write_keeps_status_and_status_write_keeps_spec() {
        let old = json!({"metadata": {"name": "n", "uid": "u", "generation": 1},
                         "spec": {"unschedulable": false}, "status": {"phase": "A"}});
        let new = json!({"metadata": {"name": "n"}, "spec": {"unschedulable": true}, "status": {"phase": "B"}});
        let out = prepare_for_update(
            &NODES,
            &old,
            new.clone(),
            Part::Main,
            &Writer::storage(),
            Version::NEWEST,
        )
        .unwrap();
        assert_eq!(out["status"]["phase"], "A");
        assert_eq!(
            out["metadata"]["generation"], 1,
            "nodes keep what they have"
        );
        assert_eq!(out["metadata"]["uid"], "u");
        let out = prepare_for_update(
            &NODES,
            &old,
            new,
            Part::Status,
            &Writer::storage(),
            Version::NEWEST,
        )
        .unwrap();
        assert_eq!(out["status"]["phase"], "B");
        // The stored spec: `false` is a zero value its Go field leaves out.
        assert_eq!(out["spec"].get("unschedulable"), None);
        assert_eq!(out["metadata"]["generation"], 1);
    }

    #[test]
    fn pod_spec_is_mostly_immutable() {
        let old =
            prepare_for_create(&PODS, pod(), "ns", &Writer::storage(), Version::NEWEST).unwrap();
        let mut new = old.clone();
        new["spec"]["containers"][0]["image"] = "busybox:2".into();
        assert!(
            prepare_for_update(
                &PODS,
                &old,
                new.clone(),
                Part::Main,
                &Writer::storage(),
                Version::NEWEST
            )
            .is_ok()
        );
        new["spec"]["nodeName"] = "n1".into();
        assert_eq!(
            prepare_for_update(
                &PODS,
                &old,
                new,
                Part::Main,
                &Writer::storage(),
                Version::NEWEST
            )
            .unwrap_err()
            .code(),
            422
        );
    }
}
