//! Prometheus metrics of the agent, rendered in the text exposition format.
//!
//! Counters for API and CRI calls (and their errors) by operation, pod worker
//! sync latency, the number of pod workers and the PLEG relist duration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

/// A sum and a count of observed durations (a Prometheus summary without quantiles).
#[derive(Debug, Default)]
struct Summary {
    sum_micros: AtomicU64,
    count: AtomicU64,
}

impl Summary {
    fn observe(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} summary");
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
    }
}

/// Calls and errors per operation.
#[derive(Debug, Default)]
struct Calls {
    by_op: Mutex<BTreeMap<String, (u64, u64)>>,
}

impl Calls {
    fn record(&self, op: &str, ok: bool) {
        let mut map = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(op.to_owned()).or_default();
        entry.0 += 1;
        if !ok {
            entry.1 += 1;
        }
    }

    fn render(&self, out: &mut String, name: &str, label: &str, what: &str) {
        let map = self.by_op.lock().unwrap_or_else(|e| e.into_inner());
        let _ = writeln!(out, "# HELP {name}_total {what} calls by {label}.");
        let _ = writeln!(out, "# TYPE {name}_total counter");
        for (op, (calls, _)) in map.iter() {
            let _ = writeln!(out, "{name}_total{{{label}=\"{op}\"}} {calls}");
        }
        let _ = writeln!(
            out,
            "# HELP {name}_errors_total Failed {what} calls by {label}."
        );
        let _ = writeln!(out, "# TYPE {name}_errors_total counter");
        for (op, (_, errors)) in map.iter() {
            let _ = writeln!(out, "{name}_errors_total{{{label}=\"{op}\"}} {errors}");
        }
    }
}

/// The agent's metrics; shared by every part through an `Arc`.
#[derive(Debug, Default)]
pub struct Metrics {
    api: Calls,
    cri: Calls,
    pod_sync: Summary,
    relist: Summary,
    pod_workers: AtomicI64,
}

impl Metrics {
    /// Records one API server call (`op` is e.g. `patch pods/status`).
    pub fn api_call(&self, op: &str, ok: bool) {
        self.api.record(op, ok);
    }

    /// Records one CRI call (`op` is the RPC name).
    pub fn cri_call(&self, op: &str, ok: bool) {
        self.cri.record(op, ok);
    }

    /// Records the duration of one pod sync.
    pub fn pod_sync(&self, d: Duration) {
        self.pod_sync.observe(d);
    }

    /// Records the duration of one PLEG relist.
    pub fn relist(&self, d: Duration) {
        self.relist.observe(d);
    }

    /// Adds `delta` to the number of pod workers.
    pub fn pod_workers_add(&self, delta: i64) {
        self.pod_workers.fetch_add(delta, Ordering::Relaxed);
    }

    /// The metrics in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        self.pod_sync.render(
            &mut out,
            "nodeconform_agent_pod_worker_duration_seconds",
            "Duration of one pod sync by a pod worker.",
        );
        self.relist.render(
            &mut out,
            "nodeconform_agent_pleg_relist_duration_seconds",
            "Duration of one PLEG relist.",
        );
        let _ = writeln!(
            out,
            "# HELP nodeconform_agent_pod_workers Number of pod workers.\n# TYPE nodeconform_agent_pod_workers gauge\nnodeconform_agent_pod_workers {}",
            self.pod_workers.load(Ordering::Relaxed)
        );
        self.api.render(
            &mut out,
            "nodeconform_agent_api_requests",
            "operation",
            "API server",
        );
        self.cri
            .render(&mut out, "nodeconform_agent_cri_calls", "method", "CRI");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters() {
        let m = Metrics::default();
        m.cri_call("RunPodSandbox", true);
        m.cri_call("RunPodSandbox", false);
        m.api_call("patch pods/status", true);
        m.pod_workers_add(2);
        m.pod_sync(Duration::from_millis(5));
        let text = m.render();
        assert!(text.contains("nodeconform_agent_cri_calls_total{method=\"RunPodSandbox\"} 2"));
        assert!(
            text.contains("nodeconform_agent_cri_calls_errors_total{method=\"RunPodSandbox\"} 1")
        );
        assert!(text.contains("nodeconform_agent_pod_workers 2"));
        assert!(text.contains("nodeconform_agent_pod_worker_duration_seconds_count 1"));
    }
}
