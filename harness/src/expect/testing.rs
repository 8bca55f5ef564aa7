//! Hand-made states for unit tests.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::timeline::{EventKind, State};

/// A pod `p` with the given `status` JSON.
pub fn pod(status: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "status": status}))
        .expect("test pod")
}

/// A `MODIFIED` state at `ms` milliseconds.
pub fn state(ms: u64, status: Value) -> State {
    State {
        at: Duration::from_millis(ms),
        kind: EventKind::Modified,
        pod: pod(status),
    }
}

/// A `DELETED` state at `ms` milliseconds.
pub fn state_gone(ms: u64) -> State {
    State {
        at: Duration::from_millis(ms),
        kind: EventKind::Deleted,
        pod: pod(json!({"phase": "Failed"})),
    }
}
