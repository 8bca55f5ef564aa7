//! `computePodActions` + `SyncPod`'s order: sandbox, init containers (one at a
//! time, sidecars kept running, [`init_containers`]), then the app containers; and
//! `KillPod` for sidecars left running once the app containers are done.

use k8s_openapi::api::core::v1::{Container, Pod};
use tokio::time::Instant;

use super::init_containers::{self, InitActions};
use super::kill;
use super::resize;
use super::sandbox::PodSandbox;
use super::start::start;
use super::{Context, PodState, earliest};
use crate::events::Type;
use crate::pod_status;
use crate::podutil::{init_containers, restart_policy};
use crate::runtime::{self, ContainerState, container_hash};

/// One step of `computePodActions` + `SyncPod`; true if the runtime changed.
pub(super) async fn converge(
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
    // `EnsureExists` and `SetPodCgroupConfig`: the pod's cgroup, sized to its allocation,
    // before the runtime puts a sandbox or a container in it (a container restarted by a
    // resize must fit the pod's CPU quota and memory limit).
    let cgroup = ctx.runtime.ensure_pod_cgroup(pod);
    let sandbox = if let Some(s) = rt.sandbox().filter(|_| sandbox_ok) {
        if let Err(error) = &cgroup {
            tracing::warn!(pod = %runtime::pod_key(pod), %error, "sizing the pod's cgroup");
        }
        PodSandbox::existing(s.id.clone(), s.attempt, s.ip.clone())
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
        // `generatePodSandboxConfig`, with its DNS warnings (no cluster DNS, limits exceeded).
        let dns = ctx.runtime.dns().pod_dns(pod);
        for (reason, message) in dns.warnings {
            ctx.events.pod(pod, None, Type::Warning, reason, message);
        }
        // A sandbox is not run without its cgroup.
        let config = cgroup
            .map_err(runtime::Error::from)
            .and_then(|()| ctx.runtime.sandbox_config(pod, attempt, dns.config));
        let created = match config {
            Ok(config) => ctx
                .runtime
                .run_sandbox(pod, config.clone())
                .await
                .map(|id| PodSandbox::created(id, config)),
            Err(error) => Err(error),
        };
        match created {
            Ok(sandbox) => {
                state.runtime.touch_sandbox(&sandbox.id);
                sandbox
            }
            Err(error) => {
                tracing::warn!(pod = %runtime::pod_key(pod), error = %error.short_message(), "creating pod sandbox failed");
                ctx.events.pod(
                    pod,
                    None,
                    Type::Warning,
                    "FailedCreatePodSandBox",
                    format!("Failed to create pod sandbox: {}", error.short_message()),
                );
                *wake = earliest(*wake, Instant::now() + ctx.timings.image_backoff_initial);
                return Ok(acted);
            }
        }
    };
    if !sandbox_ok {
        acted = true;
    }
    let fresh_sandbox = !sandbox_ok;

    let inits = init_containers(pod);
    if fresh_sandbox {
        // A new sandbox starts from the first init container, unless the app
        // containers ran and the pod does not restart them.
        let app_started = spec.containers.iter().any(|c| rt.latest(&c.name).is_some());
        if let Some(first) = inits.first()
            && (!app_started || restart_policy(pod) != "Never")
        {
            let started = start(
                ctx,
                state,
                pod,
                first,
                &sandbox,
                rt.latest(&first.name),
                wake,
            )
            .await?;
            return Ok(acted || started);
        }
    }
    let probes = state.prober.results();
    let init = if fresh_sandbox {
        InitActions {
            initialized: true,
            ..InitActions::default()
        }
    } else {
        init_containers::compute(pod, rt, |name| {
            probes.get(name).is_none_or(|&(_, started)| started)
        })
    };
    if init.failed {
        // The phase says Failed; the worker then kills the pod.
        return Ok(acted);
    }
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let running = |c: &Container| {
        rt.latest(&c.name)
            .filter(|l| l.state == ContainerState::Running)
    };
    // `containerChanged`: a running app container whose image was changed is killed and
    // started again, whatever the restart policy.
    let changed: Vec<&Container> = spec
        .containers
        .iter()
        .filter(|c| {
            init.initialized
                && !fresh_sandbox
                && !deleting
                && running(c).is_some_and(|l| l.hash.is_some_and(|h| h != container_hash(c)))
        })
        .collect();
    // `computePodResizeAction`: running containers whose allocation changed are
    // updated in place, or restarted where their resize policy asks for it.
    let mut resize_restarts: Vec<&Container> = Vec::new();
    if fresh_sandbox {
        resize::sandbox_sized(pod, &mut state.actuated);
    } else if !deleting {
        // The pod's cgroup first, then its containers.
        acted |= resize::resize_pod(&ctx.runtime, &mut state.actuated, pod, &sandbox.id).await?;
        for c in inits.iter().chain(spec.containers.iter()) {
            let Some(latest) = running(c).filter(|_| !changed.contains(&c)) else {
                continue;
            };
            match resize::action(pod, c, latest, &state.actuated) {
                Some(resize::Action::Update) => {
                    resize::update(&ctx.runtime, &mut state.actuated, pod, c, latest).await?;
                }
                Some(resize::Action::Restart) => resize_restarts.push(c),
                None => {}
            }
        }
    }
    let to_start: Vec<&Container> = if init.initialized {
        spec.containers
            .iter()
            .filter(|c| match rt.latest(&c.name) {
                None => true,
                Some(l) if fresh_sandbox => l.state != ContainerState::Running,
                Some(_) => {
                    changed.contains(c)
                        || resize_restarts.contains(c)
                        || state.restart_after_kill.contains_key(&c.name)
                        || pod_status::should_restart(c, pod, rt)
                }
            })
            .collect()
    } else {
        Vec::new()
    };
    if init.initialized
        && to_start.is_empty()
        && !spec.containers.iter().any(|c| running(c).is_some())
    {
        // `KillPod`: no app container runs or will run again, so the sidecars
        // must not keep the pod alive: stop them, in reverse order, restarting none.
        return Ok(kill_sidecars(ctx, state, pod, rt).await? || acted);
    }
    let sidecars_changed = init.changed.iter().map(|&i| {
        let c = &inits[i];
        (c, format!("Init container {} definition changed", c.name))
    });
    let apps_changed = changed.iter().map(|&c| {
        let message = format!("Container {} definition changed, will be restarted", c.name);
        (c, message)
    });
    let resized = resize_restarts
        .iter()
        .map(|&c| (c, resize::restart_message(&c.name)));
    for (c, message) in sidecars_changed.chain(apps_changed).chain(resized) {
        if !deleting && let Some(latest) = running(c) {
            kill_changed(ctx, state, pod, rt, latest, &message).await?;
            acted = true;
        }
    }
    for &i in &init.start {
        let c = &inits[i];
        acted |= start(ctx, state, pod, c, &sandbox, rt.latest(&c.name), wake).await?;
    }
    if !deleting {
        for c in to_start {
            acted |= start(ctx, state, pod, c, &sandbox, rt.latest(&c.name), wake).await?;
        }
    }
    Ok(acted)
}

