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

use crate::meta;

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
