//! `GET /metrics/resource`: the kubelet's resource metrics (its
//! `resourceMetricsCollector`), which metrics-server scrapes for `kubectl
//! top`, in the Prometheus text format, from the same CRI statistics as
//! `/stats/summary`: each container's and pod's cumulative CPU time and
//! memory working set, stamped with the time the runtime measured them.
//!
//! The node's figures are the sum of its pods': the agent reads nothing of
//! the host (a kubelet reads the root cgroup), so a simulated node uses what
//! its pods use. `container_start_time_seconds` and the swap series are left
//! out (CRI statistics carry neither).

use std::fmt::Write;

use nodeconform_cri::v1 as cri;

use crate::runtime::{Result, Runtime};

/// One series: its name, help text and stability, its type.
struct Family {
    name: &'static str,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(String, f64, i64)>,
}

impl Family {
    fn new(name: &'static str, help: &'static str, kind: &'static str) -> Self {
        Self {
            name,
            help,
            kind,
            samples: Vec::new(),
        }
    }

    fn push(&mut self, labels: &[(&str, &str)], value: f64, nanos: i64) {
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect::<Vec<_>>()
            .join(",");
        self.samples.push((labels, value, nanos / 1_000_000));
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (labels, value, millis) in &self.samples {
            let labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            };
            let _ = writeln!(out, "{}{labels} {value} {millis}", self.name);
        }
    }
}

/// A label value with `\`, `"` and newlines escaped, as the text format wants.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn cpu_seconds(cpu: Option<&cri::CpuUsage>) -> Option<(f64, i64)> {
    let cpu = cpu?;
    let nanos = cpu.usage_core_nano_seconds.as_ref()?.value;
    Some((nanos as f64 / 1e9, cpu.timestamp))
}

fn working_set(memory: Option<&cri::MemoryUsage>) -> Option<(f64, i64)> {
    let memory = memory?;
    Some((
        memory.working_set_bytes.as_ref()?.value as f64,
        memory.timestamp,
    ))
}

/// The metrics text of the runtime's pods.
pub async fn render(runtime: &Runtime) -> Result<String> {
    let pods = runtime.pod_sandbox_stats().await?;
    Ok(text(&pods))
}

fn text(pods: &[cri::PodSandboxStats]) -> String {
    let mut container_cpu = Family::new(
        "container_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
        "counter",
    );
    let mut container_memory = Family::new(
        "container_memory_working_set_bytes",
        "[STABLE] Current working set of the container in bytes",
        "gauge",
    );
    let mut node_cpu = Family::new(
        "node_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
        "counter",
    );
    let mut node_memory = Family::new(
        "node_memory_working_set_bytes",
        "[STABLE] Current working set of the node in bytes",
        "gauge",
    );
    let mut pod_cpu = Family::new(
        "pod_cpu_usage_seconds_total",
        "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
        "counter",
    );
    let mut pod_memory = Family::new(
        "pod_memory_working_set_bytes",
        "[STABLE] Current working set of the pod in bytes",
        "gauge",
    );
    let (mut node_seconds, mut node_bytes, mut latest) = (0.0, 0.0, 0);
    for stats in pods {
        let metadata = stats
            .attributes
            .as_ref()
            .and_then(|a| a.metadata.clone())
            .unwrap_or_default();
        let (pod, namespace) = (metadata.name.as_str(), metadata.namespace.as_str());
        let Some(linux) = stats.linux.as_ref() else {
            continue;
        };
        for c in &linux.containers {
            let name = crate::stats_summary::container_name(c);
            let labels = [("container", name), ("namespace", namespace), ("pod", pod)];
            if let Some((value, at)) = cpu_seconds(c.cpu.as_ref()) {
                container_cpu.push(&labels, value, at);
            }
            if let Some((value, at)) = working_set(c.memory.as_ref()) {
                container_memory.push(&labels, value, at);
            }
        }
        let labels = [("namespace", namespace), ("pod", pod)];
        if let Some((value, at)) = cpu_seconds(linux.cpu.as_ref()) {
            pod_cpu.push(&labels, value, at);
            node_seconds += value;
            latest = latest.max(at);
        }
        if let Some((value, at)) = working_set(linux.memory.as_ref()) {
            pod_memory.push(&labels, value, at);
            node_bytes += value;
            latest = latest.max(at);
        }
    }
    if latest > 0 {
        node_cpu.push(&[], node_seconds, latest);
        node_memory.push(&[], node_bytes, latest);
    }
    let mut out = String::new();
    for family in [
        &container_cpu,
        &container_memory,
        &node_cpu,
        &node_memory,
        &pod_cpu,
        &pod_memory,
    ] {
        family.render(&mut out);
    }
    out.push_str(
        "# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise\n\
         # TYPE resource_scrape_error gauge\n\
         resource_scrape_error 0\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubelets_series_from_cri_statistics() {
        let usage = |seconds: u64, bytes: u64| {
            (
                Some(cri::CpuUsage {
                    timestamp: 1_700_000_000_000_000_000,
                    usage_core_nano_seconds: Some(cri::UInt64Value { value: seconds }),
                    ..Default::default()
                }),
                Some(cri::MemoryUsage {
                    timestamp: 1_700_000_000_000_000_000,
                    working_set_bytes: Some(cri::UInt64Value { value: bytes }),
                    ..Default::default()
                }),
            )
        };
        let (cpu, memory) = usage(1_500_000_000, 4096);
        let container = cri::ContainerStats {
            attributes: Some(cri::ContainerAttributes {
                metadata: Some(cri::ContainerMetadata {
                    name: "c".into(),
                    attempt: 0,
                }),
                ..Default::default()
            }),
            cpu,
            memory,
            ..Default::default()
        };
        let pod = cri::PodSandboxStats {
            attributes: Some(cri::PodSandboxAttributes {
                metadata: Some(cri::PodSandboxMetadata {
                    name: "p".into(),
                    namespace: "ns".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            linux: Some(cri::LinuxPodSandboxStats {
                cpu,
                memory,
                containers: vec![container],
                ..Default::default()
            }),
            windows: None,
        };
        let text = text(&[pod]);
        for line in [
            "# TYPE container_cpu_usage_seconds_total counter",
            "container_cpu_usage_seconds_total{container=\"c\",namespace=\"ns\",pod=\"p\"} 1.5 1700000000000",
            "container_memory_working_set_bytes{container=\"c\",namespace=\"ns\",pod=\"p\"} 4096 1700000000000",
            "pod_cpu_usage_seconds_total{namespace=\"ns\",pod=\"p\"} 1.5 1700000000000",
            "node_memory_working_set_bytes 4096 1700000000000",
            "resource_scrape_error 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
