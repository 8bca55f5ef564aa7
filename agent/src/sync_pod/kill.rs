//! Killing: one container (`killContainer`: the `Killing` event, the `preStop`
//! hook inside the grace period, then `StopContainer` with what is left of it,
//! never under the minimum), a whole pod (`killPod` + `SyncTerminatingPod`),
//! and the removal of what a gone pod left behind.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::time::Instant;

use super::termination_order::TerminationOrder;
use super::{Context, PodState, publish, report_unhealthy};
use crate::events::Type;
use crate::lifecycle;
use crate::podutil::has_restartable_init_container;
use crate::runtime::{self, ContainerState};
use crate::volume_manager;

/// The spec of the container named `name` (app or init).
pub(super) fn container_spec<'a>(pod: &'a Pod, name: &str) -> Option<&'a Container> {
    let spec = pod.spec.as_ref()?;
    spec.containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .find(|c| c.name == name)
}

/// What to kill and why.
#[derive(Debug, Clone, Copy)]
pub(super) struct Kill<'a> {
    /// The running container's CRI ID.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// The `Killing` event's message; `None`: `Stopping container <name>`.
    pub message: Option<&'a str>,
    /// The grace period, before the `preStop` hook takes its share.
    pub grace: Duration,
    /// The pod's IP, for an `httpGet` hook.
    pub pod_ip: Option<&'a str>,
    /// When the pod's containers are killed together and it has sidecars: the order
    /// their stops wait for.
    pub order: Option<&'a TerminationOrder>,
}

/// How `computePodActions` kills the containers whose liveness or startup
/// probe failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ProbeKill {
    /// Each container alone, with `Container <name> failed <probe> probe`
    /// (`, will be restarted` unless the restart policy is Never) and the
    /// probe's own grace period when it has one.
    Containers {
        /// Whether the containers will be started again.
        restart: bool,
    },
    /// No running container is left to keep and none is to start (a Never
    /// pod): the kubelet kills the whole pod (`KillPod`), each container with
    /// the plain `Stopping container <name>` and the pod's grace period.
    Pod,
}

impl ProbeKill {
    /// The plan for `killed` (container IDs) out of the pod's `running`
    /// containers, under `restart_policy`.
    pub(super) fn plan<'a>(
        restart_policy: &str,
        killed: &[&str],
        mut running: impl Iterator<Item = &'a str>,
    ) -> Self {
        let restart = restart_policy != "Never";
        if !restart && !killed.is_empty() && running.all(|id| killed.contains(&id)) {
            Self::Pod
        } else {
            Self::Containers { restart }
        }
    }

    /// Whether the killed containers are started again.
    pub(super) fn restarts(&self) -> bool {
        matches!(self, Self::Containers { restart: true })
    }

    /// The `Killing` event's message for a container whose `probe` failed;
    /// `None`: the default `Stopping container <name>`.
    pub(super) fn message(&self, name: &str, probe: &str) -> Option<String> {
        match self {
            Self::Pod => None,
            Self::Containers { restart: true } => Some(format!(
                "Container {name} failed {probe} probe, will be restarted"
            )),
            Self::Containers { restart: false } => {
                Some(format!("Container {name} failed {probe} probe"))
            }
        }
    }

    /// The grace period: the probe's own (`probe_grace`) unless the whole pod
    /// is killed, else the pod's ([`crate::pod_workers::grace_period`]).
    pub(super) fn grace(&self, pod: &Pod, probe_grace: Option<Duration>) -> Duration {
        match (self, probe_grace) {
            (Self::Containers { .. }, Some(grace)) => grace,
            _ => crate::pod_workers::grace_period(pod),
        }
    }
}

