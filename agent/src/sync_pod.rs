//! Syncing and killing one pod: the kubelet's `SyncPod` /
//! `SyncTerminatingPod` together with kuberuntime's `computePodActions`.
//!
//! [`sync`] reports the status, then converges the runtime step by step:
//! sandbox (re)creation, init containers one at a time in order, then the
//! app containers, each start gated by CrashLoopBackOff and image pull
//! back-off, each failure recorded as the container's waiting reason; a
//! container counts as started once its `postStart` hook returned. A pod past
//! its `activeDeadlineSeconds` ([`crate::active_deadline`]) is reported failed.
//! [`kill`] kills every container (its `preStop` hook, then `StopContainer`
//! with what is left of the grace period), stops the sandbox and reports the
//! final status (finalizing a deletion).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::{OnceCell, watch};
use tokio::time::Instant;

mod converge;
mod image;
mod init_containers;
mod kill;
mod resize;
mod sandbox;
mod start;
mod termination_order;

pub use image::{pull_policy, valid_reference};

pub use kill::{cleanup, kill};

use converge::converge;
use kill::kill_container;

use crate::Timings;
use crate::active_deadline;
use crate::backoff::Backoff;
use crate::env;
use crate::events::{self, Type};
use crate::metrics::Metrics;
use crate::pod_status::{self, Reason, is_terminal_phase};
use crate::podutil::{init_containers, is_restartable_init_container, restart_policy};
use crate::prober::Prober;
use crate::runtime::{self, Runtime};
use crate::status_manager;
use crate::volume_manager::{self, Volumes};

/// What every pod worker shares.
#[derive(Clone)]
pub struct Context {
    /// The CRI runtime.
    pub runtime: Runtime,
    /// The status manager.
    pub status: status_manager::Handle,
    /// Timings.
    pub timings: Timings,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// The node IP written as `hostIP`.
    pub host_ip: Option<String>,
    /// The runtime name (from `Version`), the prefix of container IDs.
    pub runtime_name: Arc<OnceCell<String>>,
    /// The event recorder.
    pub events: events::Recorder,
    /// The API client (ConfigMaps and Secrets for container environments).
    pub client: kube::Client,
    /// The Node as last written: its allocatable is the downward API's default
    /// for limits a container does not set.
    pub node: watch::Receiver<Option<Node>>,
    /// The resizes the sync loop could not allocate (`PodResizePending`).
    pub allocations: crate::allocation::Handle,
    /// The services, for containers' service variables.
    pub services: crate::services::Services,
    /// Where memory-backed volumes live.
    pub memory_medium: volume_manager::MemoryMedium,
    /// How many periodic resyncs of every pod have begun ([`crate::sync_loop::Resync`]).
    pub resyncs: watch::Receiver<u64>,
}

impl Context {
    /// The Node's `status.allocatable` as last written (`getNodeAnyWay`);
    /// `None` before the Node is registered.
    pub fn allocatable(&self) -> Option<crate::resource::List> {
        let node = self.node.borrow();
        let status = node.as_ref()?.status.as_ref()?;
        Some(status.allocatable.clone().unwrap_or_default())
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("runtime", &self.runtime)
            .field("host_ip", &self.host_ip)
            .finish_non_exhaustive()
    }
}

/// What a sync decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The pod keeps running; sync again at `wake_at` (a back-off ends) or on the next event.
    Continue {
        /// When to sync again without an event.
        wake_at: Option<Instant>,
    },
    /// The pod reached a terminal phase: terminate it.
    Terminal,
}

/// A worker's own state for its pod.
#[derive(Debug)]
pub struct PodState {
    reasons: HashMap<String, Reason>,
    crash: Backoff,
    image: Backoff,
    last_status: Option<Arc<PodStatus>>,
    prober: Prober,
    runtime: runtime::StatusCache,
    /// The pod's volumes once set up, and the resync ([`Context::resyncs`]) they were
    /// last written in.
    volumes: Option<(Volumes, u64)>,
    volume_backoff: Backoff,
    /// The `DeadlineExceeded` event is recorded.
    deadline_reported: bool,
    /// Turns true when the pod's worker is asked to kill it.
    kill_requested: Option<watch::Receiver<bool>>,
    /// Containers a failed probe killed that are to be started again whatever their
    /// exit code (taken by the next start of each), with the end of the run before
    /// the killed one, if any: the kubelet decides the restart's back-off from the
    /// status it read before the kill, where the killed run was still running.
    restart_after_kill: std::collections::HashMap<String, Option<i64>>,
    /// The resources each container was created or last resized with.
    actuated: resize::Actuated,
}

