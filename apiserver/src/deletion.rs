//! Graceful deletion, after `k8s.io/apiserver/pkg/registry/rest/delete.go` (`BeforeDelete`)
//! and the pod strategy's `CheckGracefulDelete`: what a delete request does to the object
//! before the store removes it, so that the watch sees what kube-apiserver's watchers see.
//!
//! Every first delete of a pod is graceful, also with a grace period of 0: the pod is
//! written with `deletionTimestamp` and `deletionGracePeriodSeconds` (a `MODIFIED` event)
//! and, when the period is 0 and no finalizer holds it, removed right after (`DELETED`).
//! A later delete may only shorten the period, which moves the deletion timestamp back by
//! the difference. Objects without graceful deletion are marked only when finalizers hold
//! them (`markAsDeleting`).

use serde_json::Value;

use crate::field;
use crate::meta;
use crate::request::Query;
use crate::status::{Error, Result};

/// The finalizer of an object whose dependents are orphaned before it goes.
pub const ORPHAN_FINALIZER: &str = "orphan";
/// The finalizer of an object whose dependents are deleted before it goes.
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

/// What a delete does to the object's dependents (`propagationPolicy`, or the older
/// `orphanDependents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Dependents stay, without this owner (`orphan` finalizer until they are).
    Orphan,
    /// The owner goes now; the garbage collector deletes dependents later.
    Background,
    /// Dependents go first (`foregroundDeletion` finalizer until they are gone).
    Foreground,
}

