//! Create, update and delete with upstream's semantics (after `k8s.io/apiserver/pkg/registry/generic/registry/store.go`):
//! optimistic concurrency on `resourceVersion`, no-op updates that write nothing, UID
//! preconditions, graceful pod deletion, finalizers, and namespace lifecycle (no creates in a
//! missing or terminating namespace; deleting a namespace deletes what is in it).

mod delete;

use std::sync::Arc;

use serde_json::{Value, json};

use crate::managed_fields::{self, Writer};
use crate::meta;
use crate::resources::{self, Resource};
use crate::status::{Error, Result};
use crate::store::{EventType, Object, Store, Txn};
use crate::strategy::{self, Part};
use crate::version::Version;

/// The namespaces every cluster starts with.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];

/// Namespaces that can never be deleted.
pub const IMMORTAL_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

/// The outcome of a delete.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone; this is its last state.
    Gone(Arc<Object>),
    /// The object stays (graceful deletion or finalizers) with `deletionTimestamp` set.
    Pending(Arc<Object>),
    /// A dry run of a delete that would have gone through an update first: kube-apiserver
    /// answers that update's result, whatever the kind, instead of the stored object.
    DryRun(Arc<Object>),
}

/// The store plus the cluster facts the registry needs.
pub struct Registry {
    /// The object store.
    pub store: Store,
    ca_pem: String,
    /// The release whose rules apply.
    pub version: Version,
}

/// A `metadata.resourceVersion` as upstream's versioner reads it: empty is 0, anything
/// else must be an unsigned integer, and Go's parse error is the (reason-less) 500 answer.
fn parse_resource_version(rv: &str) -> Result<u64> {
    if rv.is_empty() {
        return Ok(0);
    }
    rv.parse::<u64>().map_err(|e| {
        let problem = match e.kind() {
            std::num::IntErrorKind::PosOverflow => "value out of range",
            _ => "invalid syntax",
        };
        Error::Unknown {
            message: format!("strconv.ParseUint: parsing {rv:?}: {problem}"),
        }
    })
}

fn conflict(resource: &'static Resource, name: &str, detail: String) -> Error {
    Error::conflict(resource, name, detail)
}

impl Registry {
    /// A registry over an empty store keeping `window` events per resource, with the
    /// initial namespaces and their default content, following `version`'s rules.
    pub fn new(window: usize, ca_pem: String, version: Version) -> Result<Self> {
        let registry = Registry {
            store: Store::new(window),
            ca_pem,
            version,
        };
        for ns in INITIAL_NAMESPACES {
            registry.create(
                &resources::NAMESPACES,
                "",
                json!({"metadata": {"name": ns}}),
            )?;
        }
        // Like a watch cache that starts from a list: watches from before the server
        // started are too old (410), as on kube-apiserver.
        registry.store.compact();
        Ok(registry)
    }

    /// Creates an object in `namespace` ("" for cluster-scoped).
    pub fn create(
        &self,
        resource: &'static Resource,
        namespace: &str,
        obj: Value,
    ) -> Result<Arc<Object>> {
        self.create_mode(resource, namespace, obj, false, &Writer::storage())
    }

    /// [`Registry::create`], or with `dry_run` only what it would return. `resource` is
    /// the one the client addressed (its storage resource holds the object).
    pub fn create_mode(
        &self,
        resource: &'static Resource,
        namespace: &str,
        obj: Value,
        dry_run: bool,
        writer: &Writer,
    ) -> Result<Arc<Object>> {
        let obj = strategy::prepare_for_create(resource, obj, namespace, writer, self.version)?;
        let storage = resource.storage();
        self.store
            .txn_mode(dry_run, |t| self.create_in(t, storage, obj))
    }

