//! The kubelet's active deadline handler (`pkg/kubelet/active_deadline.go`): a
//! pod with `spec.activeDeadlineSeconds` that has been active on the node that
//! long, counted from `status.startTime`, is failed with `DeadlineExceeded` and
//! killed. The deadline is read from the pod at every sync, so an update that
//! lowers it on a running pod (the API allows lowering, never raising) acts at
//! once when it has already passed.

use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The pod status `reason` (and the event's reason).
pub const REASON: &str = "DeadlineExceeded";
/// The pod status `message` (and the event's message).
pub const MESSAGE: &str = "Pod was active on the node longer than the specified deadline";

/// When the pod's deadline passes: `startTime + activeDeadlineSeconds`; `None`
/// without a deadline or before the pod has a start time.
pub fn deadline(pod: &Pod, start_time: Option<&Time>) -> Option<SystemTime> {
    let seconds = pod.spec.as_ref()?.active_deadline_seconds?;
    let start = SystemTime::from(start_time?.0);
    Some(start + Duration::from_secs(u64::try_from(seconds).unwrap_or(0)))
}

/// `pastActiveDeadline`: whether the pod has been active for its deadline or longer.
pub fn is_past(pod: &Pod, start_time: Option<&Time>, now: SystemTime) -> bool {
    deadline(pod, start_time).is_some_and(|at| now >= at)
        && !crate::mutants::active(crate::mutants::Mutant::ActiveDeadlineIgnored)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(deadline: Option<i64>) -> Pod {
        let mut pod = Pod::default();
        pod.spec.get_or_insert_default().active_deadline_seconds = deadline;
        pod
    }

    #[test]
    fn counted_from_the_start_time() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        let time = Time(start.try_into().expect("a time after the epoch"));
        let p = pod(Some(5));
        assert!(!is_past(&p, Some(&time), start + Duration::from_secs(4)));
        assert!(is_past(&p, Some(&time), start + Duration::from_secs(5)));
        assert!(
            !is_past(&p, None, start + Duration::from_secs(50)),
            "no start time yet"
        );
        assert!(!is_past(
            &pod(None),
            Some(&time),
            start + Duration::from_secs(50)
        ));
        assert_eq!(
            deadline(&p, Some(&time)),
            Some(start + Duration::from_secs(5))
        );
    }
}
