//! The values of a cgroup and the files they are written to, per cgroup version, and a
//! cgroup's removal.

use std::io::ErrorKind;
use std::path::Path;
use std::time::Duration;

use super::Error;
use super::mounts::Hierarchy;

/// The CFS period the kubelet uses (100 ms), in µs.
const CPU_PERIOD: i64 = 100_000;

/// A bound: a value, or none (`-1` on cgroup v1, `max` on v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// No bound.
    Max,
    /// This many (µs of CPU per period, bytes of memory).
    Value(i64),
}

/// What a cgroup is sized to (`ResourceConfig`); `None` leaves a value as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceConfig {
    /// CPU shares (v1 `cpu.shares`; v2 `cpu.weight`, converted as runc converts them).
    pub cpu_shares: Option<u64>,
    /// The CFS quota per 100 ms period.
    pub cpu_quota: Option<Limit>,
    /// The memory limit in bytes.
    pub memory: Option<Limit>,
}

impl ResourceConfig {
    /// Only CPU shares.
    pub fn shares(shares: u64) -> Self {
        Self {
            cpu_shares: Some(shares),
            ..Self::default()
        }
    }
}

/// runc's `ConvertCPUSharesToCgroupV2Value`: shares in [2, 262144] to a weight in [1, 10000].
fn weight(shares: u64) -> u64 {
    if shares == 0 {
        return 0;
    }
    1 + (shares.saturating_sub(2) * 9999) / 262_142
}

/// The files and contents `config` is written as in `hierarchy`, in order.
fn contents(hierarchy: &Hierarchy, config: &ResourceConfig) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    let v1 = |limit: Limit| match limit {
        Limit::Max => "-1".to_owned(),
        Limit::Value(v) => v.to_string(),
    };
    if hierarchy.is_v2() {
        if let Some(shares) = config.cpu_shares {
            out.push(("cpu.weight", weight(shares).to_string()));
        }
        if let Some(quota) = config.cpu_quota {
            let quota = match quota {
                Limit::Max => "max".to_owned(),
                Limit::Value(v) => v.to_string(),
            };
            out.push(("cpu.max", format!("{quota} {CPU_PERIOD}")));
        }
        if let Some(memory) = config.memory {
            out.push((
                "memory.max",
                match memory {
                    Limit::Max => "max".to_owned(),
                    Limit::Value(v) => v.to_string(),
                },
            ));
        }
        return out;
    }
    if hierarchy.has("cpu") {
        if let Some(shares) = config.cpu_shares {
            out.push(("cpu.shares", shares.to_string()));
        }
        if let Some(quota) = config.cpu_quota {
            out.push(("cpu.cfs_period_us", CPU_PERIOD.to_string()));
            out.push(("cpu.cfs_quota_us", v1(quota)));
        }
    }
    if hierarchy.has("memory")
        && let Some(memory) = config.memory
    {
        out.push(("memory.limit_in_bytes", v1(memory)));
    }
    out
}

/// Writes `config` to cgroup `name` in `hierarchy` (which has it already).
pub(super) fn write(
    name: &str,
    hierarchy: &Hierarchy,
    config: &ResourceConfig,
) -> Result<(), Error> {
    if !hierarchy.writes {
        return Ok(());
    }
    let dir = hierarchy.path_of(name);
    for (file, content) in contents(hierarchy, config) {
        let path = dir.join(file);
        std::fs::write(&path, content).map_err(|source| Error::Io {
            cgroup: name.to_owned(),
            what: "writing",
            path,
            source,
        })?;
    }
    Ok(())
}

/// Removes the cgroup directory `dir` (of cgroup `name`) and those below it, deepest
/// first, SIGKILLing the processes still in each; a missing one is removed already. A
/// cgroup stays busy for a moment after its last process is killed, so removal is tried
/// again for up to a second.
pub(super) fn remove_tree(name: &str, dir: &Path) -> Result<(), Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(Error::Io {
                cgroup: name.to_owned(),
                what: "reading",
                path: dir.to_owned(),
                source,
            });
        }
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let child = format!("{name}/{}", entry.file_name().to_string_lossy());
            remove_tree(&child, &entry.path())?;
        }
    }
    let mut tries = 0;
    loop {
        kill_all(dir);
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(_) if tries < 20 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(source) => {
                return Err(Error::Io {
                    cgroup: name.to_owned(),
                    what: "removing",
                    path: dir.to_owned(),
                    source,
                });
            }
        }
    }
}

/// SIGKILLs every process in the cgroup at `dir`.
fn kill_all(dir: &Path) {
    let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) else {
        return;
    };
    for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
        // SAFETY: kill(2) has no memory preconditions; the pid is in the pod's cgroup.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_convert_to_weights_as_runc_converts_them() {
        assert_eq!(weight(2), 1);
        assert_eq!(weight(1024), 39);
        assert_eq!(weight(262_144), 10_000);
    }
}
