//! Pod and QoS cgroups, as the kubelet's container manager keeps them with
//! `cgroupsPerQOS` and the cgroupfs driver (`pkg/kubelet/cm`): under the node's cgroup
//! root, `kubepods` holds every pod, `kubepods/burstable` and `kubepods/besteffort` the
//! pods of those classes, and each pod has `pod<uid>` in its class's cgroup
//! (Guaranteed pods directly in `kubepods`).
//!
//! The agent makes a pod's cgroup and sizes it from the pod's summed requests and limits
//! ([`crate::runtime::PodConfig`], `ResourceConfigForPod`) before it asks the runtime for
//! the sandbox, which names it as its `cgroup_parent`; the runtime puts every container of
//! the pod below it. A pod-level resize writes it again (`SetPodCgroupConfig`). The
//! Burstable cgroup's CPU shares follow the requests of its pods and the BestEffort one has
//! the minimum (`qos_container_manager_linux.go`). Once a pod is gone from the agent and the
//! runtime, housekeeping removes its cgroup, killing what is left in it
//! (`cleanupOrphanedPodCgroups`).
//!
//! Both cgroup versions are written: on cgroup v1 the `cpu` and `memory` hierarchies get
//! the values (`cpu.shares`, `cpu.cfs_quota_us`, `memory.limit_in_bytes`) and the pod's
//! directory is made in `pids` too and removed from every hierarchy; on cgroup v2 (one
//! unified hierarchy) the controllers are enabled down the path and `cpu.weight`,
//! `cpu.max`, `memory.max` written. A hybrid host's v2 mount beside v1 controllers is
//! left alone, as runc leaves it.

mod files;
mod mounts;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Pod;

pub use files::{Limit, ResourceConfig};
use mounts::Hierarchy;

