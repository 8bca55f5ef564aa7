//! The prober: startup, liveness and readiness probes of running app containers
//! and sidecars (the kubelet's `prober` workers and results managers).
//!
//! A pod worker owns one [`Prober`]. It tracks the running container of
//! each name, runs the probes that are due (exec via CRI `ExecSync`,
//! `tcpSocket`, `httpGet` and `grpc` (`grpc.health.v1.Health/Check`) by
//! connecting to the pod IP), and turns consecutive results into a
//! state with the probe's success and failure thresholds. Readiness starts
//! `false`, liveness `true`, startup `false`; liveness and readiness wait for
//! the startup probe to succeed. A failed liveness or startup probe asks the
//! worker to kill the container, which the restart policy then restarts.

use std::collections::HashMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::time::Instant;

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
        secs(self.spec.period_seconds, 10)
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
        let failure_threshold = self.spec.failure_threshold.unwrap_or(3).max(1);
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

/// A failed probe run: the kubelet's `Unhealthy` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unhealthy {
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
        let mut run = async |name: &str, id: &str, kind: &str, spec: &Probe| {
            let result = run_probe(runtime, id, spec, pod_ip).await;
            if let Err(output) = &result {
                unhealthy.push(Unhealthy {
                    container: name.to_owned(),
                    message: format!("{kind} probe failed: {output}"),
                });
            }
            result.is_ok()
        };
        for (name, t) in self.tracked.iter_mut() {
            let was_started = t.started();
            if let Some(p) = t.startup.as_mut().filter(|p| !p.result && p.next <= now) {
                let ok = run(name, &t.id, "Startup", &p.spec).await;
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
                let ok = run(name, &t.id, "Liveness", &p.spec).await;
                changed |= p.record(ok, now);
                if !p.result {
                    self.kills.push(Kill::new(name, &t.id, "liveness", &p.spec));
                }
            }
            if let Some(p) = t.readiness.as_mut().filter(|p| p.next <= now) {
                let ok = run(name, &t.id, "Readiness", &p.spec).await;
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

fn port(p: &IntOrString) -> Option<u16> {
    match p {
        IntOrString::Int(i) => u16::try_from(*i).ok(),
        IntOrString::String(s) => s.parse().ok(),
    }
}

/// Runs one probe: `Err` with the output (or the error) the kubelet puts in
/// its `Unhealthy` event when it fails.
async fn run_probe(
    runtime: &Runtime,
    container_id: &str,
    spec: &Probe,
    pod_ip: Option<&str>,
) -> Result<(), String> {
    let timeout = secs(spec.timeout_seconds, 1).max(Duration::from_secs(1));
    if let Some(exec) = &spec.exec {
        let cmd = exec.command.clone().unwrap_or_default();
        let result = runtime.exec_sync(container_id, cmd, timeout).await;
        tracing::debug!(container = %container_id, ?result, "exec probe");
        return match result {
            Ok((0, _)) => Ok(()),
            Ok((_, output)) => Err(output),
            Err(error) => Err(error.short_message()),
        };
    }
    let target = |p: &IntOrString, host: Option<&String>| {
        let host = host.cloned().or_else(|| pod_ip.map(str::to_owned));
        host.zip(port(p))
            .ok_or_else(|| "no address to probe".to_owned())
    };
    if let Some(tcp) = &spec.tcp_socket {
        let (host, port) = target(&tcp.port, tcp.host.as_ref())?;
        return match tokio::time::timeout(
            timeout,
            tokio::net::TcpStream::connect((host.as_str(), port)),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(format!("dial tcp {host}:{port}: {error}")),
            Err(_) => Err(format!("dial tcp {host}:{port}: i/o timeout")),
        };
    }
    if let Some(http) = &spec.http_get {
        let (host, port) = target(&http.port, http.host.as_ref())?;
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        return tokio::time::timeout(timeout, http_get(&host, port, &path))
            .await
            .unwrap_or_else(|_| {
                Err(format!(
                    "Get \"http://{host}:{port}{path}\": context deadline exceeded"
                ))
            });
    }
    if let Some(grpc) = &spec.grpc {
        let host = pod_ip.ok_or_else(|| "no address to probe".to_owned())?;
        let service = grpc.service.as_deref().unwrap_or_default();
        return grpc_check(host, grpc.port, service, timeout).await;
    }
    Err("missing probe handler".to_owned())
}

/// The kubelet's gRPC prober (`pkg/probe/grpc`): `grpc.health.v1.Health/Check` of
/// `service` at `host:port`, with its messages. Like its blocking dial, a refused
/// connection is retried until `timeout`.
async fn grpc_check(host: &str, port: i32, service: &str, timeout: Duration) -> Result<(), String> {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let addr = format!("{host}:{port}");
    let within = format!("{}s", timeout.as_secs());
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .map_err(|e| format!("error: failed to connect service at {addr:?}: {e}"))?;
    let deadline = Instant::now() + timeout;
    let channel = loop {
        match tokio::time::timeout_at(deadline, endpoint.connect()).await {
            Ok(Ok(channel)) => break channel,
            Ok(Err(_)) if Instant::now() + Duration::from_millis(100) < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => {
                return Err(format!(
                    "timeout: failed to connect service {addr:?} within {within}: context deadline exceeded"
                ));
            }
        }
    };
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    match tokio::time::timeout_at(deadline, HealthClient::new(channel).check(request)).await {
        Err(_) => Err(format!(
            "timeout: health rpc did not complete within {within}"
        )),
        Ok(Err(status)) if status.code() == tonic::Code::Unimplemented => Err(format!(
            "error: this server does not implement the grpc health protocol (grpc.health.v1.Health): {}",
            status.message()
        )),
        Ok(Err(status)) => Err(format!(
            "error: health rpc probe failed: {}",
            status.message()
        )),
        Ok(Ok(response)) => match response.into_inner().status() {
            ServingStatus::Serving => Ok(()),
            other => Err(format!(
                "service unhealthy (responded with {:?})",
                other.as_str_name()
            )),
        },
    }
}

async fn http_get(host: &str, port: u16, path: &str) -> Result<(), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let url = format!("http://{host}:{port}{path}");
    let mut stream = tokio::net::TcpStream::connect((host, port))
        .await
        .map_err(|e| format!("Get {url:?}: dial tcp {host}:{port}: {e}"))?;
    let req = format!(
        "GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUser-Agent: kube-probe/1.36\r\nConnection: close\r\n\r\n"
    );
    let mut head = [0u8; 12];
    let exchange = async {
        stream.write_all(req.as_bytes()).await?;
        stream.read_exact(&mut head).await
    };
    exchange.await.map_err(|e| format!("Get {url:?}: {e}"))?;
    let code: u16 = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    if (200..400).contains(&code) {
        Ok(())
    } else {
        Err(format!("HTTP probe failed with statuscode: {code}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gRPC health service on 127.0.0.1 (never a pod IP: nothing leaves this machine).
    #[tokio::test]
    async fn grpc_probes_ask_the_health_service_and_word_failures_as_the_kubelet() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = i32::from(listener.local_addr().unwrap().port());
        let (reporter, service) = tonic_health::server::health_reporter();
        reporter
            .set_service_status("up", tonic_health::ServingStatus::Serving)
            .await;
        reporter
            .set_service_status("down", tonic_health::ServingStatus::NotServing)
            .await;
        let server = tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let second = Duration::from_secs(1);
        assert_eq!(grpc_check("127.0.0.1", port, "up", second).await, Ok(()));
        assert_eq!(grpc_check("127.0.0.1", port, "", second).await, Ok(()));
        assert_eq!(
            grpc_check("127.0.0.1", port, "down", second).await,
            Err("service unhealthy (responded with \"NOT_SERVING\")".into())
        );
        assert!(
            grpc_check("127.0.0.1", port, "unknown", second)
                .await
                .unwrap_err()
                .starts_with("error: health rpc probe failed:")
        );
        server.abort();
        // Nothing listens any more: retried until the timeout, as the kubelet's blocking dial.
        let started = Instant::now();
        assert_eq!(
            grpc_check("127.0.0.1", port, "up", second).await,
            Err(format!(
                "timeout: failed to connect service \"127.0.0.1:{port}\" within 1s: context deadline exceeded"
            ))
        );
        assert!(started.elapsed() >= Duration::from_millis(800));
    }

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
