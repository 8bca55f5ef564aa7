//! The prober: startup, liveness and readiness probes of running app containers
//! and sidecars (the kubelet's `prober` workers and results managers).
//!
//! A pod worker owns one [`Prober`]. It tracks the running container of
//! each name, runs the probes that are due (exec via CRI `ExecSync`;
//! `tcpSocket`, `httpGet` and `grpc` (`grpc.health.v1.Health/Check`) to the
//! pod IP through [`crate::handler`], which lifecycle hooks share), and turns
//! consecutive results into a
//! state with the probe's success and failure thresholds. Readiness starts
//! `false`, liveness `true`, startup `false`; liveness and readiness wait for
//! the startup probe to succeed. A failed liveness or startup probe asks the
//! worker to kill the container, which the restart policy then restarts.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Pod, Probe};
use tokio::time::Instant;

use crate::handler;
use crate::podutil;
use crate::runtime::{self, ContainerState, Runtime};

/// Which probes a container declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Declared {
    /// A startup probe.
    pub startup: bool,
    /// A liveness probe.
    pub liveness: bool,
    /// A readiness probe.
    pub readiness: bool,
}

/// The probes `container` declares.
pub fn declared(container: &k8s_openapi::api::core::v1::Container) -> Declared {
    Declared {
        startup: container.startup_probe.is_some(),
        liveness: container.liveness_probe.is_some(),
        readiness: container.readiness_probe.is_some(),
    }
}

/// One probe of one container.
#[derive(Debug, Clone)]
struct ProbeState {
    spec: Probe,
    result: bool,
    successes: i32,
    failures: i32,
    next: Instant,
}

impl ProbeState {
    fn new(spec: Probe, initial: bool, started_at: Instant) -> Self {
        let delay = secs(spec.initial_delay_seconds, 0);
        Self {
            spec,
            result: initial,
            successes: 0,
            failures: 0,
            next: started_at + delay,
        }
    }

    fn period(&self) -> Duration {
        let period = secs(self.spec.period_seconds, 10);
        match crate::mutants::active(crate::mutants::Mutant::ProbePeriodHalf) {
            true => period / 2,
            false => period,
        }
    }

    /// Records one result; returns true if the state changed.
    fn record(&mut self, ok: bool, now: Instant) -> bool {
        self.next = now + self.period();
        if ok {
            self.successes += 1;
            self.failures = 0;
        } else {
            self.failures += 1;
            self.successes = 0;
        }
        let success_threshold = self.spec.success_threshold.unwrap_or(1).max(1);
        let failure_threshold =
            match crate::mutants::active(crate::mutants::Mutant::ProbeFailureThresholdOne) {
                true => 1,
                false => self.spec.failure_threshold.unwrap_or(3).max(1),
            };
        let new = if ok && self.successes >= success_threshold {
            true
        } else if !ok && self.failures >= failure_threshold {
            false
        } else {
            self.result
        };
        let changed = new != self.result;
        self.result = new;
        changed
    }
}

fn secs(v: Option<i32>, default: u64) -> Duration {
    Duration::from_secs(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(default))
}

/// The probes of one running container.
#[derive(Debug, Clone)]
struct Tracked {
    id: String,
    /// The container's name and ports, which probes name.
    container: Container,
    startup: Option<ProbeState>,
    liveness: Option<ProbeState>,
    readiness: Option<ProbeState>,
}

impl Tracked {
    fn started(&self) -> bool {
        self.startup.as_ref().is_none_or(|p| p.result)
    }
}

/// A container to restart because its liveness or startup probe failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// Container name.
    pub name: String,
    /// Container ID.
    pub id: String,
    /// Which probe failed: `liveness` or `startup`.
    pub probe: &'static str,
    /// The failed probe's own `terminationGracePeriodSeconds`, which
    /// overrides the pod's for this kill.
    pub grace: Option<Duration>,
}

impl Kill {
    fn new(name: &str, id: &str, which: &'static str, probe: &Probe) -> Self {
        Self {
            name: name.to_owned(),
            id: id.to_owned(),
            probe: which,
            grace: probe
                .termination_grace_period_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
        }
    }
}

/// A failed probe run (the kubelet's `Unhealthy` event), or one that succeeded with a
/// warning (`ProbeWarning`: an HTTP probe redirected to another host).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
    /// `Unhealthy` or `ProbeWarning`.
    pub reason: &'static str,
    /// Container name.
    pub container: String,
    /// `Liveness probe failed: <output>` and the like.
    pub message: String,
}

/// Probe results of a pod's containers.
#[derive(Debug, Default)]
pub struct Prober {
    tracked: HashMap<String, Tracked>,
    kills: Vec<Kill>,
    unhealthy: Vec<Unhealthy>,
}

