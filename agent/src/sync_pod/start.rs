//! `startContainer`: back-off, image, configuration, create, start.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod};
use nodeconform_cri::v1 as cri;
use tokio::time::Instant;

use super::image::ensure_image;
use super::kill::{Kill, kill_container};
use super::sandbox::PodSandbox;
use super::{Context, PodState, earliest, instant_of};
use crate::backoff::go_duration;
use crate::env;
use crate::events::Type;
use crate::lifecycle;
use crate::pod_hostname::{self, HostName};
use crate::pod_status::Reason;
use crate::runtime::{self, ContainerState};

/// The container's environment ([`env::resolve`]); the pod IP is asked for
/// only when a variable needs it.
async fn container_env(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    sandbox: &PodSandbox,
) -> Result<Vec<(String, String)>, String> {
    let wants_pod_ip = container.env.iter().flatten().any(|e| {
        e.value_from
            .as_ref()
            .and_then(|f| f.field_ref.as_ref())
            .is_some_and(|f| f.field_path.starts_with("status.podIP"))
    });
    let pod_ip = if wants_pod_ip {
        sandbox.ip(ctx, pod).await.map_err(|e| e.short_message())?
    } else {
        None
    };
    let allocatable = ctx.allocatable();
    let downward = env::Downward {
        host_ip: ctx.host_ip.as_deref(),
        pod_ip: pod_ip.as_deref(),
        allocatable: allocatable.as_ref(),
    };
    // As the kubelet: a static pod does not wait for the first list of
    // services (it may run before the API server does).
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let links = pod.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false);
    let services = match ctx.services.env(namespace, links) {
        Err(_) if crate::pod_config::is_static(pod) => Default::default(),
        services => services?,
    };
    env::resolve(&ctx.client, pod, container, downward, &services).await
}

/// The pod's `/etc/hosts` for `container` (`makeHostsMount`), unless the
/// container mounts something there itself or the pod has no IP yet.
async fn hosts_mount(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    sandbox: &PodSandbox,
) -> Result<Option<cri::Mount>, String> {
    const ETC_HOSTS: &str = "/etc/hosts";
    let own = container
        .volume_mounts
        .iter()
        .flatten()
        .any(|m| m.mount_path == ETC_HOSTS);
    if own {
        return Ok(None);
    }
    let spec = pod.spec.as_ref();
    let aliases = spec
        .and_then(|s| s.host_aliases.as_deref())
        .unwrap_or_default();
    let content = if spec.and_then(|s| s.host_network) == Some(true) {
        let node_hosts = tokio::fs::read_to_string(ETC_HOSTS)
            .await
            .map_err(|e| format!("reading {ETC_HOSTS}: {e}"))?;
        pod_hostname::node_hosts_file(&node_hosts, aliases)
    } else {
        let ip = sandbox.ip(ctx, pod).await.map_err(|e| e.short_message())?;
        let Some(ip) = ip else {
            return Ok(None);
        };
        let name = HostName::of(pod, ctx.runtime.cluster_domain()).map_err(|e| e.to_string())?;
        pod_hostname::managed_hosts_file(&[ip], &name, aliases)
    };
    let path = pod_hostname::write_hosts_file(&ctx.runtime.pod_dir(pod), &content)
        .map_err(|e| format!("writing the hosts file of the pod: {e}"))?;
    Ok(Some(cri::Mount {
        container_path: ETC_HOSTS.to_owned(),
        host_path: path.to_string_lossy().into_owned(),
        selinux_relabel: true,
        ..Default::default()
    }))
}

/// The kubelet's `Failed` event for a container that could not start.
pub(super) fn report_failed(ctx: &Context, pod: &Pod, container: &str, why: &str) {
    ctx.events.pod(
        pod,
        Some(container),
        Type::Warning,
        "Failed",
        format!("Error: {why}"),
    );
}