    fn create_in(
        &self,
        t: &mut Txn<'_>,
        resource: &'static Resource,
        obj: Value,
    ) -> Result<Arc<Object>> {
        let namespace = meta::str_field(&obj, "namespace").to_string();
        let name = meta::str_field(&obj, "name").to_string();
        if resource.namespaced {
            let ns = t
                .get(&resources::NAMESPACES, "", &namespace)
                .ok_or_else(|| Error::NotFound {
                    resource: &resources::NAMESPACES,
                    name: namespace.clone(),
                })?;
            if !meta::str_field(&ns.value, "deletionTimestamp").is_empty() {
                return Err(Error::Forbidden {
                    resource,
                    name,
                    reason: format!(
                        "unable to create new content in namespace {namespace} because it is \
                         being terminated"
                    ),
                    cause: Some((
                        "NamespaceTerminating",
                        "metadata.namespace",
                        format!("namespace {namespace} is being terminated"),
                    )),
                });
            }
        }
        if let Some(existing) = t.get(resource, &namespace, &name) {
            let deleting = !meta::str_field(&existing.value, "deletionTimestamp").is_empty();
            return Err(Error::AlreadyExists {
                resource,
                name,
                deleting,
            });
        }
        let mut obj = obj;
        if std::ptr::eq(resource, &resources::SERVICES) {
            let taken: Vec<String> = t
                .list(resource, None)
                .iter()
                .filter_map(|s| {
                    s.value
                        .pointer("/spec/clusterIP")?
                        .as_str()
                        .map(str::to_owned)
                })
                .collect();
            crate::service::allocate(&mut obj, &taken);
        }
        let created = t.put(resource, obj, EventType::Added)?;
        if std::ptr::eq(resource, &resources::NAMESPACES) {
            self.namespace_content(t, &name)?;
        }
        Ok(created)
    }