/// What a delete request asked for (`metav1.DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// `gracePeriodSeconds`.
    pub grace_period_seconds: Option<i64>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`: report the outcome, change nothing.
    pub dry_run: bool,
    /// `propagationPolicy` (`orphanDependents` read as Orphan or Background).
    pub propagation: Option<Propagation>,
}

/// A `DeleteOptions` as decoded, before `ValidateDeleteOptions`.
#[derive(Debug, Default)]
struct Decoded {
    grace_period_seconds: Option<i64>,
    uid: Option<String>,
    resource_version: Option<String>,
    dry_run: Vec<String>,
    orphan_dependents: Option<bool>,
    propagation_policy: Option<String>,
}

impl DeleteOptions {
    /// Reads and validates a `DeleteOptions` body (any of its fields may be absent).
    pub fn from_json(v: &Value) -> Result<Self> {
        let string = |v: Option<&Value>| v.and_then(Value::as_str).map(str::to_string);
        Decoded {
            grace_period_seconds: v.get("gracePeriodSeconds").and_then(Value::as_i64),
            uid: string(v.pointer("/preconditions/uid")),
            resource_version: string(v.pointer("/preconditions/resourceVersion")),
            dry_run: v
                .get("dryRun")
                .and_then(Value::as_array)
                .map(|d| d.iter().map(|x| x.as_str().unwrap_or_default().to_owned()))
                .into_iter()
                .flatten()
                .collect(),
            orphan_dependents: v.get("orphanDependents").and_then(Value::as_bool),
            propagation_policy: string(v.get("propagationPolicy")),
        }
        .validate()
    }

    /// Reads and validates the options of a delete without a body, which kube-apiserver
    /// takes from the query (a body's options replace the query's entirely).
    pub fn from_query(query: &Query) -> Result<Self> {
        // The query's booleans are true unless "0" or "false" (any case), as
        // `Convert_Slice_string_To_Pointer_bool` reads them.
        let orphan_dependents = query
            .get("orphanDependents")
            .map(|v| v != "0" && !v.eq_ignore_ascii_case("false"));
        Decoded {
            grace_period_seconds: query.int("gracePeriodSeconds")?,
            dry_run: query.get("dryRun").map(str::to_owned).into_iter().collect(),
            orphan_dependents,
            propagation_policy: query.get("propagationPolicy").map(str::to_owned),
            ..Decoded::default()
        }
        .validate()
    }
}

impl Decoded {
    /// `ValidateDeleteOptions`: every error at once, as a 422 of kind `DeleteOptions`.
    fn validate(self) -> Result<DeleteOptions> {
        let mut errors = Vec::new();
        if let (Some(_), Some(policy)) = (self.orphan_dependents, &self.propagation_policy) {
            errors.push(field::Error::invalid(
                "propagationPolicy",
                field::Value::str(policy),
                "orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        let policy = match self.propagation_policy.as_deref() {
            None => None,
            Some("Orphan") => Some(Propagation::Orphan),
            Some("Background") => Some(Propagation::Background),
            Some("Foreground") => Some(Propagation::Foreground),
            Some(other) => {
                errors.push(field::Error::not_supported(
                    "propagationPolicy",
                    field::Value::str(other),
                    &["Foreground", "Background", "Orphan", "nil"],
                ));
                None
            }
        };
        let dry_run = crate::validation::dry_run(&self.dry_run).unwrap_or_else(|e| {
            errors.push(e);
            false
        });
        if !errors.is_empty() {
            return Err(Error::Invalid {
                group: "meta.k8s.io",
                kind: "DeleteOptions",
                name: String::new(),
                errors,
            });
        }
        let orphan = self.orphan_dependents.map(|orphan| match orphan {
            true => Propagation::Orphan,
            false => Propagation::Background,
        });
        Ok(DeleteOptions {
            grace_period_seconds: self.grace_period_seconds,
            uid: self.uid,
            resource_version: self.resource_version,
            dry_run,
            propagation: policy.or(orphan),
        })
    }
}

/// `deletionFinalizersForGarbageCollection`: the object's finalizers with `orphan` and
/// `foregroundDeletion` as the request's policy wants them, else as the object's own first
/// such finalizer says; `None` when the set stays the same. Kinds whose strategy does not
/// support garbage collection (events) never get them.
pub fn propagation_finalizers(
    obj: &Value,
    requested: Option<Propagation>,
    supported: bool,
) -> Option<Vec<String>> {
    if !supported {
        return None;
    }
    let current = meta::finalizers(obj);
    let own = current.iter().find_map(|f| match *f {
        ORPHAN_FINALIZER => Some(Propagation::Orphan),
        FOREGROUND_FINALIZER => Some(Propagation::Foreground),
        _ => None,
    });
    let policy = requested.or(own);
    let mut wanted: Vec<&str> = current
        .iter()
        .copied()
        .filter(|f| *f != ORPHAN_FINALIZER && *f != FOREGROUND_FINALIZER)
        .collect();
    match policy {
        Some(Propagation::Orphan) => wanted.push(ORPHAN_FINALIZER),
        Some(Propagation::Foreground) => wanted.push(FOREGROUND_FINALIZER),
        Some(Propagation::Background) | None => {}
    }
    // Compared as sets, as upstream does (`sets.NewString`).
    let same =
        wanted.iter().all(|f| current.contains(f)) && current.iter().all(|f| wanted.contains(f));
    (!same).then(|| wanted.into_iter().map(str::to_owned).collect())
}

/// What [`before_delete`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The object was marked for deletion with this grace period: write it, then remove it
    /// when the period is 0 and no finalizer holds it.
    Graceful(i64),
    /// A graceful deletion is under way and the request does not shorten it: nothing changes.
    Pending,
    /// No graceful deletion: remove the object, or mark it when finalizers hold it.
    Immediate,
}

/// `BeforeDelete` for a pod (`graceful` true) or any other object: updates `obj`'s
/// deletion metadata for a request with `requested` grace seconds.
pub fn before_delete(obj: &mut Value, graceful: bool, requested: Option<i64>) -> Decision {
    let requested = requested.map(|period| if period < 0 { 1 } else { period });
    let mut existing = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64);
    if existing.is_some_and(|g| g < 0) {
        existing = Some(1);
        meta::set(obj, "deletionGracePeriodSeconds", 1);
    }
    if !graceful {
        return Decision::Immediate;
    }
    if !meta::str_field(obj, "deletionTimestamp").is_empty() {
        let at = meta::parse_time(meta::str_field(obj, "deletionTimestamp"));
        let (Some(existing), Some(at)) = (existing.filter(|g| *g > 0), at) else {
            return Decision::Immediate;
        };
        return match requested {
            Some(period) if period < existing => {
                let at = at - chrono::Duration::seconds(existing - period);
                meta::set(obj, "deletionTimestamp", meta::time(at));
                meta::set(obj, "deletionGracePeriodSeconds", period);
                Decision::Graceful(period)
            }
            _ => Decision::Pending,
        };
    }
    let period = pod_grace_period(obj, requested);
    let at = chrono::Utc::now() + chrono::Duration::seconds(period);
    meta::set(obj, "deletionTimestamp", meta::time(at));
    meta::set(obj, "deletionGracePeriodSeconds", period);
    bump_generation(obj);
    Decision::Graceful(period)
}

/// `markAsDeleting`: an object finalizers hold gets its deletion timestamp (now, unless an
/// earlier one is set) and a grace period of 0.
pub fn mark_as_deleting(obj: &mut Value) {
    let now = chrono::Utc::now();
    let unset = meta::str_field(obj, "deletionTimestamp").is_empty();
    if unset {
        bump_generation(obj);
    }
    let at = meta::parse_time(meta::str_field(obj, "deletionTimestamp"));
    if at.is_none_or(|at| at > now) {
        meta::set(obj, "deletionTimestamp", meta::time(now));
    }
    meta::set(obj, "deletionGracePeriodSeconds", 0);
}

fn bump_generation(obj: &mut Value) {
    let generation = obj
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if generation > 0 {
        meta::set(obj, "generation", generation + 1);
    }
}

/// The grace period upstream gives a pod delete (`podStrategy.CheckGracefulDelete`): the
/// request's, else the pod's `terminationGracePeriodSeconds`, else 0 — but 0 for a pod that
/// is not scheduled or already terminal, and 1 for a negative request.
pub fn pod_grace_period(pod: &Value, requested: Option<i64>) -> i64 {
    let mut period = requested
        .or_else(|| {
            pod.pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_i64)
        })
        .unwrap_or(0);
    if meta::path_string(pod, "spec.nodeName").is_empty() {
        period = 0;
    }
    if matches!(
        meta::path_string(pod, "status.phase").as_str(),
        "Failed" | "Succeeded"
    ) {
        period = 0;
    }
    if period < 0 {
        period = 1;
    }
    period
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod() -> Value {
        json!({"metadata": {"name": "p", "generation": 1},
               "spec": {"nodeName": "n", "terminationGracePeriodSeconds": 30}})
    }

    #[test]
    fn grace_periods_follow_check_graceful_delete() {
        let p = pod();
        assert_eq!(pod_grace_period(&p, None), 30);
        assert_eq!(pod_grace_period(&p, Some(-5)), 1);
        let unscheduled = json!({"spec": {"terminationGracePeriodSeconds": 30}});
        assert_eq!(pod_grace_period(&unscheduled, Some(10)), 0);
        let mut terminal = pod();
        terminal["status"] = json!({"phase": "Succeeded"});
        assert_eq!(pod_grace_period(&terminal, Some(10)), 0);
    }

    #[test]
    fn a_first_delete_marks_the_pod_even_with_grace_zero() {
        let mut p = pod();
        assert_eq!(before_delete(&mut p, true, Some(0)), Decision::Graceful(0));
        assert_eq!(p["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(p["metadata"]["generation"], 2);
        assert!(!meta::str_field(&p, "deletionTimestamp").is_empty());
    }

    #[test]
    fn only_a_shorter_period_changes_a_deletion_and_moves_its_timestamp_back() {
        let mut p = pod();
        assert_eq!(before_delete(&mut p, true, None), Decision::Graceful(30));
        let first = meta::parse_time(meta::str_field(&p, "deletionTimestamp")).unwrap();
        assert_eq!(before_delete(&mut p, true, Some(30)), Decision::Pending);
        assert_eq!(before_delete(&mut p, true, None), Decision::Pending);
        assert_eq!(before_delete(&mut p, true, Some(0)), Decision::Graceful(0));
        let second = meta::parse_time(meta::str_field(&p, "deletionTimestamp")).unwrap();
        assert_eq!(first - second, chrono::Duration::seconds(30));
        assert_eq!(p["metadata"]["generation"], 2, "bumped once");
        // A deletion whose period is 0 already is not graceful any more.
        assert_eq!(before_delete(&mut p, true, Some(0)), Decision::Immediate);
    }

    #[test]
    fn propagation_finalizers_follow_the_request_else_the_object() {
        let held = |f: &[&str]| json!({"metadata": {"finalizers": f}});
        let none = held(&[]);
        assert_eq!(
            propagation_finalizers(&none, Some(Propagation::Orphan), true),
            Some(vec!["orphan".to_owned()])
        );
        assert_eq!(
            propagation_finalizers(&none, Some(Propagation::Orphan), false),
            None
        );
        assert_eq!(
            propagation_finalizers(&none, Some(Propagation::Background), true),
            None
        );
        assert_eq!(propagation_finalizers(&none, None, true), None);
        let mine = held(&["example.com/x", "orphan"]);
        assert_eq!(
            propagation_finalizers(&mine, Some(Propagation::Foreground), true),
            Some(vec![
                "example.com/x".to_owned(),
                "foregroundDeletion".to_owned()
            ])
        );
        assert_eq!(propagation_finalizers(&mine, None, true), None, "unchanged");
        // Both held: the first decides, the other goes.
        let both = held(&["foregroundDeletion", "orphan"]);
        assert_eq!(
            propagation_finalizers(&both, None, true),
            Some(vec!["foregroundDeletion".to_owned()])
        );
    }

    #[test]
    fn delete_options_are_validated_all_at_once() {
        let err = DeleteOptions::from_json(&json!({
            "propagationPolicy": "Sideways", "orphanDependents": true, "dryRun": ["Some"],
        }))
        .unwrap_err();
        let Error::Invalid { kind, errors, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(kind, "DeleteOptions");
        assert_eq!(errors.len(), 3);
        let orphan = DeleteOptions::from_json(&json!({"orphanDependents": false})).unwrap();
        assert_eq!(orphan.propagation, Some(Propagation::Background));
        let query = Query::parse(Some("orphanDependents=maybe&dryRun=All"));
        let options = DeleteOptions::from_query(&query).unwrap();
        assert_eq!(options.propagation, Some(Propagation::Orphan));
        assert!(options.dry_run);
    }

    #[test]
    fn marking_for_finalizers_keeps_an_earlier_timestamp() {
        let mut cm = json!({"metadata": {"name": "c", "generation": 3}});
        mark_as_deleting(&mut cm);
        let at = meta::str_field(&cm, "deletionTimestamp").to_string();
        assert_eq!(cm["metadata"]["deletionGracePeriodSeconds"], 0);
        assert_eq!(cm["metadata"]["generation"], 4);
        mark_as_deleting(&mut cm);
        assert_eq!(meta::str_field(&cm, "deletionTimestamp"), at);
        assert_eq!(cm["metadata"]["generation"], 4);
    }
}
