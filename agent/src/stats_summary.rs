//! `GET /stats/summary` (the kubelet's `statsapi.Summary`, from CRI stats as
//! the kubelet's CRI stats provider builds it with `PodAndContainerStatsFromCRI`):
//! one entry per pod sandbox the runtime reports, with its containers' CPU,
//! memory and writable-layer use. The node's own CPU, memory and file
//! systems (cAdvisor's, in the kubelet) are left out: the agent reads nothing
//! of the host.

use k8s_openapi::jiff::Timestamp;
use nodeconform_cri::v1 as cri;
use serde_json::{Map, Value, json};

use crate::runtime::{Result, Runtime};

/// The summary of `node_name`, started at `start_time`.
pub async fn summary(runtime: &Runtime, node_name: &str, start_time: Timestamp) -> Result<Value> {
    let pods: Vec<Value> = runtime.pod_sandbox_stats().await?.iter().map(pod).collect();
    Ok(without_nulls(json!({
        "node": {
            "nodeName": node_name,
            "systemContainers": [],
            "startTime": start_time.to_string(),
        },
        "pods": pods,
    })))
}

/// Go's `omitempty` of nil pointers: statistics the runtime did not give are left out.
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

fn time(nanos: i64) -> String {
    Timestamp::from_nanosecond(i128::from(nanos))
        .unwrap_or(Timestamp::UNIX_EPOCH)
        .to_string()
}

fn pod(stats: &cri::PodSandboxStats) -> Value {
    let attributes = stats.attributes.clone().unwrap_or_default();
    let metadata = attributes.metadata.unwrap_or_default();
    let linux = stats.linux.clone().unwrap_or_default();
    let containers: Vec<Value> = linux.containers.iter().map(container).collect();
    let mut out = Map::new();
    out.insert(
        "podRef".into(),
        json!({"name": metadata.name, "namespace": metadata.namespace, "uid": metadata.uid}),
    );
    out.insert("containers".into(), Value::Array(containers));
    if let Some(cpu) = linux.cpu.as_ref() {
        out.insert("startTime".into(), Value::String(time(cpu.timestamp)));
        out.insert("cpu".into(), self::cpu(cpu));
    }
    if let Some(memory) = linux.memory.as_ref() {
        out.insert("memory".into(), self::memory(memory));
    }
    Value::Object(out)
}

/// The name of the container `stats` are about.
pub(crate) fn container_name(stats: &cri::ContainerStats) -> &str {
    stats
        .attributes
        .as_ref()
        .and_then(|a| a.metadata.as_ref())
        .map_or("", |m| m.name.as_str())
}

fn container(stats: &cri::ContainerStats) -> Value {
    let mut out = Map::new();
    out.insert("name".into(), container_name(stats).into());
    if let Some(cpu) = stats.cpu.as_ref() {
        out.insert("startTime".into(), Value::String(time(cpu.timestamp)));
        out.insert("cpu".into(), self::cpu(cpu));
    }
    if let Some(memory) = stats.memory.as_ref() {
        out.insert("memory".into(), self::memory(memory));
    }
    if let Some(fs) = stats.writable_layer.as_ref() {
        out.insert(
            "rootfs".into(),
            json!({
                "time": time(fs.timestamp),
                "usedBytes": fs.used_bytes.as_ref().map(|v| v.value),
                "inodesUsed": fs.inodes_used.as_ref().map(|v| v.value),
            }),
        );
    }
    Value::Object(out)
}

fn cpu(cpu: &cri::CpuUsage) -> Value {
    json!({
        "time": time(cpu.timestamp),
        "usageNanoCores": cpu.usage_nano_cores.as_ref().map(|v| v.value),
        "usageCoreNanoSeconds": cpu.usage_core_nano_seconds.as_ref().map(|v| v.value),
    })
}

fn memory(memory: &cri::MemoryUsage) -> Value {
    json!({
        "time": time(memory.timestamp),
        "availableBytes": memory.available_bytes.as_ref().map(|v| v.value),
        "usageBytes": memory.usage_bytes.as_ref().map(|v| v.value),
        "workingSetBytes": memory.working_set_bytes.as_ref().map(|v| v.value),
        "rssBytes": memory.rss_bytes.as_ref().map(|v| v.value),
        "pageFaults": memory.page_faults.as_ref().map(|v| v.value),
        "majorPageFaults": memory.major_page_faults.as_ref().map(|v| v.value),
    })
}
