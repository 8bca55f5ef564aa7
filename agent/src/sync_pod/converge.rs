//! `computePodActions` + `SyncPod`'s order: sandbox, init containers one at a
//! time, then the app containers.

use k8s_openapi::api::core::v1::Pod;
use tokio::time::Instant;

use super::sandbox::PodSandbox;
use super::start::start;
use super::{Context, PodState, earliest};
use crate::events::Type;
use crate::pod_status;
use crate::runtime::{self, ContainerState};

pub(super) fn restart_policy(pod: &Pod) -> &str {
    pod.spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("Always")
}

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
    let sandbox = if let Some(s) = rt.sandbox().filter(|_| sandbox_ok) {
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
        let created = match ctx.runtime.sandbox_config(pod, attempt, dns.config) {
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
                    let started =
                        start(ctx, state, pod, c, &sandbox, rt.latest(&c.name), wake).await?;
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
            acted |= start(ctx, state, pod, c, &sandbox, latest, wake).await?;
        }
    }
    Ok(acted)
}
