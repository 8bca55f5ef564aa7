//! Deletion with upstream's semantics (`Store.Delete`): preconditions, graceful deletion,
//! finalizers and the garbage collector's propagation finalizers, dry runs, and the
//! namespace lifecycle (a namespace's content goes with it; it goes once empty).

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Deleted, IMMORTAL_NAMESPACES, Registry};
use crate::deletion::{self, DeleteOptions};
use crate::meta;
use crate::resources::{self, Resource};
use crate::status::{Error, Result};
use crate::store::{EventType, Object, Txn};

impl Registry {
    /// Deletes an object with upstream's graceful-deletion and finalizer rules.
    pub fn delete(
        &self,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        self.store.txn_mode(options.dry_run, |t| {
            self.delete_in(t, resource, namespace, name, options)
        })
    }

    fn delete_in(
        &self,
        t: &mut Txn<'_>,
        resource: &'static Resource,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted> {
        let current = t
            .get(resource, namespace, name)
            .ok_or_else(|| Error::NotFound {
                resource,
                name: name.to_string(),
            })?;
        // `rest.BeforeDelete` names the object by its kind.
        let precondition = |detail: String| Error::Conflict {
            group: resource.group,
            on: resource.kind,
            name: name.to_string(),
            detail,
        };
        let uid = meta::str_field(&current.value, "uid");
        if let Some(want) = options.uid.as_deref().filter(|u| *u != uid) {
            return Err(precondition(format!(
                "the UID in the precondition ({want}) does not match the UID in record ({uid}). \
                 The object might have been deleted and then recreated"
            )));
        }
        let rv = current.rv.to_string();
        if let Some(want) = options.resource_version.as_deref().filter(|r| *r != rv) {
            return Err(precondition(format!(
                "the ResourceVersion in the precondition ({want}) does not match the \
                 ResourceVersion in record ({rv}). The object might have been modified"
            )));
        }
        if std::ptr::eq(resource, &resources::NAMESPACES) {
            return self.delete_namespace(t, current);
        }
        let mut obj = current.value.clone();
        let graceful = std::ptr::eq(resource, &resources::PODS);
        let decision = deletion::before_delete(&mut obj, graceful, options.grace_period_seconds);
        // Whether upstream goes through `updateForGracefulDeletionAndFinalizers`, whose
        // dry-run result is the answer even when the object would be deleted.
        let mut updated = matches!(decision, deletion::Decision::Graceful(_))
            || meta::has_finalizers(&current.value);
        if decision != deletion::Decision::Pending {
            // Finalizers cannot change once a graceful deletion is under way.
            let collected = !std::ptr::eq(resource, &resources::EVENTS);
            if let Some(f) = deletion::propagation_finalizers(&obj, options.propagation, collected)
            {
                obj["metadata"]["finalizers"] = json!(f);
                updated = true;
            }
        }
        match decision {
            deletion::Decision::Pending => return Ok(Deleted::Pending(current)),
            deletion::Decision::Graceful(period) => {
                let held = period > 0 || meta::has_finalizers(&obj);
                let marked = t.put(resource, obj, EventType::Modified)?;
                if held {
                    return Ok(Deleted::Pending(marked));
                }
                if options.dry_run {
                    return Ok(Deleted::DryRun(marked));
                }
            }
            deletion::Decision::Immediate if meta::has_finalizers(&obj) => {
                deletion::mark_as_deleting(&mut obj);
                if obj == current.value {
                    return Ok(Deleted::Pending(current));
                }
                return Ok(Deleted::Pending(t.put(
                    resource,
                    obj,
                    EventType::Modified,
                )?));
            }
            deletion::Decision::Immediate if updated && options.dry_run => {
                // The aborted update (`errDeleteNow`) leaves its result empty, and a dry
                // run answers that: an object of the kind with nothing set.
                let mut empty =
                    json!({"kind": resource.kind, "apiVersion": resource.api_version()});
                crate::wire::encode(resource, &mut empty);
                // Go's zero ObjectMeta as 1.28 encodes it (1.36's `omitzero` drops it).
                meta::set(&mut empty, "creationTimestamp", Value::Null);
                return Ok(Deleted::DryRun(Object::new(empty, 0)?));
            }
            deletion::Decision::Immediate => {}
        }
        let gone = t
            .remove(resource, namespace, name)?
            .ok_or_else(|| Error::NotFound {
                resource,
                name: name.to_string(),
            })?;
        self.finish_namespace(t, namespace)?;
        Ok(Deleted::Gone(gone))
    }

    /// Marks a namespace `Terminating`, deletes its content (pods on a node gracefully),
    /// and removes it once empty.
    fn delete_namespace(&self, t: &mut Txn<'_>, current: Arc<Object>) -> Result<Deleted> {
        let name = current.name().to_string();
        if IMMORTAL_NAMESPACES.contains(&name.as_str()) {
            // The NamespaceLifecycle admission plugin's immortal namespaces.
            return Err(Error::Forbidden {
                resource: &resources::NAMESPACES,
                name,
                reason: "this namespace may not be deleted".into(),
                cause: None,
            });
        }
        if !meta::str_field(&current.value, "deletionTimestamp").is_empty() {
            return Ok(Deleted::Pending(current));
        }
        let mut obj = current.value.clone();
        // The namespace registry's own delete: a deletion time and the Terminating
        // phase, no grace period.
        meta::set(&mut obj, "deletionTimestamp", meta::now());
        obj["status"] = json!({"phase": "Terminating"});
        let marked = t.put(&resources::NAMESPACES, obj, EventType::Modified)?;
        for resource in resources::ALL.iter().copied().filter(|r| r.namespaced) {
            for o in t.list(resource, Some(&name)) {
                let child = o.name().to_string();
                // Errors are per object; the namespace keeps terminating either way.
                let _ = self.delete_in(t, resource, &name, &child, &DeleteOptions::default());
            }
        }
        match t.get(&resources::NAMESPACES, "", &name) {
            Some(latest) => Ok(Deleted::Pending(latest)),
            None => Ok(Deleted::Gone(marked)),
        }
    }

    /// Removes a terminating namespace once nothing is left in it.
    pub(super) fn finish_namespace(&self, t: &mut Txn<'_>, namespace: &str) -> Result<()> {
        if namespace.is_empty() {
            return Ok(());
        }
        let terminating = t
            .get(&resources::NAMESPACES, "", namespace)
            .is_some_and(|ns| !meta::str_field(&ns.value, "deletionTimestamp").is_empty());
        if terminating && t.namespace_is_empty(namespace) {
            t.remove(&resources::NAMESPACES, "", namespace)?;
        }
        Ok(())
    }
}
