//! `getPhase`: the pod phase from the container statuses and the restart policy.

use k8s_openapi::api::core::v1::{ContainerStatus, Pod};

use super::*;

/// `getPhase`: the pod phase from the container statuses.
pub fn get_phase(
    pod: &Pod,
    init: &[ContainerStatus],
    app: &[ContainerStatus],
    terminal: bool,
) -> &'static str {
    let find = |list: &[ContainerStatus], name: &str| list.iter().find(|s| s.name == name).cloned();
    let mut pending_init = 0;
    let mut failed_init = 0;
    for c in init_containers(pod) {
        let Some(s) = find(init, &c.name) else {
            pending_init += 1;
            continue;
        };
        let st = s.state.unwrap_or_default();
        if st.running.is_some() {
            pending_init += 1;
        } else if let Some(t) = st.terminated {
            if t.exit_code != 0 {
                failed_init += 1;
            }
        } else if st.waiting.is_some() {
            match s.last_state.and_then(|l| l.terminated) {
                Some(t) if t.exit_code != 0 => failed_init += 1,
                Some(_) => {}
                None => pending_init += 1,
            }
        } else {
            pending_init += 1;
        }
    }
    let (mut unknown, mut running, mut waiting_n, mut stopped, mut succeeded) = (0, 0, 0, 0, 0);
    for c in app_containers(pod) {
        let Some(s) = find(app, &c.name) else {
            unknown += 1;
            continue;
        };
        let st = s.state.unwrap_or_default();
        if st.running.is_some() {
            running += 1;
        } else if let Some(t) = st.terminated {
            stopped += 1;
            if t.exit_code == 0 {
                succeeded += 1;
            }
        } else if st.waiting.is_some() {
            if s.last_state.and_then(|l| l.terminated).is_some() {
                stopped += 1;
            } else {
                waiting_n += 1;
            }
        } else {
            unknown += 1;
        }
    }
    let policy = restart_policy(pod);
    if failed_init > 0 && policy == "Never" {
        return FAILED;
    }
    let any_regular_started = app.iter().any(|s| {
        let st = s.state.as_ref();
        st.is_some_and(|st| st.running.is_some() || st.terminated.is_some())
            || s.last_state
                .as_ref()
                .is_some_and(|l| l.terminated.is_some())
    });
    if (pending_init > 0 && !any_regular_started) || waiting_n > 0 {
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
        if policy == "Always" {
            return RUNNING;
        }
        if stopped == succeeded {
            return SUCCEEDED;
        }
        if policy == "Never" {
            return FAILED;
        }
        return RUNNING;
    }
    PENDING
}
