//! The runtime's state and every operation on it. The gRPC services and the
//! control API are thin layers over [`Runtime`].
//!
//! State lives behind one `std::sync::Mutex`, never held across an `.await`:
//! operations that wait (stop, exec, pull) take what they need, release the
//! lock, and wait on the container's `exited` watch channel.

mod conditions;
mod containers;
mod control;
mod events;
mod exec;
mod host_ports;
mod images;
mod network;
mod process;
mod sandboxes;
mod state;
mod stats;

pub(crate) use host_ports::HostPorts;
pub use state::CgroupDriver;
pub(crate) use state::{Config, ImageFs, Runtime, now};
