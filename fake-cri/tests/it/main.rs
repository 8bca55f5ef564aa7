//! fake-cri's integration tests, in one binary: each of these modules was a test
//! binary of its own, linking the whole dependency graph again (`scale.rs` stays
//! apart: it times 1,000 containers and wants the machine to itself).

mod common;

mod bad_input;
mod clients;
mod control;
mod environment;
mod events;
mod host_root;
mod images;
mod interpreter;
mod lifecycle;
mod list_streams;
mod pod_network;
mod rpcs;
mod sockets;
mod streaming;
mod volumes;