/// `killContainer`: records `Killing`, runs the container's `preStop` hook
/// within the grace period (a hook that outlives it is cut off; its
/// `FailedPreStopHook` event says when it failed), takes the whole seconds it
/// took off the grace period, and stops the container with the rest (at least
/// the minimum, 2 s upstream).
pub(super) async fn kill_container(
    ctx: &Context,
    pod: &Pod,
    kill: Kill<'_>,
) -> runtime::Result<()> {
    let message = kill.message.map_or_else(
        || format!("Stopping container {}", kill.name),
        str::to_owned,
    );
    ctx.events
        .pod(pod, Some(kill.name), Type::Normal, "Killing", message);
    let mut grace = kill.grace;
    let spec = container_spec(pod, kill.name);
    let hook = spec
        .and_then(|c| c.lifecycle.as_ref())
        .and_then(|l| l.pre_stop.as_ref())
        .filter(|_| !crate::mutants::active(crate::mutants::Mutant::PreStopSkipped));
    if let (Some(container), Some(hook)) = (spec, hook)
        && !grace.is_zero()
    {
        let target = lifecycle::Target {
            pod,
            container,
            container_id: kill.id,
            pod_ip: kill.pod_ip,
        };
        let started = Instant::now();
        match tokio::time::timeout(
            grace,
            lifecycle::run(&ctx.runtime, target, hook, Some(grace)),
        )
        .await
        {
            Ok(Ok(())) => {
                tracing::debug!(pod = %runtime::pod_key(pod), container = %kill.name, "preStop hook completed");
            }
            Ok(Err(error)) => {
                tracing::warn!(pod = %runtime::pod_key(pod), container = %kill.name, %error, "preStop hook failed");
                // Like the kubelet, the event does not carry the message (it may hold secrets).
                ctx.events.pod(
                    pod,
                    Some(kill.name),
                    Type::Warning,
                    "FailedPreStopHook",
                    "PreStopHook failed".into(),
                );
            }
            Err(_) => {
                tracing::info!(pod = %runtime::pod_key(pod), container = %kill.name, ?grace, "preStop hook not completed in grace period");
            }
        }
        // `executePreStopHook` returns whole seconds.
        grace = grace.saturating_sub(Duration::from_secs(started.elapsed().as_secs()));
    }
    if let Some(order) = kill.order
        && !grace.is_zero()
    {
        let waited = order.wait_for_turn(kill.name, grace).await;
        grace = grace.saturating_sub(Duration::from_secs(waited.as_secs()));
    }
    let grace = grace.max(ctx.timings.minimum_stop_grace);
    ctx.runtime.stop_container(kill.id, grace).await?;
    if let Some(order) = kill.order {
        order.terminated(kill.name);
    }
    Ok(())
}

/// `killContainersWithSyncResult`: kills every running container of `rt` at once,
/// each with `grace`, the sidecars after the app containers in reverse order.
pub(super) async fn kill_running(
    ctx: &Context,
    pod: &Pod,
    rt: &runtime::PodStatus,
    grace: Duration,
    pod_ip: Option<&str>,
) -> runtime::Result<()> {
    let order = has_restartable_init_container(pod)
        .then(|| TerminationOrder::new(pod, rt.running().map(|c| c.name.as_str())));
    let kills = rt.running().map(|c| {
        let kill = Kill {
            id: &c.id,
            name: &c.name,
            message: None,
            grace,
            pod_ip,
            order: order.as_ref(),
        };
        kill_container(ctx, pod, kill)
    });
    for result in futures::future::join_all(kills).await {
        result?;
    }
    Ok(())
}