/// The readiness and started state of a container, by container name.
pub type Results = HashMap<String, (bool, bool)>;

impl Prober {
    /// Aligns the tracked containers with the running ones of `rt`; once the pod is being
    /// deleted only readiness probes run.
    pub fn track(&mut self, pod: &Pod, rt: &runtime::PodStatus) {
        let Some(spec) = pod.spec.as_ref() else {
            return;
        };
        let deleting = pod.metadata.deletion_timestamp.is_some();
        let mut keep = HashMap::new();
        let sidecars = spec
            .init_containers
            .iter()
            .flatten()
            .filter(|c| podutil::is_restartable_init_container(c));
        for c in spec.containers.iter().chain(sidecars) {
            let d = declared(c);
            if !(d.startup || d.liveness || d.readiness) {
                continue;
            }
            let Some(latest) = rt
                .latest(&c.name)
                .filter(|l| l.state == ContainerState::Running)
            else {
                continue;
            };
            let tracked = match self.tracked.remove(&c.name) {
                Some(t) if t.id == latest.id => t,
                _ => {
                    let started = started_instant(latest.started_at);
                    Tracked {
                        id: latest.id.clone(),
                        container: Container {
                            name: c.name.clone(),
                            ports: c.ports.clone(),
                            ..Default::default()
                        },
                        startup: c
                            .startup_probe
                            .clone()
                            .map(|p| ProbeState::new(p, false, started)),
                        liveness: c
                            .liveness_probe
                            .clone()
                            .map(|p| ProbeState::new(p, true, started)),
                        readiness: c
                            .readiness_probe
                            .clone()
                            .map(|p| ProbeState::new(p, false, started)),
                    }
                }
            };
            keep.insert(c.name.clone(), tracked);
        }
        self.tracked = keep;
        if deleting {
            self.terminate();
        }
    }

    /// The pod is being deleted: liveness probes stop and a startup probe counts as passed
    /// (the kubelet's workers set both to success for a quiet shutdown); readiness probes
    /// go on.
    fn terminate(&mut self) {
        for t in self.tracked.values_mut() {
            t.liveness = None;
            if let Some(p) = t.startup.as_mut() {
                p.result = true;
            }
        }
    }

    /// `(ready, started)` of every probed running container.
    pub fn results(&self) -> Results {
        self.tracked
            .iter()
            .map(|(name, t)| {
                let started = t.started();
                let ready = started && t.readiness.as_ref().is_none_or(|p| p.result);
                (name.clone(), (ready, started))
            })
            .collect()
    }

    /// When the next probe is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.tracked
            .values()
            .flat_map(|t| {
                let started = t.started();
                let startup = t.startup.as_ref().filter(|p| !p.result).map(|p| p.next);
                let others = [t.liveness.as_ref(), t.readiness.as_ref()]
                    .into_iter()
                    .flatten()
                    .filter(move |_| started)
                    .map(|p| p.next);
                startup.into_iter().chain(others)
            })
            .min()
    }

    /// Containers whose liveness or startup probe failed, to kill.
    pub fn take_kills(&mut self) -> Vec<Kill> {
        std::mem::take(&mut self.kills)
    }

    /// The probe runs that failed since the last call, to report.
    pub fn take_unhealthy(&mut self) -> Vec<Unhealthy> {
        std::mem::take(&mut self.unhealthy)
    }

    /// Runs every due probe; returns true if a result changed.
    pub async fn run_due(&mut self, runtime: &Runtime, pod_ip: Option<&str>) -> bool {
        let now = Instant::now();
        let mut changed = false;
        let unhealthy = &mut self.unhealthy;
        let mut run = async |id: &str, container: &Container, kind: &str, spec: &Probe| {
            let name = &container.name;
            let result = run_probe(runtime, id, spec, container, pod_ip).await;
            let (reason, message) = match &result {
                Err(output) => ("Unhealthy", format!("{kind} probe failed: {output}")),
                Ok(Some(warning)) => ("ProbeWarning", format!("{kind} probe warning: {warning}")),
                Ok(None) => return true,
            };
            unhealthy.push(Unhealthy {
                reason,
                container: name.to_owned(),
                message,
            });
            result.is_ok()
        };
        for (name, t) in self.tracked.iter_mut() {
            let was_started = t.started();
            if let Some(p) = t.startup.as_mut().filter(|p| !p.result && p.next <= now) {
                let ok = run(&t.id, &t.container, "Startup", &p.spec).await;
                changed |= p.record(ok, now);
                if p.failures >= p.spec.failure_threshold.unwrap_or(3).max(1) {
                    self.kills.push(Kill::new(name, &t.id, "startup", &p.spec));
                    continue;
                }
            }
            // Each probe ticks on its own period (the kubelet's workers): a liveness or
            // readiness tick before the container has started is skipped, not saved for later.
            // Once it has started, readiness runs at once (the status update triggers it) and
            // liveness waits for its next tick.
            if !t.started() {
                let ticks = [t.liveness.as_mut(), t.readiness.as_mut()];
                for p in ticks.into_iter().flatten().filter(|p| p.next <= now) {
                    p.next = now + p.period();
                }
                continue;
            }
            if !was_started {
                if let Some(p) = t.liveness.as_mut().filter(|p| p.next <= now) {
                    p.next = now + p.period();
                }
                if let Some(p) = t.readiness.as_mut() {
                    p.next = now;
                }
            }
            if let Some(p) = t.liveness.as_mut().filter(|p| p.next <= now) {
                let ok = run(&t.id, &t.container, "Liveness", &p.spec).await;
                changed |= p.record(ok, now);
                if !p.result {
                    self.kills.push(Kill::new(name, &t.id, "liveness", &p.spec));
                }
            }
            if let Some(p) = t.readiness.as_mut().filter(|p| p.next <= now) {
                let ok = run(&t.id, &t.container, "Readiness", &p.spec).await;
                changed |= p.record(ok, now);
            }
        }
        changed
    }
}

