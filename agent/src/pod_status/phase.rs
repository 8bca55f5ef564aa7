//! `getPhase`: the pod phase from the container statuses and the restart policies (the
//! pod's, and from 1.35 each container's own, `ContainerRestartRules`).

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::*;

/// How one container counts toward the phase, from its status.
enum Counted {
    Running,
    /// Terminated now, or waiting to restart after a termination: the exit code.
    Stopped(i32),
    /// Waiting for its first start.
    Waiting,
    Unknown,
}

fn count(status: Option<&ContainerStatus>) -> Counted {
    let Some(s) = status else {
        return Counted::Unknown;
    };
    let state = s.state.as_ref();
    if state.is_some_and(|st| st.running.is_some()) {
        Counted::Running
    } else if let Some(t) = state.and_then(|st| st.terminated.as_ref()) {
        Counted::Stopped(t.exit_code)
    } else if state.is_some_and(|st| st.waiting.is_some()) {
        match s.last_state.as_ref().and_then(|l| l.terminated.as_ref()) {
            Some(t) => Counted::Stopped(t.exit_code),
            None => Counted::Waiting,
        }
    } else {
        Counted::Unknown
    }
}

/// `getPhase`: the pod phase from the container statuses. `initialized`: an app
/// container of the current sandbox exists (`HasAnyActiveRegularContainerStarted`), so
/// a restarting sidecar does not send the pod back to `Pending`.
pub fn get_phase(
    pod: &Pod,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
    terminal: bool,
    initialized: bool,
) -> &'static str {
    let (mut pending_regular_init, mut pending_sidecars, mut failed_init) = (0, 0, 0);
    let (mut unknown, mut running, mut waiting, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    // Stopped containers that will not be started again (`ContainerShouldRestart`).
    let mut stopped_for_good = 0;
    for c in init_containers(pod) {
        let status = init.iter().find(|s| s.name == c.name);
        if is_restartable_init_container(c) {
            // A sidecar counts as running while it runs and is pending until it has
            // started; once stopped it no longer counts (it does not end the pod).
            match count(status) {
                Counted::Running => {
                    if status.and_then(|s| s.started) != Some(true) {
                        pending_sidecars += 1;
                    }
                    running += 1;
                }
                Counted::Stopped(_) => {}
                Counted::Waiting => {
                    pending_sidecars += 1;
                    waiting += 1;
                }
                Counted::Unknown => {
                    pending_sidecars += 1;
                    unknown += 1;
                }
            }
            continue;
        }
        match count(status) {
            Counted::Stopped(0) => {}
            Counted::Stopped(code) => {
                if !container_should_restart(c, pod, code) {
                    failed_init += 1;
                }
            }
            Counted::Running | Counted::Waiting | Counted::Unknown => pending_regular_init += 1,
        }
    }
    for c in app_containers(pod) {
        match count(app.iter().find(|s| s.name == c.name)) {
            Counted::Running => running += 1,
            Counted::Stopped(code) => {
                stopped += 1;
                if code == 0 {
                    succeeded += 1;
                }
                if !container_should_restart(c, pod, code) {
                    stopped_for_good += 1;
                }
            }
            Counted::Waiting => waiting += 1,
            Counted::Unknown => unknown += 1,
        }
    }
    if failed_init > 0 && !crate::mutants::active(crate::mutants::Mutant::FailedInitIgnored) {
        return FAILED;
    }
    if crate::mutants::active(crate::mutants::Mutant::SucceededAsFailed) {
        // No stopped container counts as succeeded.
        succeeded = 0;
    }
    if pending_regular_init > 0 || (pending_sidecars > 0 && !initialized) || waiting > 0 {
        return PENDING;
    }
    if running > 0 && unknown == 0 {
        return RUNNING;
    }
    if running == 0 && stopped > 0 && unknown == 0 {
        if terminal {
            return if stopped == succeeded {
                SUCCEEDED
            } else {
                FAILED
            };
        }
        // Some container is about to be started again.
        if stopped != stopped_for_good {
            return RUNNING;
        }
        return if stopped == succeeded {
            SUCCEEDED
        } else {
            FAILED
        };
    }
    PENDING
}