/// The crash-loop back-off: `timings`' initial delay, doubling up to its cap.
fn crash_backoff(timings: &Timings) -> Backoff {
    use crate::mutants::{Mutant, active};
    let (mut initial, mut max) = (timings.crash_backoff_initial, timings.crash_backoff_max);
    if active(Mutant::CrashBackoffHalf) {
        initial /= 2;
    }
    if active(Mutant::CrashBackoffDouble) {
        initial *= 2;
    }
    if active(Mutant::CrashBackoffConstant) {
        max = initial;
    }
    Backoff::new(initial, max)
}

impl PodState {
    /// Fresh state.
    pub fn new(timings: &Timings) -> Self {
        Self {
            reasons: HashMap::new(),
            crash: crash_backoff(timings),
            image: match crate::mutants::active(crate::mutants::Mutant::ImageBackoffNone) {
                true => Backoff::new(Duration::ZERO, Duration::ZERO),
                false => Backoff::new(timings.image_backoff_initial, timings.image_backoff_max),
            },
            last_status: None,
            prober: Prober::default(),
            runtime: runtime::StatusCache::default(),
            volumes: None,
            volume_backoff: Backoff::new(
                timings.volume_backoff_initial,
                timings.volume_backoff_max,
            ),
            deadline_reported: false,
            kill_requested: None,
            restart_after_kill: std::collections::HashMap::new(),
            actuated: resize::Actuated::default(),
        }
    }

    /// The `startTime` of the last status computed for the pod.
    pub fn start_time(&self) -> Option<Time> {
        self.last_status.as_ref().and_then(|s| s.start_time.clone())
    }

    /// Follows the worker's kill requests: a sync stops starting containers and
    /// stops waiting for a `postStart` hook once the pod is to be killed.
    pub fn watch_kills(&mut self, kill_requested: watch::Receiver<bool>) {
        self.kill_requested = Some(kill_requested);
    }

    /// Whether the worker has been asked to kill the pod.
    fn kill_requested(&self) -> bool {
        self.kill_requested.as_ref().is_some_and(|k| *k.borrow())
    }

    /// Resolves once the worker is asked to kill the pod (never without a signal).
    fn kill_signal(&self) -> impl Future<Output = ()> + use<> {
        let receiver = self.kill_requested.clone();
        async move {
            let Some(mut killed) = receiver else {
                return std::future::pending().await;
            };
            if killed.wait_for(|k| *k).await.is_err() {
                // The worker is gone: nothing will ask any more.
                std::future::pending::<()>().await;
            }
        }
    }

    /// The runtime has nothing for this pod yet: the first read needs no calls.
    pub fn runtime_is_empty(&mut self) {
        self.runtime.known_empty();
    }
}

fn earliest(a: Option<Instant>, b: Instant) -> Option<Instant> {
    Some(a.map_or(b, |a| a.min(b)))
}

fn earliest_opt(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Converts CRI nanoseconds since the epoch to a tokio instant.
fn instant_of(nanos: i64) -> Instant {
    let now = Instant::now();
    let then = UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
    match SystemTime::now().duration_since(then) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(_) => now,
    }
}

async fn runtime_name(ctx: &Context) -> String {
    let name = ctx
        .runtime_name
        .get_or_try_init(|| async { ctx.runtime.version().await.map(|(name, _)| name) })
        .await;
    name.cloned().unwrap_or_else(|_| "cri".to_owned())
}

/// Computes, normalizes and hands the status to the status manager
/// (`terminal`: the worker has terminated the pod).
async fn publish(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    rt: &runtime::PodStatus,
    terminal: bool,
    finalize: bool,
) -> Arc<PodStatus> {
    let name = runtime_name(ctx).await;
    let old = state
        .last_status
        .clone()
        .unwrap_or_else(|| Arc::new(pod.status.clone().unwrap_or_default()));
    let deadline_exceeded =
        active_deadline::is_past(pod, old.start_time.as_ref(), SystemTime::now());
    if deadline_exceeded && !state.deadline_reported {
        state.deadline_reported = true;
        ctx.events.pod(
            pod,
            None,
            Type::Normal,
            active_deadline::REASON,
            active_deadline::MESSAGE.to_owned(),
        );
    }
    // Containers the runtime no longer has need no record of their resources.
    state
        .actuated
        .containers
        .retain(|id, _| rt.containers.iter().any(|c| &c.id == id));
    let resize = pod_status::Resize {
        pending: ctx.allocations.pending(&crate::podutil::uid(pod)),
        in_progress: resize::in_progress(pod, rt, &state.actuated),
    };
    let generated = pod_status::generate(&pod_status::Input {
        pod,
        runtime: rt,
        reasons: &state.reasons,
        old: &old,
        terminal,
        host_ip: ctx.host_ip.as_deref(),
        runtime_name: &name,
        probes: &state.prober.results(),
        deadline_exceeded,
        resize: &resize,
    });
    let status = Arc::new(status_manager::normalize(
        Some(&old),
        generated,
        status_manager::now(),
    ));
    state.last_status = Some(status.clone());
    ctx.status.set(pod, status.clone(), terminal, finalize);
    status
}

