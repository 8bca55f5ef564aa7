//! The container runtime, seen through CRI v1 (the kubelet's `kuberuntime`).
//!
//! [`Runtime`] wraps the CRI runtime and image clients: it creates sandboxes
//! and containers with the labels and annotations the kubelet sets
//! (`io.kubernetes.pod.uid`, `io.kubernetes.container.name`,
//! `io.kubernetes.container.restartCount`, …), so that everything the agent
//! needs to know about a pod can be recovered from the runtime after an agent
//! restart, and reads a pod's runtime state back ([`Runtime::pod_status`]).
//!
//! The parts: [`labels`] (what the kubelet writes on sandboxes and containers),
//! [`client`] ([`Runtime`]: the connection, one timed and counted call, runtime
//! status, exec and events), [`config`] (sandbox and container configs, the pod
//! directory), [`security`] (security contexts and the `runAsNonRoot` check), [`lifecycle`] (run, pull, create, start, stop, remove),
//! [`status`] (reading a pod's state back, the relist), [`logs`] (where a
//! container's log is) and [`termination`] (termination messages, from the
//! file or the log).

mod client;
mod config;
mod error;
mod labels;
mod lifecycle;
mod logs;
mod resources;
pub mod security;
mod status;
mod streams;
mod termination;
pub mod version;

pub use client::{DEFAULT_CLUSTER_DOMAIN, ExecOutput, Readiness, Runtime, pod_key};
pub use error::{Error, Result};
pub use labels::*;
pub use logs::{ContainerLog, remove_dangling_links};
pub use resources::{
    PodConfig, effective, effective_limit, linux_resources, milli_cpu_to_shares, quota_to_milli,
    shares_to_milli,
};
pub use security::ImageUser;
pub use status::{
    Container, ContainerState, ListedContainer, ListedSandbox, PodStatus, Sandbox, StatusCache,
    timestamp,
};
pub use streams::Channels;
