//! fake-cri's integration tests, in one binary: each of these modules was a test
//! binary of its own, linking the whole dependency graph again.

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
mod scale;
mod sockets;
mod streaming;
mod volumes;