/// Records an `Unhealthy` event for every probe run that failed since the last call, and a
/// `ProbeWarning` for every one that succeeded with a warning.
fn report_unhealthy(ctx: &Context, state: &mut PodState, pod: &Pod) {
    for failed in state.prober.take_unhealthy() {
        ctx.events.pod(
            pod,
            Some(&failed.container),
            Type::Warning,
            failed.reason,
            failed.message,
        );
    }
}

/// Syncs a pod that should be running; one with an active deadline syncs again
/// when it passes.
pub async fn sync(ctx: &Context, state: &mut PodState, pod: &Pod) -> runtime::Result<Outcome> {
    let outcome = sync_running(ctx, state, pod).await?;
    let Outcome::Continue { wake_at } = outcome else {
        return Ok(outcome);
    };
    let start_time = state
        .last_status
        .as_ref()
        .and_then(|s| s.start_time.as_ref());
    let deadline = active_deadline::deadline(pod, start_time).map(|at| {
        let left = at.duration_since(SystemTime::now()).unwrap_or_default();
        Instant::now() + left + Duration::from_millis(5)
    });
    Ok(Outcome::Continue {
        wake_at: earliest_opt(wake_at, deadline),
    })
}

async fn sync_running(ctx: &Context, state: &mut PodState, pod: &Pod) -> runtime::Result<Outcome> {
    if is_terminal_phase(pod.status.as_ref().and_then(|s| s.phase.as_deref())) {
        return Ok(Outcome::Terminal);
    }
    let mut rt = ctx
        .runtime
        .pod_status_cached(pod, &mut state.runtime)
        .await?;
    state.prober.track(pod, &rt);
    let pod_ip = rt.sandbox().and_then(|s| s.ip.clone());
    state.prober.run_due(&ctx.runtime, pod_ip.as_deref()).await;
    report_unhealthy(ctx, state, pod);
    let mut killed = false;
    let mut kills = state.prober.take_kills();
    if crate::mutants::active(crate::mutants::Mutant::LivenessIgnored) {
        kills.clear();
    }
    // Sidecars are restarted whatever the pod's policy and do not keep a pod alive:
    // the plan is the app containers'.
    let sidecar = |name: &str| {
        init_containers(pod)
            .iter()
            .any(|c| c.name == name && is_restartable_init_container(c))
    };
    let ids: Vec<&str> = kills
        .iter()
        .filter(|k| !sidecar(&k.name))
        .map(|k| k.id.as_str())
        .collect();
    let plan = kill::ProbeKill::plan(
        restart_policy(pod),
        &ids,
        rt.running()
            .filter(|c| !sidecar(&c.name))
            .map(|c| c.id.as_str()),
    );
    for kill in &kills {
        tracing::info!(pod = %runtime::pod_key(pod), container = %kill.name, ?plan, "container failed its liveness or startup probe");
        let (message, grace) = if sidecar(&kill.name) {
            let message = format!("Init container {} failed {} probe", kill.name, kill.probe);
            // A sidecar's kill is never the whole pod's: the rule of a single container.
            let grace = kill::ProbeKill::Containers { restart: true }.grace(pod, kill.grace);
            (Some(message), grace)
        } else {
            (
                plan.message(&kill.name, kill.probe),
                plan.grace(pod, kill.grace),
            )
        };
        let container = kill::Kill {
            id: &kill.id,
            name: &kill.name,
            message: message.as_deref(),
            grace,
            pod_ip: pod_ip.as_deref(),
            order: None,
        };
        kill_container(ctx, pod, container).await?;
        if let Some(c) = rt.containers.iter().find(|c| c.id == kill.id) {
            state.runtime.touch_container(&c.id, &c.sandbox_id);
        }
        // `computePodActions` puts a container its probe killed among those to start,
        // whatever its exit code: an OnFailure pod restarts it too.
        if plan.restarts() || sidecar(&kill.name) {
            let before = rt
                .containers
                .iter()
                .find(|c| c.name == kill.name && c.state == runtime::ContainerState::Exited)
                .map(|c| c.finished_at);
            state.restart_after_kill.insert(kill.name.clone(), before);
        }
        killed = true;
    }
    if killed {
        rt = ctx
            .runtime
            .pod_status_refreshed(pod, &mut state.runtime)
            .await?;
        state.prober.track(pod, &rt);
    }
    if pod.metadata.deletion_timestamp.is_none()
        && let Err(retry_at) = ensure_volumes(ctx, state, pod).await
    {
        // `WaitForAttachAndMount` failed: nothing starts, the status says ContainerCreating.
        publish(ctx, state, pod, &rt, false, false).await;
        return Ok(Outcome::Continue {
            wake_at: earliest_opt(Some(retry_at), state.prober.next_due()),
        });
    }
    let mut wake = None;
    for pass in 0..4 {
        // After a probe kill the kubelet kills and starts again in one `SyncPod`: the
        // status it wrote before showed the container running, the next one shows it
        // restarted. Converging first keeps the killed, not yet restarted container out
        // of the API (a pod with nothing to start reports it after `converge`).
        if !(killed && pass == 0) {
            let status = publish(ctx, state, pod, &rt, false, false).await;
            if is_terminal_phase(status.phase.as_deref()) {
                return Ok(Outcome::Terminal);
            }
        }
        wake = None;
        let reasons_before = state.reasons.clone();
        let acted = converge(ctx, state, pod, &rt, &mut wake).await?;
        if acted {
            rt = ctx
                .runtime
                .pod_status_refreshed(pod, &mut state.runtime)
                .await?;
            state.prober.track(pod, &rt);
        }
        // A start that failed in this pass (`ErrImagePull`, `CreateContainerError`)
        // is reported and retried at `wake`, like the kubelet's requeue after a
        // failed `SyncPod`, not again at once in this sync.
        let failed = state
            .reasons
            .iter()
            .any(|(name, reason)| reasons_before.get(name) != Some(reason));
        if !acted || failed {
            // Reasons may have changed (e.g. CrashLoopBackOff): report them.
            let status = publish(ctx, state, pod, &rt, false, false).await;
            if is_terminal_phase(status.phase.as_deref()) {
                return Ok(Outcome::Terminal);
            }
            return Ok(Outcome::Continue {
                wake_at: earliest_opt(wake, state.prober.next_due()),
            });
        }
    }
    publish(ctx, state, pod, &rt, false, false).await;
    Ok(Outcome::Continue {
        wake_at: earliest_opt(wake, state.prober.next_due()),
    })
}