    /// What the service-account and root-CA controllers put in every new namespace.
    fn namespace_content(&self, t: &mut Txn<'_>, namespace: &str) -> Result<()> {
        let sa = json!({"metadata": {"name": "default"}});
        let controllers = Writer::named(managed_fields::CONTROLLERS);
        let sa = strategy::prepare_for_create(
            &resources::SERVICEACCOUNTS,
            sa,
            namespace,
            &controllers,
            self.version,
        )?;
        t.put(&resources::SERVICEACCOUNTS, sa, EventType::Added)?;
        let cm = json!({"metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": self.ca_pem}});
        let cm = strategy::prepare_for_create(
            &resources::CONFIGMAPS,
            cm,
            namespace,
            &controllers,
            self.version,
        )?;
        t.put(&resources::CONFIGMAPS, cm, EventType::Added)?;
        Ok(())
    }

    /// One object.
    pub fn get(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
    ) -> Result<Arc<Object>> {
        self.store
            .txn(|t| t.get(resource, namespace, name))
            .ok_or_else(|| Error::NotFound {
                resource,
                name: name.to_string(),
            })
    }

    /// Updates an object. `next` computes the new object from the stored one (a PUT body,
    /// or the result of a patch); with `None` (the object does not exist) it may return the
    /// object to create when `create` allows it (server-side apply, `AllowCreateOnUpdate`).
    /// Returns the stored object and whether it was created.
    pub fn update(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        part: Part,
        create: bool,
        next: impl FnOnce(Option<&Value>) -> Result<Value>,
    ) -> Result<(Arc<Object>, bool)> {
        self.update_mode(
            resource,
            namespace,
            name,
            part,
            create,
            (false, &Writer::storage()),
            next,
        )
    }

    /// [`Registry::update`], or with `dry_run` only what it would return.
    #[allow(clippy::too_many_arguments)]
    pub fn update_mode(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        part: Part,
        create: bool,
        (dry_run, writer): (bool, &Writer),
        next: impl FnOnce(Option<&Value>) -> Result<Value>,
    ) -> Result<(Arc<Object>, bool)> {
        // `resource` is the one the client addressed; its storage holds the object.
        let requested = resource;
        let resource = requested.storage();
        self.store.txn_mode(dry_run, |t| {
            let Some(current) = t.get(resource, namespace, name) else {
                if !create || part != Part::Main {
                    return Err(Error::NotFound {
                        resource,
                        name: name.to_string(),
                    });
                }
                let mut obj = next(None)?;
                if meta::str_field(&obj, "name").is_empty() {
                    meta::set(&mut obj, "name", name);
                }
                let obj = strategy::prepare_for_create(requested, obj, namespace, writer, self.version)?;
                return Ok((self.create_in(t, resource, obj)?, true));
            };
            let new = next(Some(&current.value))?;
            match parse_resource_version(meta::str_field(&new, "resourceVersion"))? {
                // Unset and "0" are the same to upstream's versioner: an unconditional
                // update where the strategy allows one (virtual-kubelet's status writes).
                0 if resource.unconditional_update => {}
                0 => {
                    // Upstream names the kind by its resource here.
                    return Err(Error::Invalid {
                        group: resource.group,
                        kind: resource.plural,
                        name: name.to_string(),
                        errors: vec![crate::field::Error::invalid(
                            "metadata.resourceVersion",
                            crate::field::Value::raw("0x0"),
                            "must be specified for an update",
                        )],
                    });
                }
                version if version != current.rv => {
                    return Err(conflict(
                        resource,
                        name,
                        "the object has been modified; please apply your changes to the latest version and try again".into(),
                    ));
                }
                _ => {}
            }
            let mut out = strategy::prepare_for_update(
                requested,
                &current.value,
                new,
                part,
                writer,
                self.version,
            )?;
            let is_pod = std::ptr::eq(requested.storage(), &resources::PODS);
            if is_pod && part != Part::Status && self.version.node_declared_features() {
                crate::node_declared_features::validate(t, &current.value, &out)?;
            }
            if part == Part::Resize {
                crate::pod_resize_admission::validate(t, &current.value, &out)?;
            }
            meta::set(&mut out, "resourceVersion", current.rv.to_string());
            if out == current.value {
                // Upstream's GuaranteedUpdate writes nothing for a no-op update.
                return Ok((current, false));
            }
            let finalized = !meta::str_field(&out, "deletionTimestamp").is_empty()
                && !meta::has_finalizers(&out)
                && out
                    .pointer("/metadata/deletionGracePeriodSeconds")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
                    == 0;
            if finalized {
                // Upstream's errEmptiedFinalizers: the update is not written; the stored
                // object is deleted (DELETED carries it as stored), the caller gets its update.
                t.remove(resource, namespace, name)?;
                self.finish_namespace(t, namespace)?;
                return Ok((Object::new(out, current.rv)?, false));
            }
            Ok((t.put(resource, out, EventType::Modified)?, false))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::deletion::DeleteOptions;
    use crate::resources::{CONFIGMAPS, PODS};

    fn registry() -> Registry {
        Registry::new(100, "CA".into(), Version::NEWEST).unwrap()
    }

    fn pod(node: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = n.into();
        }
        p
    }

    #[test]
    fn scheduled_pods_are_deleted_gracefully() {
        let r = registry();
        r.create(&PODS, "default", pod(Some("n1"))).unwrap();
        let d = r
            .delete(&PODS, "default", "p", &DeleteOptions::default())
            .unwrap();
        let Deleted::Pending(obj) = d else {
            panic!("deleted at once")
        };
        assert_eq!(obj.value["metadata"]["deletionGracePeriodSeconds"], 30);
        let opts = DeleteOptions {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        assert!(matches!(
            r.delete(&PODS, "default", "p", &opts).unwrap(),
            Deleted::Gone(_)
        ));
    }

    #[test]
    fn unscheduled_pods_go_at_once() {
        let r = registry();
        r.create(&PODS, "default", pod(None)).unwrap();
        assert!(matches!(
            r.delete(&PODS, "default", "p", &DeleteOptions::default())
                .unwrap(),
            Deleted::Gone(_)
        ));
    }

    #[test]
    fn finalizers_hold_until_emptied() {
        let r = registry();
        let cm = json!({"metadata": {"name": "c", "finalizers": ["x/y"]}});
        r.create(&CONFIGMAPS, "default", cm).unwrap();
        assert!(matches!(
            r.delete(&CONFIGMAPS, "default", "c", &DeleteOptions::default())
                .unwrap(),
            Deleted::Pending(_)
        ));
        r.update(&CONFIGMAPS, "default", "c", Part::Main, false, |cur| {
            let mut v = cur.cloned().unwrap();
            v["metadata"]["finalizers"] = json!([]);
            Ok(v)
        })
        .unwrap();
        assert_eq!(r.get(&CONFIGMAPS, "default", "c").unwrap_err().code(), 404);
    }

    #[test]
    fn stale_versions_and_uids_conflict() {
        let r = registry();
        let cm = r
            .create(&CONFIGMAPS, "default", json!({"metadata": {"name": "c"}}))
            .unwrap();
        let stale = cm.value.clone();
        r.update(&CONFIGMAPS, "default", "c", Part::Main, false, |_| {
            let mut v = stale.clone();
            v["data"] = json!({"a": "b"});
            Ok(v)
        })
        .unwrap();
        let err = r
            .update(&CONFIGMAPS, "default", "c", Part::Main, false, |_| {
                Ok(stale.clone())
            })
            .unwrap_err();
        assert_eq!(err.code(), 409);
        let opts = DeleteOptions {
            uid: Some("nope".into()),
            ..Default::default()
        };
        assert_eq!(
            r.delete(&CONFIGMAPS, "default", "c", &opts)
                .unwrap_err()
                .code(),
            409
        );
    }

    #[test]
    fn namespaces_delete_their_content() {
        let r = registry();
        r.create(
            &resources::NAMESPACES,
            "",
            json!({"metadata": {"name": "x"}}),
        )
        .unwrap();
        r.create(&CONFIGMAPS, "x", json!({"metadata": {"name": "c"}}))
            .unwrap();
        let d = r
            .delete(&resources::NAMESPACES, "", "x", &DeleteOptions::default())
            .unwrap();
        assert!(matches!(d, Deleted::Gone(_)));
        assert_eq!(
            r.create(&CONFIGMAPS, "x", json!({"metadata": {"name": "c"}}))
                .unwrap_err()
                .code(),
            404
        );
        let opts = DeleteOptions::default();
        let err = r.delete(&resources::NAMESPACES, "", "default", &opts);
        assert_eq!(err.unwrap_err().code(), 403, "immortal namespace");
    }

    #[test]
    fn dry_run_changes_nothing() {
        let r = registry();
        let rv = r.store.rv();
        let cm = json!({"metadata": {"name": "c"}});
        let out = r
            .create_mode(&CONFIGMAPS, "default", cm.clone(), true, &Writer::storage())
            .unwrap();
        assert!(out.value["metadata"]["uid"].is_string());
        assert!(out.value["metadata"].get("resourceVersion").is_none());
        assert_eq!(r.get(&CONFIGMAPS, "default", "c").unwrap_err().code(), 404);
        let stored = r.create(&CONFIGMAPS, "default", cm).unwrap();
        let opts = DeleteOptions {
            dry_run: true,
            ..Default::default()
        };
        assert!(matches!(
            r.delete(&CONFIGMAPS, "default", "c", &opts).unwrap(),
            Deleted::Gone(_)
        ));
        let (out, _) = r
            .update_mode(
                &CONFIGMAPS,
                "default",
                "c",
                Part::Main,
                false,
                (true, &Writer::storage()),
                |cur| {
                    let mut v = cur.cloned().unwrap();
                    v["data"] = json!({"a": "b"});
                    Ok(v)
                },
            )
            .unwrap();
        assert_eq!(out.value["data"]["a"], "b");
        assert_eq!(out.rv, stored.rv);
        let now = r.get(&CONFIGMAPS, "default", "c").unwrap();
        assert_eq!(now.rv, stored.rv);
        assert!(now.value.get("data").is_none());
        assert_eq!(r.store.rv(), rv + 1, "only the real create wrote");
    }
}