fn started_instant(nanos: i64) -> Instant {
    let now = Instant::now();
    let then = std::time::UNIX_EPOCH + Duration::from_nanos(u64::try_from(nanos).unwrap_or(0));
    match std::time::SystemTime::now().duration_since(then) {
        Ok(ago) => now.checked_sub(ago).unwrap_or(now),
        Err(_) => now,
    }
}

/// Runs one probe of `container`: `Err` with the output (or the error) the kubelet puts in
/// its `Unhealthy` event when it fails, `Ok(Some(_))` with its `ProbeWarning` when it
/// succeeds with one.
async fn run_probe(
    runtime: &Runtime,
    container_id: &str,
    spec: &Probe,
    container: &Container,
    pod_ip: Option<&str>,
) -> Result<Option<String>, String> {
    let timeout = secs(spec.timeout_seconds, 1).max(Duration::from_secs(1));
    if let Some(exec) = &spec.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let result = runtime.exec_sync(container_id, cmd, timeout).await;
        tracing::debug!(container = %container_id, ?result, "exec probe");
        return match result {
            Ok((0, _)) => Ok(None),
            Ok((_, output)) => Err(output),
            Err(error) => Err(error.short_message()),
        };
    }
    let no_address = || "no address to probe".to_owned();
    if let Some(tcp) = &spec.tcp_socket {
        let host = tcp.host.as_deref().filter(|h| !h.is_empty()).or(pod_ip);
        let port = handler::resolve_port(&tcp.port, container)?;
        return handler::tcp_connect(host.ok_or_else(no_address)?, port, timeout)
            .await
            .map(|()| None);
    }
    if let Some(http) = &spec.http_get {
        let get = handler::HttpGet::new(http, container, pod_ip)?;
        return match tokio::time::timeout(timeout, get.send(handler::Purpose::Probe)).await {
            Err(_) => Err(format!(
                "Get {:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
                get.url()
            )),
            Ok(Err(error)) => Err(error),
            // A redirect to another host is a success with a warning.
            Ok(Ok(handler::Response::OtherHost(_, body))) => Ok(Some(format!(
                "Probe terminated redirects, Response body: {body}"
            ))),
            Ok(Ok(handler::Response::Status(code))) if (200..400).contains(&code) => Ok(None),
            Ok(Ok(handler::Response::Status(code))) => {
                Err(format!("HTTP probe failed with statuscode: {code}"))
            }
        };
    }
    if let Some(grpc) = &spec.grpc {
        let service = grpc.service.as_deref().unwrap_or_default();
        return handler::grpc_check(pod_ip.ok_or_else(no_address)?, grpc.port, service, timeout)
            .await
            .map(|()| None);
    }
    Err("missing probe handler".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(success: i32, failure: i32) -> ProbeState {
        ProbeState::new(
            Probe {
                success_threshold: Some(success),
                failure_threshold: Some(failure),
                ..Default::default()
            },
            false,
            Instant::now(),
        )
    }

    #[test]
    fn thresholds_gate_transitions() {
        let now = Instant::now();
        let mut p = probe(2, 3);
        assert!(!p.record(true, now), "one success is not enough");
        assert!(p.record(true, now), "two successes make it ready");
        assert!(!p.record(false, now));
        assert!(!p.record(false, now));
        assert!(p.record(false, now), "the third failure flips it");
        assert!(!p.result);
        assert_eq!(p.next, now + Duration::from_secs(10));
    }

    #[test]
    fn no_probes_by_default() {
        assert_eq!(
            declared(&k8s_openapi::api::core::v1::Container::default()),
            Declared::default()
        );
    }
}
