//! fake-cri: a CRI v1 runtime that simulates containers.
//!
//! It serves the Kubernetes Container Runtime Interface (RuntimeService and
//! ImageService) on a unix socket, so a node agent — the nodeconform reference
//! agent or a real kubelet — can run pods with no container runtime, no images
//! and no host processes. Containers run their real `command`/`args` through
//! a small shell interpreter ([`script`]): `sh -c 'sleep 1; exit 3'` sleeps a
//! second and exits 3, `trap 'exit 0' TERM` handles SIGTERM, `echo` writes the
//! CRI log file, `cat /etc/podinfo/labels` reads the volume the client mounted
//! there (confined to the mount's host path). Faults are injected through
//! [`Control`], in process or as a JSON API on a second socket. Host paths
//! are taken from a host root, `/` unless the client runs in a mount
//! namespace of its own ([`FakeCri::set_host_root_to_process`]).
//!
//! How the parts fit: [`server`] binds the sockets and hands requests to
//! `service` (the gRPC handlers), which applies injected `faults` and calls
//! `runtime`, the one owner of all sandbox, container and image state. A
//! started container's process is a tokio task interpreting its script;
//! signals reach it over a channel and its exit is recorded back in the
//! runtime, which streams container events to subscribers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let cri = nodeconform_fake_cri::FakeCri::builder()
//!     .socket("/tmp/fake-cri/cri.sock")
//!     .control_socket("/tmp/fake-cri/control.sock")
//!     .start()
//!     .await?;
//! println!("kubelet --container-runtime-endpoint {}", cri.endpoint());
//! cri.control().set_runtime_ready(false);
//! cri.shutdown().await;
//! # Ok(()) }
//! ```

mod authority;
pub mod bench;
mod container;
pub mod control;
mod error;
mod faults;
mod host_root;
mod images;
mod logs;
mod runtime;
mod sandbox;
pub mod script;
pub mod server;
mod servers;
mod service;
mod stats;
mod streaming;

pub use control::{Control, ControlError, KillTarget, Snapshot};
pub use error::{Error, StartError};
pub use faults::{RPCS, parse_code};
pub use host_root::WAIT as HOST_ROOT_WAIT;
pub use images::{MISSING_REGISTRY, catalog, catalog::Catalog};
pub use runtime::CgroupDriver;
pub use server::{Builder, FakeCri};
