//! nodeconform's reference node agent, built on the kubelet's design.
//!
//! The agent registers a Node, runs the pods bound to it on any CRI v1
//! runtime and reports their status to any Kubernetes API server, the way
//! the upstream kubelet does as a user sees it in `kubectl get pod -o yaml`.
//! The parts carry the kubelet's names:
//!
//! - [`pod_config`] watches the node's pods and emits [`pod_config::PodUpdate`]s;
//! - [`pleg`] relists the runtime every second and streams its container
//!   events, emitting [`pleg::Event`]s;
//! - [`static_pods`] reads static pod manifests from a directory (the file
//!   source), and [`mirror_pods`] shows them in the API as mirror pods;
//! - [`sync_loop`] selects over these, a resync tick and a housekeeping tick,
//!   runs [`admission`] for new pods, allocates their containers' resources and
//!   in-place resizes ([`allocation`]) and hands work to [`pod_workers`] (one
//!   task per pod, coalescing updates);
//! - a worker runs [`sync_pod`]: it computes the API status ([`pod_status`]),
//!   hands it to the [`status_manager`] (the only writer of pod statuses, which
//!   also finalizes deletions), sets up the pod's volumes ([`volume_manager`]) and
//!   converges the [`runtime`] (sandbox, init containers, app containers, [`backoff`]),
//!   each pod in a cgroup of the QoS hierarchy sized by its resources ([`cgroup_manager`]);
//! - [`housekeeping`] removes what the runtime still runs for pods the API no
//!   longer has, and the directories and cgroups of pods gone from everywhere;
//!   [`node_status`] (runtime and PLEG health) and [`node_lease`] keep the
//!   Node and its Lease fresh; [`server`] serves `/healthz` and [`metrics`] on 127.0.0.1;
//!   [`prober`] runs startup, liveness and readiness probes; [`pod_hostname`]
//!   names the sandbox and writes the pod's `/etc/hosts`; [`env`] builds a
//!   container's environment (with [`resource`] for its limits and requests); [`lifecycle`] runs
//!   `postStart`/`preStop` hooks; [`keyring`] matches pull secrets to images;
//!   [`podutil`] holds the pod helpers they share (restart policy, sidecars);
//!   [`active_deadline`] fails pods past their
//!   `activeDeadlineSeconds`; [`events`]
//!   records the events `kubectl describe` shows;
//! - [`kubelet_server`] is the node's kubelet endpoint (HTTPS): `kubectl logs`
//!   reaches [`pod_logs`] through the API server, which reads the CRI log with
//!   [`log_reader`] ([`container_log`] parses the format).
//!
//! Tasks own their state and talk over channels; every loop stops on the
//! shutdown signal of [`AgentHandle::shutdown`]. All periods are in [`Timings`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = kube::Client::try_default().await?;
//! let agent = nodeconform_agent::Agent::builder(client, "node-1", "unix:///run/fake-cri/cri.sock")
//!     .root_dir("/var/lib/nodeconform-agent")
//!     .spawn()
//!     .await?;
//! agent.ready().await;
//! # agent.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod active_deadline;
pub mod admission;
mod agent;
pub mod allocation;
pub mod apparmor;
pub mod backoff;
pub mod cgroup_manager;
pub mod cli;
pub mod container_log;
pub mod dns;
pub mod env;
pub mod events;
pub mod handler;
pub mod housekeeping;
pub mod keyring;
pub mod kubelet_server;
pub mod lifecycle;
pub mod log_reader;
pub mod metrics;
pub mod mirror_pods;
pub mod mutants;
pub mod node_features;
pub mod node_lease;
pub mod node_status;
pub mod pleg;
pub mod pod_config;
pub mod pod_hostname;
pub mod pod_logs;
pub mod pod_status;
pub mod pod_workers;
pub mod podutil;
pub mod prober;
pub mod qos_policy;
pub mod resource;
pub mod resource_metrics;
pub mod runtime;
pub mod server;
pub mod services;
pub mod static_pods;
pub mod stats_summary;
pub mod status_manager;
pub mod streaming;
pub mod sync_loop;
pub mod sync_pod;
pub mod timings;
pub mod volume_manager;

pub use agent::{Agent, AgentBuilder, AgentHandle, Error};
pub use timings::Timings;