/// Kills a running container whose spec changed, before it is started again
/// with the new one (`killContainer` with the pod's grace period).
async fn kill_changed(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    rt: &runtime::PodStatus,
    container: &runtime::Container,
    message: &str,
) -> runtime::Result<()> {
    let kill = kill::Kill {
        id: &container.id,
        name: &container.name,
        message: Some(message),
        grace: crate::pod_workers::grace_period(pod),
        pod_ip: rt.sandbox().and_then(|s| s.ip.as_deref()),
        order: None,
    };
    kill::kill_container(ctx, pod, kill).await?;
    state
        .runtime
        .touch_container(&container.id, &container.sandbox_id);
    Ok(())
}

/// Stops the pod's running sidecars once its app containers are done
/// (`killPodWithSyncResult` with the pod's grace period and the termination ordering).
async fn kill_sidecars(
    ctx: &Context,
    state: &mut PodState,
    pod: &Pod,
    rt: &runtime::PodStatus,
) -> runtime::Result<bool> {
    if rt.running().next().is_none() {
        return Ok(false);
    }
    let pod_ip = rt.sandbox().and_then(|s| s.ip.as_deref());
    kill::kill_running(ctx, pod, rt, crate::pod_workers::grace_period(pod), pod_ip).await?;
    for c in rt.running() {
        state.runtime.touch_container(&c.id, &c.sandbox_id);
    }
    Ok(true)
}