/// A cgroup of the pods' hierarchy could not be written or removed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cgroup mounts could not be read.
    #[error("reading the cgroup mounts (/proc/self/mountinfo)")]
    Mounts(#[source] std::io::Error),
    /// A directory or file of a cgroup failed.
    #[error("cgroup {cgroup}: {what} {}", path.display())]
    Io {
        /// The cgroup, as its parent names it (`/nodeconform-n/kubepods/pod<uid>`).
        cgroup: String,
        /// What was done.
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The minimum CPU shares (`MinShares`): the BestEffort cgroup's, and the Burstable one's
/// without requests.
const MIN_SHARES: u64 = 2;

/// The pods' cgroups under one cgroup root. Cloning shares it.
#[derive(Debug, Clone)]
pub struct CgroupManager {
    /// The root, without a trailing `/` (`/nodeconform-n`; empty for the hierarchy's root).
    root: Arc<str>,
    hierarchies: Arc<[Hierarchy]>,
    /// What each pod's cgroup was last written with, by UID: a sync that finds it so
    /// writes nothing, and the Burstable cgroup's shares are its pods' summed requests.
    pods: Arc<Mutex<HashMap<String, PodCgroup>>>,
}

/// A pod's cgroup as last written.
#[derive(Debug, Clone, PartialEq)]
struct PodCgroup {
    name: String,
    config: ResourceConfig,
    /// A Burstable pod's CPU request (millicores); `None` for the other classes.
    burstable_request: Option<i64>,
}

impl CgroupManager {
    /// The pods' cgroups under `root` (`/nodeconform-n`), in the hierarchies this
    /// process sees mounted.
    pub fn new(root: &str) -> Result<Self, Error> {
        let hierarchies = mounts::hierarchies().map_err(Error::Mounts)?;
        Ok(Self {
            root: root.trim_end_matches('/').into(),
            hierarchies: hierarchies.into(),
            pods: Arc::default(),
        })
    }

    /// The cgroup of the pods of QoS class `qos` (`<root>/kubepods[/burstable|/besteffort]`).
    fn qos_cgroup(&self, qos: &str) -> String {
        let class = match qos {
            "Guaranteed" => "",
            "Burstable" => "/burstable",
            _ => "/besteffort",
        };
        format!("{}/kubepods{class}", self.root)
    }

    /// The pod's cgroup, as the kubelet's cgroupfs driver names it under the QoS
    /// hierarchy: `<root>/kubepods/pod<uid>` (Guaranteed),
    /// `<root>/kubepods/burstable/pod<uid>`, `<root>/kubepods/besteffort/pod<uid>`.
    pub fn pod_cgroup(&self, uid: &str, qos: &str) -> String {
        format!("{}/pod{uid}", self.qos_cgroup(qos))
    }

    /// Makes the QoS cgroups (`kubepods`, `burstable`, `besteffort` with the minimum
    /// shares), as the container manager does at start.
    pub fn ensure_qos(&self) -> Result<(), Error> {
        self.write(&self.qos_cgroup("Guaranteed"), &ResourceConfig::default())?;
        self.write(
            &self.qos_cgroup("BestEffort"),
            &ResourceConfig::shares(MIN_SHARES),
        )?;
        self.update_burstable()
    }

    /// Makes (or resizes) the cgroup of `pod`, of QoS class `qos`, sized to `config`
    /// (`EnsureExists`, `SetPodCgroupConfig`); returns its name. Nothing is written when
    /// the cgroup was last written so.
    pub fn ensure_pod(
        &self,
        pod: &Pod,
        qos: &str,
        config: &ResourceConfig,
    ) -> Result<String, Error> {
        let uid = pod.metadata.uid.as_deref().unwrap_or_default();
        let sized = PodCgroup {
            name: self.pod_cgroup(uid, qos),
            config: config.clone(),
            burstable_request: (qos == "Burstable").then(|| {
                nodeconform_resource::pod::requests(pod)
                    .get("cpu")
                    .map_or(0, |q| crate::resource::amount_of("cpu", q))
            }),
        };
        if self.sized_pods().get(uid) == Some(&sized) {
            return Ok(sized.name);
        }
        self.write(&sized.name, config)?;
        let name = sized.name.clone();
        let request = sized.burstable_request;
        let before = self.sized_pods().insert(uid.to_owned(), sized);
        if before.and_then(|b| b.burstable_request) != request {
            self.update_burstable()?;
        }
        Ok(name)
    }

    /// The UIDs of the pods that have a cgroup here.
    pub fn pods(&self) -> Vec<String> {
        let mut uids: Vec<String> = ["Guaranteed", "Burstable", "BestEffort"]
            .iter()
            .flat_map(|qos| mounts::children(&self.hierarchies, &self.qos_cgroup(qos)))
            .filter_map(|name| name.strip_prefix("pod").map(str::to_owned))
            .collect();
        uids.sort();
        uids.dedup();
        uids
    }

    /// Removes the cgroup of the pod `uid` from every hierarchy, killing the processes
    /// left in it first (`Destroy`).
    pub fn destroy_pod(&self, uid: &str) -> Result<(), Error> {
        for qos in ["Guaranteed", "Burstable", "BestEffort"] {
            let name = self.pod_cgroup(uid, qos);
            for hierarchy in self.hierarchies.iter() {
                files::remove_tree(&name, &hierarchy.path_of(&name))?;
            }
        }
        let removed = self.sized_pods().remove(uid);
        if removed.is_some_and(|r| r.burstable_request.is_some()) {
            self.update_burstable()?;
        }
        Ok(())
    }

    fn sized_pods(&self) -> std::sync::MutexGuard<'_, HashMap<String, PodCgroup>> {
        // A panic while holding it leaves whole entries behind: they are still usable.
        self.pods
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the Burstable cgroup's shares to its pods' summed CPU requests.
    fn update_burstable(&self) -> Result<(), Error> {
        let milli: i64 = self
            .sized_pods()
            .values()
            .filter_map(|p| p.burstable_request)
            .sum();
        let shares = crate::runtime::milli_cpu_to_shares(milli);
        self.write(
            &self.qos_cgroup("Burstable"),
            &ResourceConfig::shares(u64::try_from(shares).unwrap_or(MIN_SHARES)),
        )
    }

    /// Makes `name` in every hierarchy that needs it and writes `config` there.
    fn write(&self, name: &str, config: &ResourceConfig) -> Result<(), Error> {
        for hierarchy in self.hierarchies.iter() {
            hierarchy.ensure(name)?;
            files::write(name, hierarchy, config)?;
        }
        Ok(())
    }
}