/// The kubelet's `FailedPostStartHook` event; like the kubelet's, it does
/// not carry the hook's message (which may hold secrets).
fn report_failed_post_start(ctx: &Context, pod: &Pod, container: &str) {
    ctx.events.pod(
        pod,
        Some(container),
        Type::Warning,
        "FailedPostStartHook",
        "PostStartHook failed".into(),
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
pub(super) async fn start(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    container: &Container,
    sandbox: &PodSandbox,
    previous: Option<&runtime::Container>,
    wake: &mut Option<Instant>,
) -> runtime::Result<bool> {
    if state.kill_requested() {
        // The worker kills the pod next: start nothing more.
        return Ok(false);
    }
    let now = Instant::now();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let uid = pod.metadata.uid.as_deref().unwrap_or_default();
    let restart_count = match previous {
        Some(p) if crate::mutants::active(crate::mutants::Mutant::RestartCountFrozen) => {
            p.restart_count
        }
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
    // `doBackOff`: from the end of the latest exited run in the status the sync
    // read; after a probe kill that is the run before the killed one.
    let exited = match state.restart_after_kill.get(&container.name) {
        Some(before_kill) => *before_kill,
        None => previous
            .filter(|p| p.state == ContainerState::Exited)
            .map(|p| p.finished_at),
    };
    if let Some(finished_at) = exited {
        // `GetStableKey`: with the spec hash, so a new image starts without back-off.
        let hash = match crate::mutants::active(crate::mutants::Mutant::BackoffKeptOnUpdate) {
            true => 0,
            false => runtime::container_hash(container),
        };
        let key = format!("{name}_{namespace}_{uid}_{}_{hash:x}", container.name);
        let event = instant_of(finished_at);
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
    let sandbox_config = sandbox.config(ctx, pod).await?;
    if let Err(reason) = ensure_image(ctx, state, pod, container, sandbox_config, wake).await {
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
        let env = container_env(ctx, pod, container, sandbox).await?;
        let mut mounts = match volumes {
            Some(volumes) => volumes.mounts(container, &env).await?,
            None => Vec::new(),
        };
        mounts.extend(hosts_mount(ctx, pod, container, sandbox).await?);
        Ok::<_, String>((env, mounts))
    };
    // Then the image's user (`getImageUser`) for `verifyRunAsNonRoot` and the
    // security context; a failure of either is a CreateContainerConfigError too.
    let image = container.image.as_deref().unwrap_or_default();
    let configured = async {
        let (env, mounts) = prepared.await?;
        let user = ctx
            .runtime
            .image_user(image)
            .await
            .map_err(|e| e.short_message())?;
        runtime::security::verify_run_as_non_root(pod, container, &user)
            .map_err(|e| e.to_string())?;
        ctx.runtime
            .container_config(pod, container, restart_count, env, mounts, &user)
            .map_err(|e| e.to_string())
    };
    let config = match configured.await {
        Ok(config) => config,
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
    let log_path = ctx.runtime.pod_log_dir(pod).join(&config.log_path);
    let id = match ctx
        .runtime
        .create_container(pod, &sandbox.id, config, sandbox_config.clone())
        .await
    {
        Ok(id) => {
            state.runtime.touch_container(&id, &sandbox.id);
            let resources = runtime::effective(pod, container);
            state.actuated.containers.insert(id.clone(), resources);
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
    ctx.runtime
        .link_container_log(pod, &container.name, &id, &log_path)
        .await;
    state.reasons.remove(&container.name);
    ctx.events.pod(
        pod,
        Some(&container.name),
        Type::Normal,
        "Started",
        format!("Started container {}", container.name),
    );
    tracing::info!(pod = %runtime::pod_key(pod), container = %container.name, "container started");
    state.restart_after_kill.remove(&container.name);
    let hook = post_start(ctx, pod, container, &id, sandbox);
    let result = tokio::select! {
        result = hook => result,
        () = state.kill_signal() => {
            // The kubelet cancels the hook with the sync; the kill that follows stops the container.
            tracing::info!(pod = %runtime::pod_key(pod), container = %container.name, "postStart hook cancelled: the pod is being killed");
            report_failed_post_start(ctx, pod, &container.name);
            return Ok(true);
        }
    };
    if let Err(error) = result {
        tracing::warn!(pod = %runtime::pod_key(pod), container = %container.name, %error, "postStart hook failed");
        report_failed_post_start(ctx, pod, &container.name);
        let kill = Kill {
            id: &id,
            name: &container.name,
            message: Some("FailedPostStartHook"),
            grace: crate::pod_workers::grace_period(pod),
            pod_ip: None,
            order: None,
        };
        kill_container(ctx, pod, kill).await?;
        // Shown as the waiting reason until the container is started again.
        state.reasons.insert(
            container.name.clone(),
            Reason {
                reason: "PostStartHookError".into(),
                message: error.to_string(),
            },
        );
        *wake = earliest(*wake, retry_at);
    }
    Ok(true)
}

/// Step 4 of `startContainer`: the `postStart` hook, if any, before the
/// container counts as started (the worker reports nothing until it returns).
async fn post_start(
    ctx: &Context,
    pod: &Pod,
    container: &Container,
    id: &str,
    sandbox: &PodSandbox,
) -> Result<(), lifecycle::Error> {
    let Some(hook) = container
        .lifecycle
        .as_ref()
        .and_then(|l| l.post_start.as_ref())
        .filter(|_| !crate::mutants::active(crate::mutants::Mutant::PostStartSkipped))
    else {
        return Ok(());
    };
    let pod_ip = if hook.http_get.as_ref().is_some_and(|h| h.host.is_none()) {
        sandbox.ip(ctx, pod).await.ok().flatten()
    } else {
        None
    };
    let target = lifecycle::Target {
        pod,
        container,
        container_id: id,
        pod_ip: pod_ip.as_deref(),
    };
    lifecycle::run(&ctx.runtime, target, hook, None).await
}
