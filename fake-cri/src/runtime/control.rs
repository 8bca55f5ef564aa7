//! Operations behind the control API: kills, a runtime restart, the state
//! snapshot, and ending every process on shutdown.

use super::state::{Conditions, Runtime, State, lock, now};
use crate::container::Lifecycle;
use crate::sandbox::{Sandbox, SandboxState};
use crate::script::{Outcome, Signal};

impl Runtime {
    /// Kills running containers: by id, or all of a pod's containers with a
    /// name (or all of the pod's when `container` is empty). Returns the ids.
    pub(crate) fn kill(&self, target: &crate::control::KillTarget, oom: bool) -> Vec<String> {
        use crate::control::KillTarget;
        let state = self.state();
        let mut killed = Vec::new();
        for container in state
            .containers
            .values()
            .filter(|c| c.state == Lifecycle::Running)
        {
            let wanted = match target {
                KillTarget::Id(id) => container.id == *id,
                KillTarget::Container {
                    namespace,
                    pod,
                    container: name,
                } => state.sandboxes.get(&container.sandbox_id).is_some_and(|s| {
                    let meta = s.metadata();
                    meta.namespace == *namespace
                        && meta.name == *pod
                        && s.state == SandboxState::Ready
                        && (name.is_empty() || container.name() == *name)
                }),
            };
            if wanted {
                if let Some(signals) = &container.signals {
                    let _ = signals.send(Signal::Kill { oom });
                }
                killed.push(container.id.clone());
            }
        }
        killed
    }

    /// Forgets every sandbox and container, as a runtime crash does.
    /// Images stay (they are on disk); conditions return to ready.
    pub(crate) fn restart(&self) {
        {
            let mut state = self.state();
            for container in state.containers.values() {
                if let Some(task) = &container.task {
                    task.abort();
                }
            }
            *state = State::new(std::mem::take(&mut state.pod_cidr));
        }
        *lock(&self.conditions) = Conditions::default();
        self.close_streams();
    }

    /// Ends every simulated process (on shutdown) as SIGKILL would, so that
    /// requests waiting for one to exit (an in-flight `StopContainer`) finish.
    pub(crate) fn abort_all(&self) {
        let mut state = self.state();
        let killed_at = now();
        for container in state.containers.values_mut() {
            if let Some(task) = container.task.take() {
                task.abort();
            }
            if container.state == Lifecycle::Running {
                let killed = Outcome {
                    exit_code: 137,
                    oom_killed: false,
                };
                container.finish(killed, killed_at);
            }
        }
    }

    /// A summary of the state for the control API.
    pub(crate) fn snapshot(&self) -> crate::control::Snapshot {
        use crate::control::{ContainerSummary, SandboxSummary, Snapshot};
        let conditions = self.conditions();
        let state = self.state();
        Snapshot {
            runtime_ready: conditions.runtime_ready,
            network_ready: conditions.network_ready,
            sandboxes: state
                .sandboxes
                .values()
                .map(|s| {
                    let meta = s.metadata();
                    SandboxSummary {
                        id: s.id.clone(),
                        name: meta.name,
                        namespace: meta.namespace,
                        uid: meta.uid,
                        state: s.state.to_cri().as_str_name().to_owned(),
                    }
                })
                .collect(),
            containers: state
                .containers
                .values()
                .map(|c| {
                    let pod = state
                        .sandboxes
                        .get(&c.sandbox_id)
                        .map(Sandbox::metadata)
                        .unwrap_or_default();
                    ContainerSummary {
                        id: c.id.clone(),
                        sandbox_id: c.sandbox_id.clone(),
                        name: c.name(),
                        pod_name: pod.name,
                        pod_namespace: pod.namespace,
                        pod_uid: pod.uid,
                        state: c.state.name().to_owned(),
                        exit_code: c.exit_code,
                    }
                })
                .collect(),
        }
    }
}
