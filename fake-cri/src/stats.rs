//! Synthetic but consistent resource statistics: CPU time grows with the
//! time a container has run (1 % of a core), memory is a stable per-container
//! figure, the writable layer grows with the files the container wrote.

use nodeconform_cri::v1;

use crate::container::{Container, Lifecycle};
use crate::images::fake_digest;
use crate::runtime::now;
use crate::sandbox::Sandbox;

/// Nanocores a running container uses: 1 % of a core.
const NANO_CORES: u64 = 10_000_000;

fn value(value: u64) -> Option<v1::UInt64Value> {
    Some(v1::UInt64Value { value })
}

/// Memory statistics for a working set of `bytes`.
fn memory_usage(timestamp: i64, bytes: u64) -> v1::MemoryUsage {
    v1::MemoryUsage {
        timestamp,
        working_set_bytes: value(bytes),
        available_bytes: value(0),
        usage_bytes: value(bytes),
        rss_bytes: value(bytes),
        page_faults: value(0),
        major_page_faults: value(0),
        // No pressure stall information: a simulated container never waits for memory.
        psi: None,
    }
}

/// A stable working set between 2 and 10 MiB, derived from the id.
fn memory_bytes(id: &str) -> u64 {
    let seed = fake_digest(id);
    (2 << 20) + u64::from_str_radix(&seed[..6], 16).unwrap_or(0) % (8 << 20)
}

pub(crate) fn container(c: &Container, mountpoint: &str) -> v1::ContainerStats {
    let timestamp = now();
    let running = c.state == Lifecycle::Running;
    let end = if running { timestamp } else { c.finished_at };
    let ran = u64::try_from(end.saturating_sub(c.started_at)).unwrap_or(0);
    let memory = if running { memory_bytes(&c.id) } else { 0 };
    let files = c
        .context
        .files
        .memory()
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let written: u64 = files.values().map(|f| f.len() as u64).sum();
    v1::ContainerStats {
        attributes: Some(v1::ContainerAttributes {
            id: c.id.clone(),
            metadata: Some(c.metadata()),
            labels: c.config.labels.clone(),
            annotations: c.config.annotations.clone(),
        }),
        cpu: Some(v1::CpuUsage {
            timestamp,
            usage_core_nano_seconds: value(if c.started_at == 0 { 0 } else { ran / 100 }),
            usage_nano_cores: value(if running { NANO_CORES } else { 0 }),
            psi: None,
        }),
        memory: Some(memory_usage(timestamp, memory)),
        writable_layer: Some(v1::FilesystemUsage {
            timestamp,
            fs_id: Some(v1::FilesystemIdentifier {
                mountpoint: mountpoint.to_owned(),
            }),
            used_bytes: value(4096 + written),
            inodes_used: value(1 + files.len() as u64),
        }),
        swap: Some(v1::SwapUsage {
            timestamp,
            swap_available_bytes: value(0),
            swap_usage_bytes: value(0),
        }),
        // Block I/O (1.35): a simulated container reads and writes no device.
        io: None,
    }
}

pub(crate) fn sandbox<'a>(
    s: &Sandbox,
    containers: impl Iterator<Item = &'a Container>,
    mountpoint: &str,
) -> v1::PodSandboxStats {
    let timestamp = now();
    let stats: Vec<v1::ContainerStats> = containers
        .filter(|c| c.sandbox_id == s.id && c.state == Lifecycle::Running)
        .map(|c| container(c, mountpoint))
        .collect();
    let sum = |f: fn(&v1::ContainerStats) -> u64| stats.iter().map(f).sum::<u64>();
    let cpu_total = sum(|c| cpu(c).0);
    let nano_cores = sum(|c| cpu(c).1);
    let memory = sum(|c| {
        c.memory
            .as_ref()
            .and_then(|m| m.working_set_bytes.as_ref())
            .map_or(0, |v| v.value)
    });
    v1::PodSandboxStats {
        attributes: Some(v1::PodSandboxAttributes {
            id: s.id.clone(),
            metadata: Some(s.metadata()),
            labels: s.config.labels.clone(),
            annotations: s.config.annotations.clone(),
        }),
        linux: Some(v1::LinuxPodSandboxStats {
            cpu: Some(v1::CpuUsage {
                timestamp,
                usage_core_nano_seconds: value(cpu_total),
                usage_nano_cores: value(nano_cores),
                psi: None,
            }),
            memory: Some(memory_usage(timestamp, memory)),
            network: Some(v1::NetworkUsage {
                timestamp,
                default_interface: Some(v1::NetworkInterfaceUsage {
                    name: "eth0".to_owned(),
                    rx_bytes: value(0),
                    rx_errors: value(0),
                    tx_bytes: value(0),
                    tx_errors: value(0),
                }),
                interfaces: Vec::new(),
            }),
            process: Some(v1::ProcessUsage {
                timestamp,
                process_count: value(stats.len() as u64),
            }),
            containers: stats,
            io: None,
        }),
        windows: None,
    }
}

fn cpu(stats: &v1::ContainerStats) -> (u64, u64) {
    let cpu = stats.cpu.as_ref();
    (
        cpu.and_then(|c| c.usage_core_nano_seconds.as_ref())
            .map_or(0, |v| v.value),
        cpu.and_then(|c| c.usage_nano_cores.as_ref())
            .map_or(0, |v| v.value),
    )
}
