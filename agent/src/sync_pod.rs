//! Syncing and killing one pod: the kubelet's `SyncPod` /
//! `SyncTerminatingPod` together with kuberuntime's `computePodActions`.
//!
//! [`sync`] reports the status, then converges the runtime step by step:
//! sandbox (re)creation, init containers one at a time in order, then the
//! app containers, each start gated by CrashLoopBackOff and image pull
//! back-off, each failure recorded as the container's waiting reason.
//! [`kill`] stops every container with the grace period, stops the sandbox
//! and reports the final status (finalizing a deletion).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::{Container, Pod, PodStatus};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::Timings;
use crate::backoff::{Backoff, go_duration};
use crate::env;
use crate::events::{self, Type};
use crate::metrics::Metrics;
use crate::pod_status::{self, Reason, is_terminal_phase};
use crate::prober::Prober;
use crate::runtime::{self, ContainerState, Runtime};
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
    /// The pod's volumes once set up, and when they were last written.
    volumes: Option<(Volumes, Instant)>,
    volume_backoff: Backoff,
}

impl PodState {
    /// Fresh state.
    pub fn new(timings: &Timings) -> Self {
        Self {
            reasons: HashMap::new(),
            crash: Backoff::new(timings.crash_backoff_initial, timings.crash_backoff_max),
            image: Backoff::new(timings.image_backoff_initial, timings.image_backoff_max),
            last_status: None,
            prober: Prober::default(),
            runtime: runtime::StatusCache::default(),
            volumes: None,
            volume_backoff: Backoff::new(
                timings.volume_backoff_initial,
                timings.volume_backoff_max,
            ),
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
    let generated = pod_status::generate(&pod_status::Input {
        pod,
        runtime: rt,
        reasons: &state.reasons,
        old: &old,
        terminal,
        host_ip: ctx.host_ip.as_deref(),
        runtime_name: &name,
        probes: &state.prober.results(),
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

/// Syncs a pod that should be running.
pub async fn sync(ctx: &Context, state: &mut PodState, pod: &Pod) -> runtime::Result<Outcome> {
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
    for failed in state.prober.take_unhealthy() {
        ctx.events.pod(
            pod,
            Some(&failed.container),
            Type::Warning,
            "Unhealthy",
            failed.message,
        );
    }
    let mut killed = false;
    for kill in state.prober.take_kills() {
        tracing::info!(pod = %runtime::pod_key(pod), container = %kill.name, "container failed its liveness or startup probe, will be restarted");
        ctx.events.pod(
            pod,
            Some(&kill.name),
            Type::Normal,
            "Killing",
            format!(
                "Container {} failed {} probe, will be restarted",
                kill.name, kill.probe
            ),
        );
        let grace = kill
            .grace
            .unwrap_or_else(|| crate::pod_workers::grace_period(pod))
            .max(ctx.timings.minimum_stop_grace);
        ctx.runtime.stop_container(&kill.id, grace).await?;
        if let Some(c) = rt.containers.iter().find(|c| c.id == kill.id) {
            state.runtime.touch_container(&c.id, &c.sandbox_id);
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
    for _ in 0..4 {
        let status = publish(ctx, state, pod, &rt, false, false).await;
        if is_terminal_phase(status.phase.as_deref()) {
            return Ok(Outcome::Terminal);
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
            publish(ctx, state, pod, &rt, false, false).await;
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
/// the API a `syncFrequency` after the last write; `Err` is when to try again while
/// no set-up has succeeded (each failure is a `FailedMount` event).
async fn ensure_volumes(ctx: &Context, state: &mut PodState, pod: &Pod) -> Result<(), Instant> {
    let now = Instant::now();
    match &state.volumes {
        Some((_, at))
            if now < *at + ctx.timings.sync_frequency || !volume_manager::has_api_volumes(pod) =>
        {
            return Ok(());
        }
        None if state.volume_backoff.is_in_backoff_since_update("", now) => {
            return Err(state.volume_backoff.expiry_since_update(""));
        }
        _ => {}
    }
    let downward = env::Downward {
        host_ip: ctx.host_ip.as_deref(),
        pod_ip: None,
    };
    let pod_dir = ctx.runtime.pod_dir(pod);
    match volume_manager::set_up(&ctx.client, pod, &pod_dir, downward).await {
        Ok(volumes) => {
            state.volumes = Some((volumes, now));
            state.volume_backoff.reset("");
            Ok(())
        }
        Err(error) => {
            tracing::warn!(pod = %runtime::pod_key(pod), %error, "setting up volumes failed");
            ctx.events
                .pod(pod, None, Type::Warning, "FailedMount", error.to_string());
            match &mut state.volumes {
                // Running containers keep the content they have until the next period.
                Some((_, at)) => {
                    *at = now;
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

/// Kills a pod: stops its containers with `grace` (at least the minimum),
/// stops its sandboxes, tears its volumes down and reports the final status.
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
    let grace = grace.max(ctx.timings.minimum_stop_grace);
    let stops = rt
        .running()
        .map(|c| ctx.runtime.stop_container(&c.id, grace));
    for result in futures::future::join_all(stops).await {
        result?;
    }
    for c in rt.running() {
        state.runtime.touch_container(&c.id, &c.sandbox_id);
        ctx.events.pod(
            pod,
            Some(&c.name),
            Type::Normal,
            "Killing",
            format!("Stopping container {}", c.name),
        );
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

fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

/// One step of `computePodActions` + `SyncPod`; true if the runtime changed.
async fn converge(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    rt: &runtime::PodStatus,
    wake: &mut Option<Instant>,
) -> runtime::Result<bool> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(false);
    };
    let ready_sandboxes = rt.sandboxes.iter().filter(|s| s.ready).count();
    let sandbox_ok = rt.sandbox().is_some_and(|s| s.ready) && ready_sandboxes == 1;
    let mut acted = false;
    let sandbox_id = if sandbox_ok {
        rt.sandbox().map(|s| s.id.clone()).unwrap_or_default()
    } else {
        if restart_policy(pod) == "Never" && !rt.sandboxes.is_empty() && !rt.containers.is_empty() {
            // The sandbox died after containers ran: upstream does not recreate it for Never.
            return Ok(false);
        }
        for c in rt.running() {
            ctx.runtime
                .stop_container(&c.id, ctx.timings.minimum_stop_grace)
                .await?;
            state.runtime.touch_container(&c.id, &c.sandbox_id);
        }
        for s in rt.sandboxes.iter().filter(|s| s.ready) {
            ctx.runtime.stop_sandbox(&s.id).await?;
            state.runtime.touch_sandbox(&s.id);
        }
        let attempt = rt.sandboxes.first().map_or(0, |s| s.attempt + 1);
        match ctx.runtime.run_sandbox(pod, attempt).await {
            Ok(id) => {
                state.runtime.touch_sandbox(&id);
                id
            }
            Err(error) => {
                tracing::warn!(pod = %runtime::pod_key(pod), %error, "creating pod sandbox failed");
                *wake = earliest(*wake, Instant::now() + ctx.timings.image_backoff_initial);
                return Ok(acted);
            }
        }
    };
    if !sandbox_ok {
        acted = true;
    }
    let fresh_sandbox = !sandbox_ok;
    let attempt = if sandbox_ok {
        rt.sandbox().map_or(0, |s| s.attempt)
    } else {
        rt.sandboxes.first().map_or(0, |s| s.attempt + 1)
    };

    // Init containers, one at a time, in order, until an app container has run.
    let inits = spec.init_containers.as_deref().unwrap_or_default();
    let app_started = spec.containers.iter().any(|c| rt.latest(&c.name).is_some());
    if !inits.is_empty() && (!app_started || fresh_sandbox && restart_policy(pod) != "Never") {
        for c in inits {
            let latest = if fresh_sandbox {
                None
            } else {
                rt.latest(&c.name)
            };
            match latest.map(|l| (l.state, l.exit_code)) {
                Some((ContainerState::Exited, 0)) => continue,
                Some((ContainerState::Running, _)) => return Ok(acted),
                Some((ContainerState::Exited, _)) if restart_policy(pod) == "Never" => {
                    return Ok(acted);
                }
                _ => {
                    let started = start(
                        ctx,
                        state,
                        pod,
                        c,
                        &sandbox_id,
                        attempt,
                        rt.latest(&c.name),
                        wake,
                    )
                    .await?;
                    return Ok(acted || started);
                }
            }
        }
    }
    for c in &spec.containers {
        let latest = rt.latest(&c.name);
        let needs_start = match latest {
            None => true,
            Some(l) if fresh_sandbox => l.state != ContainerState::Running,
            Some(_) => pod_status::should_restart(c, pod, rt),
        };
        if needs_start && pod.metadata.deletion_timestamp.is_none() {
            acted |= start(ctx, state, pod, c, &sandbox_id, attempt, latest, wake).await?;
        }
    }
    Ok(acted)
}

/// The container's environment ([`env::resolve`]); the pod IP is read from
/// the sandbox only when a variable asks for it.
async fn container_env(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    sandbox_id: &str,
) -> Result<Vec<(String, String)>, String> {
    let wants_pod_ip = container.env.iter().flatten().any(|e| {
        e.value_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
            .is_some_and(|f| f.field_path.starts_with("status.podIP"))
    });
    let pod_ip = if wants_pod_ip {
        ctx.runtime
            .sandbox_ip(pod, sandbox_id)
            .await
            .map_err(|e| e.short_message())?
    } else {
        None
    };
    let downward = env::Downward {
        host_ip: ctx.host_ip.as_deref(),
        pod_ip: pod_ip.as_deref(),
    };
    env::resolve(&ctx.client, pod, container, downward).await
}

/// The kubelet's `Failed` event for a container that could not start.
fn report_failed(ctx: &Context, pod: &Pod, container: &str, why: &str) {
    ctx.events.pod(
        pod,
        Some(container),
        Type::Warning,
        "Failed",
        format!("Error: {why}"),
    );
}

/// A container that could not be created or started: the `Failed` event and
/// the waiting reason its status shows until the retry.
fn start_failed(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    container: &Container,
    reason: &str,
    message: String,
) {
    report_failed(ctx, pod, &container.name, &message);
    let reason = reason.to_owned();
    state
        .reasons
        .insert(container.name.clone(), Reason { reason, message });
}

/// Starts one container (`startContainer`), gated by back-off; true if it started.
#[allow(clippy::too_many_arguments)]
async fn start(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    container: &Container,
    sandbox_id: &str,
    sandbox_attempt: u32,
    previous: Option<&runtime::Container>,
    wake: &mut Option<Instant>,
) -> runtime::Result<bool> {
    let now = Instant::now();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let restart_count = match previous {
        Some(p) => p.restart_count + 1,
        // The runtime lost the container (e.g. it restarted): continue from the
        // last reported count, like upstream does from the log directory.
        None => state
            .last_status
            .as_ref()
            .and_then(|s| {
                s.container_statuses
                    .iter()
                    .chain(s.init_container_statuses.iter())
                    .flatten()
                    .find(|c| c.name == container.name)
            })
            .map_or(0, |c| {
                // A status with a container ID counts that run; one without an ID
                // but with a lastState already counted the vanished run.
                c.restart_count + i32::from(c.container_id.is_some())
            }),
    };
    if let Some(prev) = previous.filter(|p| p.state == ContainerState::Exited) {
        let key = format!("{name}_{namespace}_{uid}_{}", container.name);
        let event = instant_of(prev.finished_at);
        if state.crash.is_in_backoff_since(&key, event, now) {
            let delay = state.crash.get(&key);
            ctx.events.pod(
                pod,
                Some(&container.name),
                Type::Warning,
                "BackOff",
                format!(
                    "Back-off restarting failed container {} in pod {name}_{namespace}({uid})",
                    container.name
                ),
            );
            state.reasons.insert(
                container.name.clone(),
                Reason {
                    reason: "CrashLoopBackOff".into(),
                    message: format!(
                        "back-off {} restarting failed container={} pod={name}_{namespace}({uid})",
                        go_duration(delay),
                        container.name
                    ),
                },
            );
            *wake = earliest(
                *wake,
                state.crash.expiry(&key, event) + Duration::from_millis(5),
            );
            return Ok(false);
        }
        state.crash.next(&key, event, now);
    }
    let sandbox_config = ctx.runtime.sandbox_config(pod, sandbox_attempt);
    if let Err(reason) = ensure_image(ctx, state, pod, container, &sandbox_config, wake).await {
        report_failed(ctx, pod, &container.name, &reason.reason);
        state.reasons.insert(container.name.clone(), reason);
        return Ok(false);
    }
    // A failure from here on is retried after the first crash back-off step.
    let retry_at = now + ctx.timings.crash_backoff_initial;
    // `generateContainerConfig`: the environment, then the mounts (a `subPathExpr`
    // expands against the environment); either failing is a CreateContainerConfigError.
    let volumes = state.volumes.as_ref().map(|(v, _)| v);
    let prepared = async {
        let env = container_env(ctx, pod, container, sandbox_id).await?;
        let mounts = match volumes {
            Some(volumes) => volumes.mounts(container, &env).await?,
            None => Vec::new(),
        };
        Ok::<_, String>((env, mounts))
    };
    let (env, mounts) = match prepared.await {
        Ok(prepared) => prepared,
        Err(message) => {
            start_failed(
                ctx,
                state,
                pod,
                container,
                "CreateContainerConfigError",
                message,
            );
            *wake = earliest(*wake, retry_at);
            return Ok(false);
        }
    };
    let config = ctx
        .runtime
        .container_config(pod, container, restart_count, env, mounts);
    let id = match ctx
        .runtime
        .create_container(pod, sandbox_id, config, sandbox_config)
        .await
    {
        Ok(id) => {
            state.runtime.touch_container(&id, sandbox_id);
            ctx.events.pod(
                pod,
                Some(&container.name),
                Type::Normal,
                "Created",
                format!("Created container: {}", container.name),
            );
            id
        }
        Err(error) => {
            let message = error.short_message();
            start_failed(ctx, state, pod, container, "CreateContainerError", message);
            *wake = earliest(*wake, retry_at);
            return Ok(false);
        }
    };
    if let Err(error) = ctx.runtime.start_container(&id).await {
        let message = error.short_message();
        start_failed(ctx, state, pod, container, "RunContainerError", message);
        *wake = earliest(*wake, retry_at);
        // The container exists (created or exited): the status shows it.
        return Ok(true);
    }
    state.reasons.remove(&container.name);
    ctx.events.pod(
        pod,
        Some(&container.name),
        Type::Normal,
        "Started",
        format!("Started container {}", container.name),
    );
    tracing::info!(pod = %runtime::pod_key(pod), container = %container.name, "container started");
    Ok(true)
}

/// The effective pull policy: the spec's, else `Always` for `:latest` or no tag, else `IfNotPresent`.
pub fn pull_policy(container: &Container) -> &str {
    if let Some(p) = container.image_pull_policy.as_deref() {
        return p;
    }
    let image = container.image.as_deref().unwrap_or_default();
    if image.contains('@') {
        return "IfNotPresent";
    }
    let last = image.rsplit('/').next().unwrap_or(image);
    match last.split_once(':') {
        None | Some((_, "latest")) => "Always",
        Some(_) => "IfNotPresent",
    }
}

/// Whether `image` is a valid image reference (`docker/reference` grammar, simplified).
pub fn valid_reference(image: &str) -> bool {
    if image.is_empty() || image.len() > 255 || image.chars().any(|c| c.is_whitespace()) {
        return false;
    }
    let (rest, digest) = match image.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (image, None),
    };
    if let Some(d) = digest {
        let Some((algo, hex)) = d.split_once(':') else {
            return false;
        };
        if algo.is_empty() || hex.len() < 32 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
    }
    let (name, tag) = match rest.rfind(':') {
        Some(i) if !rest[i..].contains('/') => (&rest[..i], Some(&rest[i + 1..])),
        _ => (rest, None),
    };
    if let Some(tag) = tag {
        let mut chars = tag.chars();
        let first_ok = chars
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
        if !first_ok
            || tag.len() > 128
            || !tag
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return false;
        }
    }
    let mut components: Vec<&str> = name.split('/').collect();
    if components.len() > 1 {
        let first = components[0];
        if first.contains('.') || first.contains(':') || first == "localhost" {
            let ok = !first.is_empty()
                && first
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
            if !ok {
                return false;
            }
            components.remove(0);
        }
    }
    components.iter().all(|c| {
        !c.is_empty()
            && c.chars().all(|ch| {
                ch.is_ascii_lowercase() || ch.is_ascii_digit() || matches!(ch, '.' | '_' | '-')
            })
            && c.chars()
                .next()
                .is_some_and(|ch| ch.is_ascii_alphanumeric())
            && c.chars()
                .last()
                .is_some_and(|ch| ch.is_ascii_alphanumeric())
    })
}

/// `EnsureImageExists`: applies the pull policy and the pull back-off.
async fn ensure_image(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    container: &Container,
    sandbox_config: &nodeconform_cri::v1::PodSandboxConfig,
    wake: &mut Option<Instant>,
) -> Result<(), Reason> {
    let image = container.image.as_deref().unwrap_or_default();
    let event = |type_, reason, message: String| {
        ctx.events
            .pod(pod, Some(&container.name), type_, reason, message.clone());
        message
    };
    if !valid_reference(image) {
        return Err(Reason {
            reason: "InvalidImageName".into(),
            message: event(
                Type::Warning,
                "InspectFailed",
                format!(
                    "Failed to apply default image tag {image:?}: couldn't parse image name {image:?}: invalid reference format"
                ),
            ),
        });
    }
    let policy = pull_policy(container);
    let present = if policy == "Always" {
        false
    } else {
        match ctx.runtime.image_size(image).await {
            Ok(size) => size.is_some(),
            Err(error) => {
                *wake = earliest(*wake, Instant::now() + ctx.timings.image_backoff_initial);
                return Err(Reason {
                    reason: "ErrImageInspect".into(),
                    message: format!(
                        "Failed to inspect image {image:?}: {}",
                        error.short_message()
                    ),
                });
            }
        }
    };
    if present {
        event(
            Type::Normal,
            "Pulled",
            format!("Container image {image:?} already present on machine"),
        );
        return Ok(());
    }
    if policy == "Never" {
        return Err(Reason {
            reason: "ErrImageNeverPull".into(),
            message: event(
                Type::Warning,
                "ErrImageNeverPull",
                format!("Container image {image:?} is not present with pull policy of Never"),
            ),
        });
    }
    let key = format!(
        "{}_{image}",
        pod.metadata.uid.as_deref().unwrap_or_default()
    );
    let now = Instant::now();
    if state.image.is_in_backoff_since_update(&key, now) {
        *wake = earliest(*wake, state.image.expiry_since_update(&key));
        return Err(Reason {
            reason: "ImagePullBackOff".into(),
            message: event(
                Type::Normal,
                "BackOff",
                format!("Back-off pulling image {image:?}"),
            ),
        });
    }
    event(Type::Normal, "Pulling", format!("Pulling image {image:?}"));
    let started = std::time::Instant::now();
    match ctx.runtime.pull_image(image, sandbox_config.clone()).await {
        Ok(_) => {
            state.image.reset(&key);
            let took = go_duration(started.elapsed());
            let size = match ctx.runtime.image_size(image).await {
                Ok(Some(size)) => format!(" Image size: {size} bytes."),
                _ => String::new(),
            };
            event(
                Type::Normal,
                "Pulled",
                format!(
                    "Successfully pulled image {image:?} in {took} ({took} including waiting).{size}"
                ),
            );
            Ok(())
        }
        Err(error) => {
            state.image.next(&key, now, now);
            // Sync again halfway through the back-off to report ImagePullBackOff, like a requeue.
            let half = state.image.get(&key) / 2;
            *wake = earliest(*wake, now + half);
            Err(Reason {
                reason: "ErrImagePull".into(),
                message: event(
                    Type::Warning,
                    "Failed",
                    format!("Failed to pull image {image:?}: {}", error.short_message()),
                ),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(image: &str, policy: Option<&str>) -> Container {
        Container {
            name: "c".into(),
            image: Some(image.into()),
            image_pull_policy: policy.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn default_pull_policy_follows_the_tag() {
        assert_eq!(pull_policy(&container("busybox", None)), "Always");
        assert_eq!(pull_policy(&container("busybox:latest", None)), "Always");
        assert_eq!(
            pull_policy(&container("busybox:1.36", None)),
            "IfNotPresent"
        );
        assert_eq!(
            pull_policy(&container("localhost:5000/busybox", None)),
            "Always"
        );
        assert_eq!(
            pull_policy(&container("busybox:1.36", Some("Never"))),
            "Never"
        );
    }

    #[test]
    fn image_references() {
        for ok in [
            "busybox",
            "busybox:1.36",
            "docker.io/library/busybox:latest",
            "localhost:5000/a/b:c",
            "registry.k8s.io/pause:3.9",
            "registry.invalid/nothing:1",
        ] {
            assert!(valid_reference(ok), "{ok}");
        }
        for bad in [
            "",
            "Busybox",
            "busy box",
            "busybox:",
            "a//b",
            "-a",
            "busybox:tag!",
        ] {
            assert!(!valid_reference(bad), "{bad}");
        }
    }
}
