//! The part of kube-controller-manager's garbage collector that delete requests rely on.
//!
//! kube-apiserver gives an object deleted with `propagationPolicy: Orphan` the `orphan`
//! finalizer and one deleted with `Foreground` the `foregroundDeletion` finalizer (see
//! [`crate::deletion::propagation_finalizers`]); only the garbage collector removes them.
//! This controller does what it does for such owners: for `orphan` it removes the owner's
//! reference from every dependent, then the finalizer; for `foregroundDeletion` it deletes
//! the dependents (in the foreground when they have dependents of their own) and removes the
//! finalizer once no dependent that blocks owner deletion (`blockOwnerDeletion`) is left.
//!
//! Not done: the background cascade — dependents whose owners are gone are not collected.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::broadcast::error::RecvError;

use crate::deletion::{DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER, Propagation};
use crate::handlers::Context;
use crate::managed_fields::{self, Writer};
use crate::meta;
use crate::registry::Registry;
use crate::resources::{self, Resource};
use crate::store::{EventType, Object};
use crate::strategy::Part;

/// Follows every change to the store until `stop` changes, collecting whenever an owner
/// waiting for it, or one of its dependents, changes.
pub async fn run(ctx: Arc<Context>, mut stop: tokio::sync::watch::Receiver<u64>) {
    let registry = &ctx.registry;
    let mut events = registry.store.subscribe();
    // The uids of owners still waiting for this controller.
    let mut waiting = HashSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => return,
            event = events.recv() => {
                let relevant = match &event {
                    Ok(e) => {
                        waits(&e.object)
                            || (!waiting.is_empty()
                                && (e.kind == EventType::Deleted
                                    || owners(&e.object.value).any(|o| waiting.contains(o))))
                    }
                    Err(RecvError::Lagged(_)) => true,
                    Err(RecvError::Closed) => return,
                };
                if relevant {
                    waiting = collect(registry);
                }
            }
        }
    }
}

/// Whether `obj` is being deleted and waits for the garbage collector.
fn waits(obj: &Object) -> bool {
    !meta::str_field(&obj.value, "deletionTimestamp").is_empty()
        && meta::finalizers(&obj.value)
            .iter()
            .any(|f| *f == ORPHAN_FINALIZER || *f == FOREGROUND_FINALIZER)
}

fn owner_references(obj: &Value) -> impl Iterator<Item = &Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

fn owners(obj: &Value) -> impl Iterator<Item = &str> {
    owner_references(obj).filter_map(|r| r["uid"].as_str())
}

/// One pass over every owner waiting for the collector; answers the uids still waiting.
pub fn collect(registry: &Registry) -> HashSet<String> {
    let all: Vec<(&'static Resource, Arc<Object>)> = registry.store.txn(|t| {
        resources::ALL
            .iter()
            .filter(|r| !r.converted())
            .flat_map(|r| t.list(r, None).into_iter().map(move |o| (*r, o)))
            .collect()
    });
    let mut waiting = HashSet::new();
    for (resource, owner) in all.iter().filter(|(_, o)| waits(o)) {
        let uid = meta::str_field(&owner.value, "uid");
        let dependents: Vec<_> = all
            .iter()
            .filter(|(_, d)| owners(&d.value).any(|o| o == uid))
            .collect();
        let finalizers = meta::finalizers(&owner.value);
        let mut done = Vec::new();
        if finalizers.contains(&ORPHAN_FINALIZER) {
            for (r, d) in &dependents {
                let orphaned = rewrite(registry, r, d, |v| {
                    if let Some(refs) = v
                        .pointer_mut("/metadata/ownerReferences")
                        .and_then(Value::as_array_mut)
                    {
                        refs.retain(|o| o["uid"] != uid);
                    }
                });
                if let Err(e) = orphaned {
                    tracing::debug!(error = %e, dependent = d.name(), "orphaning failed");
                }
            }
            done.push(ORPHAN_FINALIZER);
        }
        if finalizers.contains(&FOREGROUND_FINALIZER) {
            let mut blocked = false;
            for (r, d) in &dependents {
                if meta::str_field(&d.value, "deletionTimestamp").is_empty() {
                    let d_uid = meta::str_field(&d.value, "uid");
                    let has_own = all
                        .iter()
                        .any(|(_, x)| owners(&x.value).any(|o| o == d_uid));
                    let options = DeleteOptions {
                        propagation: Some(if has_own {
                            Propagation::Foreground
                        } else {
                            Propagation::Background
                        }),
                        ..DeleteOptions::default()
                    };
                    let _ = registry.delete(r, d.namespace(), d.name(), &options);
                }
                let blocks = owner_references(&d.value)
                    .any(|o| o["uid"] == uid && o["blockOwnerDeletion"] == true);
                blocked |= blocks && registry.get(r, d.namespace(), d.name()).is_ok();
            }
            if blocked {
                waiting.insert(uid.to_owned());
            } else {
                done.push(FOREGROUND_FINALIZER);
            }
        }
        if done.is_empty() {
            continue;
        }
        let released = rewrite(registry, resource, owner, |v| {
            if let Some(f) = v
                .pointer_mut("/metadata/finalizers")
                .and_then(Value::as_array_mut)
            {
                f.retain(|x| !x.as_str().is_some_and(|x| done.contains(&x)));
            }
        });
        if let Err(e) = released {
            tracing::debug!(error = %e, owner = owner.name(), "removing a finalizer failed");
        }
    }
    waiting
}

/// Updates `obj` as the garbage collector (kube-controller-manager's manager name).
fn rewrite(
    registry: &Registry,
    resource: &'static Resource,
    obj: &Object,
    change: impl FnOnce(&mut Value),
) -> crate::status::Result<()> {
    let controller = Writer::named(managed_fields::CONTROLLERS);
    let update = |cur: Option<&Value>| {
        let mut v = cur.cloned().unwrap_or_default();
        change(&mut v);
        Ok(v)
    };
    registry
        .update_mode(
            resource,
            obj.namespace(),
            obj.name(),
            Part::Main,
            false,
            (false, &controller),
            update,
        )
        .map(|_| ())
}
