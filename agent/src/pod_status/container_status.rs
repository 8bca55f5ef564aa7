//! `convertToAPIContainerStatuses`: the container statuses from the runtime's
//! containers, the reasons of the last sync and the previous statuses; and the
//! status manager's `TerminatePod` for containers that can no longer be found.

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::runtime::{self, ContainerState as RtState};

pub(crate) fn time(nanos: i64) -> Option<Time> {
    (nanos > 0).then(|| Time(runtime::timestamp(nanos)))
}

pub(crate) fn convert_container(
    cs: &runtime::Container,
    old: Option<&ContainerStatus>,
    prefix: &str,
) -> ContainerStatus {
    let cid = format!("{prefix}://{}", cs.id);
    let mut status = ContainerStatus {
        name: cs.name.clone(),
        restart_count: cs.restart_count,
        image: cs.image.clone(),
        image_id: cs.image_ref.clone(),
        container_id: Some(cid.clone()),
        ..Default::default()
    };
    status.state = Some(match cs.state {
        RtState::Running => ContainerState {
            running: Some(ContainerStateRunning {
                started_at: time(cs.started_at),
            }),
            ..Default::default()
        },
        RtState::Created => ContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..Default::default()
        },
        RtState::Exited => ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: cs.exit_code,
                reason: Some(cs.reason.clone()).filter(|r| !r.is_empty()),
                message: Some(cs.message.clone()).filter(|m| !m.is_empty()),
                started_at: time(cs.started_at),
                finished_at: time(cs.finished_at),
                container_id: Some(cid),
                signal: None,
            }),
            ..Default::default()
        },
        RtState::Unknown
            if old.is_some_and(|o| o.state.as_ref().is_some_and(|s| s.running.is_some())) =>
        {
            status.restart_count = old.map_or(0, |o| o.restart_count) + 1;
            ContainerState {
                terminated: Some(ContainerStateTerminated {
                    exit_code: 137,
                    reason: Some("ContainerStatusUnknown".into()),
                    message: Some(
                        "The container could not be located when the pod was terminated".into(),
                    ),
                    ..Default::default()
                }),
                ..Default::default()
            }
        }
        RtState::Unknown => ContainerState {
            waiting: Some(ContainerStateWaiting::default()),
            ..Default::default()
        },
    });
    status
}

pub(crate) fn waiting(reason: &str) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.to_owned()),
            message: None,
        }),
        ..Default::default()
    }
}

pub(crate) fn state_of(s: &ContainerStatus) -> (bool, bool, bool) {
    let st = s.state.as_ref();
    (
        st.is_some_and(|s| s.running.is_some()),
        st.is_some_and(|s| s.terminated.is_some()),
        st.is_some_and(|s| s.waiting.is_some()),
    )
}