/// Kills a pod: kills its running containers at once, each with `grace`
/// (`kill_running`), stops its sandboxes, tears its volumes down and
/// reports the final status.
pub async fn kill(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    grace: Duration,
) -> runtime::Result<()> {
    // Only this worker starts the pod's containers, so its last read (plus
    // what it did since) knows every one that may run.
    let rt = ctx
        .runtime
        .pod_status_refreshed(pod, &mut state.runtime)
        .await?;
    let pod_ip = rt.sandbox().and_then(|s| s.ip.as_deref());
    state.prober.track(pod, &rt);
    let kills = kill_running(ctx, pod, &rt, grace, pod_ip);
    keep_probing(ctx, state, pod, &rt, kills).await?;
    for c in rt.running() {
        state.runtime.touch_container(&c.id, &c.sandbox_id);
    }
    for sandbox in rt.sandboxes.iter().filter(|s| s.ready) {
        ctx.runtime.stop_sandbox(&sandbox.id).await?;
        state.runtime.touch_sandbox(&sandbox.id);
    }
    let rt = ctx
        .runtime
        .pod_status_refreshed(pod, &mut state.runtime)
        .await?;
    // Upstream reports a pod terminal only once its volumes are unmounted.
    if state.volumes.take().is_some() {
        volume_manager::tear_down(ctx.runtime.pod_dir(pod)).await;
    }
    state.reasons.clear();
    let finalize = pod.metadata.deletion_timestamp.is_some();
    publish(ctx, state, pod, &rt, true, finalize).await;
    Ok(())
}

/// Runs `kills` to its end while the pod's readiness probes keep running on their periods
/// and the status shows what they find: the kubelet's probe workers outlive the kill
/// request, so a pod turns not Ready while its containers are still stopping.
async fn keep_probing(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    rt: &runtime::PodStatus,
    kills: impl Future<Output = runtime::Result<()>>,
) -> runtime::Result<()> {
    tokio::pin!(kills);
    let pod_ip = rt.sandbox().and_then(|s| s.ip.clone());
    loop {
        let due = state.prober.next_due();
        let next_probe = async {
            match due {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            result = &mut kills => return result,
            () = next_probe => {
                if state.prober.run_due(&ctx.runtime, pod_ip.as_deref()).await {
                    publish(ctx, state, pod, rt, false, false).await;
                }
                report_unhealthy(ctx, state, pod);
            }
        }
    }
}

/// Removes every container and sandbox of a pod that is gone (container GC).
pub async fn cleanup(ctx: &Context, state: &mut PodState, pod: &Pod) {
    let Ok(rt) = ctx
        .runtime
        .pod_status_refreshed(pod, &mut state.runtime)
        .await
    else {
        return;
    };
    for c in &rt.containers {
        if c.state == ContainerState::Running {
            let _ = ctx
                .runtime
                .stop_container(&c.id, ctx.timings.minimum_stop_grace)
                .await;
        }
        let _ = ctx.runtime.remove_container(&c.id).await;
    }
    for s in &rt.sandboxes {
        if s.ready {
            let _ = ctx.runtime.stop_sandbox(&s.id).await;
        }
        let _ = ctx.runtime.remove_sandbox(&s.id).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_pod_with_its_only_running_container_failing_is_killed_whole() {
        let plan = ProbeKill::plan("Never", &["a"], ["a"].into_iter());
        assert_eq!(plan, ProbeKill::Pod);
        assert_eq!(plan.message("c", "liveness"), None);
        let pod = Pod {
            spec: Some(k8s_openapi::api::core::v1::PodSpec {
                termination_grace_period_seconds: Some(7),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(
            plan.grace(&pod, Some(Duration::from_secs(2))),
            Duration::from_secs(7)
        );
    }

    #[test]
    fn never_pod_with_another_container_running_kills_one_without_restart() {
        let plan = ProbeKill::plan("Never", &["a"], ["a", "b"].into_iter());
        assert_eq!(plan, ProbeKill::Containers { restart: false });
        assert_eq!(
            plan.message("c", "startup").as_deref(),
            Some("Container c failed startup probe")
        );
        assert_eq!(
            plan.grace(&Pod::default(), Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
    }

    #[test]
    fn restarting_pods_say_so() {
        for policy in ["Always", "OnFailure"] {
            let plan = ProbeKill::plan(policy, &["a"], ["a"].into_iter());
            assert_eq!(plan, ProbeKill::Containers { restart: true });
            assert_eq!(
                plan.message("c", "liveness").as_deref(),
                Some("Container c failed liveness probe, will be restarted")
            );
        }
    }
}