/// Sets the pod's volumes up before its first start, and rewrites those read from
/// the API once in each periodic resync (at once when the labels or annotations a
/// downward-API volume shows changed): the kubelet remounts them at every sync of the
/// pod, and the periodic one comes every `syncFrequency`. Counting resyncs, not time
/// since the last write, keeps a write late in one resync from skipping the next.
/// `Err` is when to try again while no set-up has succeeded (each failure is a
/// `FailedMount` event).
async fn ensure_volumes(ctx: &Context, state: &mut PodState, pod: &Pod) -> Result<(), Instant> {
    let now = Instant::now();
    let resync = *ctx.resyncs.borrow();
    match &state.volumes {
        Some((volumes, written))
            if (*written == resync && !volumes.downward_stale(pod))
                || !volume_manager::has_api_volumes(pod) =>
        {
            return Ok(());
        }
        None if state.volume_backoff.is_in_backoff_since_update("", now) => {
            return Err(state.volume_backoff.expiry_since_update(""));
        }
        _ => {}
    }
    let allocatable = ctx.allocatable();
    let downward = env::Downward {
        host_ip: ctx.host_ip.as_deref(),
        pod_ip: None,
        allocatable: allocatable.as_ref(),
    };
    let pod_dir = ctx.runtime.pod_dir(pod);
    match volume_manager::set_up(&ctx.client, pod, &pod_dir, downward, ctx.memory_medium).await {
        Ok(volumes) => {
            state.volumes = Some((volumes, resync));
            state.volume_backoff.reset("");
            Ok(())
        }
        Err(error) => {
            tracing::warn!(pod = %runtime::pod_key(pod), %error, "setting up volumes failed");
            ctx.events
                .pod(pod, None, Type::Warning, "FailedMount", error.to_string());
            match &mut state.volumes {
                // Running containers keep the content they have until the next resync.
                Some((_, written)) => {
                    *written = resync;
                    Ok(())
                }
                None => {
                    state.volume_backoff.next("", now, now);
                    Err(state.volume_backoff.expiry_since_update(""))
                }
            }
        }
    }
}