/// `convertToAPIContainerStatuses` for one list (app or init containers).
pub(crate) fn convert_statuses(
    input: &Input<'_>,
    previous: &[ContainerStatus],
    containers: &[Container],
    is_init: bool,
) -> Vec<ContainerStatus> {
    let pod = input.pod;
    let rt = input.runtime;
    let has_init = !init_containers(pod).is_empty();
    let old: HashMap<&str, &ContainerStatus> =
        previous.iter().map(|s| (s.name.as_str(), s)).collect();
    let default_reason = if has_init {
        "PodInitializing"
    } else {
        "ContainerCreating"
    };
    let mut statuses: BTreeMap<String, ContainerStatus> = BTreeMap::new();
    for c in containers {
        let mut status = ContainerStatus {
            name: c.name.clone(),
            image: c.image.clone().unwrap_or_default(),
            state: Some(waiting(default_reason)),
            ..Default::default()
        };
        if let Some(o) = old.get(c.name.as_str()) {
            if o.state.as_ref().is_some_and(|s| s.terminated.is_some()) {
                status = (*o).clone();
            } else {
                status.restart_count = o.restart_count;
                status.last_state = o.last_state.clone();
            }
        }
        statuses.insert(c.name.clone(), status);
    }
    // A container that was running and vanished from the runtime terminated.
    for c in containers {
        if rt.latest(&c.name).is_some() {
            continue;
        }
        let Some(o) = old.get(c.name.as_str()) else {
            continue;
        };
        let (running, terminated, _) = state_of(o);
        if terminated || !running {
            continue;
        }
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        let is_default = status
            .state
            .as_ref()
            .and_then(|s| s.waiting.as_ref())
            .is_some_and(|w| w.reason.as_deref() == Some(default_reason));
        if !is_default
            || status
                .last_state
                .as_ref()
                .is_some_and(|s| s.terminated.is_some())
        {
            continue;
        }
        status.last_state = Some(ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: 137,
                reason: Some("ContainerStatusUnknown".into()),
                message: Some(
                    "The container could not be located when the pod was deleted.  The container used to be Running"
                        .into(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        });
        if pod.metadata.deletion_timestamp.is_none() {
            status.restart_count += 1;
        }
    }
    // The newest container gives the state, the one before it lastState.
    let mut seen: HashMap<&str, u32> = HashMap::new();
    for cs in &rt.containers {
        if !statuses.contains_key(&cs.name) {
            continue;
        }
        let count = seen.entry(cs.name.as_str()).or_default();
        if *count >= 2 {
            continue;
        }
        let mut converted =
            convert_container(cs, old.get(cs.name.as_str()).copied(), input.runtime_name);
        if *count == 0 {
            // InPlacePodVerticalScaling (GA in 1.35): what the container runs with and was
            // allocated; the pod is the allocated one.
            if let Some(spec) = containers.iter().find(|c| c.name == cs.name) {
                let resources = spec.resources.clone().unwrap_or_default();
                converted.allocated_resources = resources.requests.clone();
                converted.resources = Some(resources);
            }
            statuses.insert(cs.name.clone(), converted);
        } else if let Some(s) = statuses.get_mut(&cs.name) {
            s.last_state = converted.state;
        }
        *count += 1;
    }
    // Containers that failed to start, or wait for a restart, are waiting with the recorded reason.
    for c in containers {
        if is_init
            && !is_restartable_init_container(c)
            && let Some(s) = rt.latest(&c.name)
            && s.state == RtState::Exited
            && s.exit_code == 0
        {
            continue;
        }
        if !should_restart(c, pod, rt) {
            continue;
        }
        let Some(reason) = input.reasons.get(&c.name) else {
            continue;
        };
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        if status
            .state
            .as_ref()
            .is_some_and(|s| s.terminated.is_some())
        {
            status.last_state = status.state.take();
        }
        status.state = Some(ContainerState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.reason.clone()),
                message: Some(reason.message.clone()).filter(|m| !m.is_empty()),
            }),
            ..Default::default()
        });
    }
    // Readiness and started (the prober's `UpdatePodStatus`): a running app
    // container or sidecar without probes is ready and started, a succeeded init
    // container ready.
    for c in containers {
        let Some(status) = statuses.get_mut(&c.name) else {
            continue;
        };
        let (running, _, _) = state_of(status);
        let succeeded = status
            .state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .is_some_and(|t| t.exit_code == 0);
        if is_init && !is_restartable_init_container(c) {
            status.ready = succeeded;
            status.started = Some(running);
        } else {
            let (ready, started) = input
                .probes
                .get(&status.name)
                .copied()
                .unwrap_or((true, true));
            let ready = ready || crate::mutants::active(crate::mutants::Mutant::ReadinessIgnored);
            status.ready = running && ready;
            status.started = Some(running && started);
        }
    }
    if is_init {
        containers
            .iter()
            .filter_map(|c| statuses.remove(&c.name))
            .collect()
    } else {
        // Sorted by name, like `SortedContainerStatuses`.
        statuses.into_values().collect()
    }
}

/// The status manager's `TerminatePod`: once a pod has initialized, a
/// container with no terminated state is reported as terminated with
/// `ContainerStatusUnknown` (the pod phase becomes `Failed`).
/// Whether a container ever ran: it runs or ran now, or an earlier instance
/// terminated (`kubecontainer` "regular container started", which marks a pod
/// initialized).
pub(crate) fn has_started(s: &ContainerStatus) -> bool {
    s.state
        .as_ref()
        .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
        || s.last_state
            .as_ref()
            .is_some_and(|l| l.terminated.is_some())
}

pub(crate) fn terminate(app: &mut [ContainerStatus], init: &mut [ContainerStatus]) {
    let unknown = || ContainerState {
        terminated: Some(ContainerStateTerminated {
            exit_code: 137,
            reason: Some("ContainerStatusUnknown".into()),
            message: Some("The container could not be located when the pod was terminated".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let initialized = app.iter().any(has_started);
    if initialized {
        for s in app.iter_mut() {
            if s.state.as_ref().is_none_or(|st| st.terminated.is_none()) {
                s.state = Some(unknown());
                s.ready = false;
                s.started = Some(false);
            }
        }
    }
    // Init containers before the last one that started are marked failed if they have no terminated state.
    let last_started = init.iter().rposition(|s| {
        s.state
            .as_ref()
            .is_some_and(|st| st.running.is_some() || st.terminated.is_some())
    });
    if let Some(last) = last_started {
        for s in init.iter_mut().take(last + 1) {
            if s.state.as_ref().is_none_or(|st| st.terminated.is_none()) {
                s.state = Some(unknown());
                s.ready = false;
            }
        }
    }
}
