//! `computeInitContainerActions`: which init containers to start next, with
//! sidecars (restartable init containers) kept running beside the rest.
//!
//! Regular init containers run one at a time, in order, each to success. A sidecar
//! starts in its place in that order and lets the next init container start once it
//! has started (its startup probe, if any, succeeded); it keeps running, and is
//! started again whenever it exits, for as long as the pod runs. The pod is
//! initialized once the last init container has succeeded or, for a sidecar, started.

use k8s_openapi::api::core::v1::Pod;

use crate::podutil::{
    app_containers, container_should_restart, init_containers, is_restartable_init_container,
    restart_policy,
};
use crate::runtime::{self, ContainerState, container_hash};

/// What to do with the init containers in this sync.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct InitActions {
    /// Indexes into `spec.initContainers` to start, in spec order.
    pub start: Vec<usize>,
    /// Running sidecars whose spec changed (a new image): killed first, then started
    /// again (they are in `start` too).
    pub changed: Vec<usize>,
    /// The pod is initialized: its app containers may run.
    pub initialized: bool,
    /// A regular init container failed and the pod's policy does not restart it:
    /// the pod is done (its phase says `Failed`).
    pub failed: bool,
}

/// `computeInitContainerActions` on the runtime's view `rt` of the current sandbox.
/// `started(name)`: whether the running container `name` has started (its startup
/// probe succeeded, or it has none).
pub(super) fn compute(
    pod: &Pod,
    rt: &runtime::PodStatus,
    started: impl Fn(&str) -> bool,
) -> InitActions {
    let inits = init_containers(pod);
    let mut actions = InitActions::default();
    if inits.is_empty() {
        actions.initialized = true;
        return actions;
    }
    // An app container created or running means every init container ran once, even
    // if the runtime has since removed some of them: only sidecars need starting then.
    let mut initialized = app_containers(pod).iter().any(|c| {
        rt.latest(&c.name)
            .is_some_and(|l| matches!(l.state, ContainerState::Created | ContainerState::Running))
    });
    let mut previously_initialized = initialized;
    // Backwards, so the last init container the runtime still has decides where
    // initialization stands; the sidecars before it are kept running.
    for (i, c) in inits.iter().enumerate().rev() {
        let sidecar = is_restartable_init_container(c);
        let Some(latest) = rt.latest(&c.name) else {
            if previously_initialized && sidecar {
                actions.start.push(i);
            }
            continue;
        };
        if previously_initialized && !sidecar {
            continue;
        }
        match latest.state {
            // Created but never started: start it (again).
            ContainerState::Created => actions.start.push(i),
            ContainerState::Running if sidecar => {
                if started(&c.name) {
                    if i + 1 == inits.len() {
                        initialized = true;
                    } else if !previously_initialized {
                        actions.start.push(i + 1);
                    }
                    if latest.hash.is_some_and(|h| h != container_hash(c)) {
                        actions.changed.push(i);
                        actions.start.push(i);
                    }
                }
            }
            ContainerState::Running => {}
            ContainerState::Exited if sidecar => actions.start.push(i),
            ContainerState::Exited if latest.exit_code != 0 => {
                if !container_should_restart(c, pod, latest.exit_code) {
                    return InitActions {
                        failed: true,
                        ..InitActions::default()
                    };
                }
                actions.start.push(i);
            }
            ContainerState::Exited => {
                if i + 1 == inits.len() {
                    initialized = true;
                } else {
                    actions.start.push(i + 1);
                }
            }
            ContainerState::Unknown => {
                // No exit code for the rules: the container's own policy, else the pod's.
                let policy = c.restart_policy.as_deref().unwrap_or(restart_policy(pod));
                if !sidecar && policy == "Never" {
                    return InitActions {
                        failed: true,
                        ..InitActions::default()
                    };
                }
                actions.start.push(i);
            }
        }
        previously_initialized = true;
    }
    if !previously_initialized {
        actions.start.push(0);
    }
    actions.start.reverse();
    actions.start.dedup();
    actions.changed.reverse();
    actions.initialized = initialized;
    actions
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Container as RtContainer;
    use k8s_openapi::api::core::v1::{Container, PodSpec};

    /// A pod whose init containers are named by `inits`; `+name` is a sidecar.
    fn pod(inits: &[&str]) -> Pod {
        let container = |n: &str| Container {
            name: n.trim_start_matches('+').to_owned(),
            restart_policy: n.starts_with('+').then(|| "Always".to_owned()),
            ..Default::default()
        };
        Pod {
            spec: Some(PodSpec {
                init_containers: Some(inits.iter().map(|n| container(n)).collect()),
                containers: vec![container("app")],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// The runtime's view: `(name, state, exit code)`, newest first.
    fn rt(containers: &[(&str, ContainerState, i32)]) -> runtime::PodStatus {
        runtime::PodStatus {
            containers: containers
                .iter()
                .map(|(name, state, exit_code)| RtContainer {
                    id: format!("{name}-id"),
                    sandbox_id: "sb".into(),
                    name: (*name).to_owned(),
                    state: *state,
                    created_at: 1,
                    started_at: 1,
                    finished_at: 0,
                    exit_code: *exit_code,
                    reason: String::new(),
                    message: String::new(),
                    image: String::new(),
                    image_ref: String::new(),
                    restart_count: 0,
                    hash: None,
                })
                .collect(),
            ..Default::default()
        }
    }

    use ContainerState::{Exited, Running};

    #[test]
    fn first_init_container_starts_first() {
        let a = compute(&pod(&["a", "+s"]), &rt(&[]), |_| true);
        assert_eq!(a.start, [0]);
        assert!(!a.initialized);
    }

    #[test]
    fn a_started_sidecar_lets_the_next_one_start_and_keeps_running() {
        let p = pod(&["a", "+s", "b"]);
        let a = compute(&p, &rt(&[("s", Running, 0), ("a", Exited, 0)]), |_| true);
        assert_eq!(a.start, [2]);
        let waiting = compute(&p, &rt(&[("s", Running, 0), ("a", Exited, 0)]), |_| false);
        assert_eq!(
            waiting.start,
            Vec::<usize>::new(),
            "not before its startup probe succeeds"
        );
        let done = compute(
            &p,
            &rt(&[("b", Exited, 0), ("s", Running, 0), ("a", Exited, 0)]),
            |_| true,
        );
        assert_eq!(
            done,
            InitActions {
                initialized: true,
                ..InitActions::default()
            }
        );
    }

    #[test]
    fn an_exited_sidecar_restarts_even_after_initialization() {
        let p = pod(&["+s"]);
        let a = compute(&p, &rt(&[("app", Running, 0), ("s", Exited, 0)]), |_| true);
        assert_eq!(
            a,
            InitActions {
                start: vec![0],
                initialized: true,
                ..InitActions::default()
            }
        );
    }

    #[test]
    fn a_running_sidecar_with_a_new_image_is_restarted() {
        let with_image = |image: &str| {
            let mut p = pod(&["+s", "a"]);
            p.spec.as_mut().unwrap().init_containers.as_mut().unwrap()[0].image =
                Some(image.into());
            p
        };
        let running = with_image("busybox:1.36");
        let mut state = rt(&[("app", Running, 0), ("a", Exited, 0), ("s", Running, 0)]);
        state.containers[2].hash = Some(container_hash(&init_containers(&running)[0]));
        let same = compute(&running, &state, |_| true);
        assert_eq!(same.changed, Vec::<usize>::new());
        let a = compute(&with_image("busybox:1.37"), &state, |_| true);
        assert_eq!((a.changed, a.start), (vec![0], vec![0]));
    }

    #[test]
    fn a_failed_init_container_ends_a_pod_that_does_not_restart_it() {
        let p = pod(&["+s", "a"]);
        let state = rt(&[("a", Exited, 1), ("s", Running, 0)]);
        assert_eq!(
            compute(&p, &state, |_| true).start,
            [1],
            "the pod restarts it"
        );
        let mut never = p.clone();
        never.spec.as_mut().unwrap().restart_policy = Some("Never".into());
        assert!(compute(&never, &state, |_| true).failed);
        let own = never
            .spec
            .as_mut()
            .unwrap()
            .init_containers
            .as_mut()
            .unwrap();
        own[1].restart_policy = Some("OnFailure".into());
        assert_eq!(
            compute(&never, &state, |_| true).start,
            [1],
            "its own policy restarts it"
        );
    }
}
