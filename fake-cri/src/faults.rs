//! Injected faults: the next N calls of an RPC fail and/or are delayed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use tonic::{Code, Status};

/// One injected fault, applying to `remaining` more calls.
#[derive(Debug, Clone)]
pub(crate) struct Fault {
    pub remaining: u32,
    pub delay: Duration,
    pub fail: Option<(Code, String)>,
}

/// Pending faults per RPC name, consumed in order.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    pending: Mutex<HashMap<String, VecDeque<Fault>>>,
}

impl Faults {
    pub(crate) fn add(&self, rpc: &str, fault: Fault) {
        if fault.remaining == 0 {
            return;
        }
        self.lock()
            .entry(rpc.to_owned())
            .or_default()
            .push_back(fault);
    }

    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, VecDeque<Fault>>> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the next fault for `rpc`, if any: waits its delay, then fails
    /// with its code.
    pub(crate) async fn apply(&self, rpc: &str) -> Result<(), Status> {
        let fault = {
            let mut pending = self.lock();
            let Some(queue) = pending.get_mut(rpc) else {
                return Ok(());
            };
            let Some(front) = queue.front_mut() else {
                return Ok(());
            };
            front.remaining -= 1;
            let fault = front.clone();
            if front.remaining == 0 {
                queue.pop_front();
            }
            fault
        };
        if !fault.delay.is_zero() {
            tokio::time::sleep(fault.delay).await;
        }
        match fault.fail {
            Some((code, message)) => Err(Status::new(code, message)),
            None => Ok(()),
        }
    }
}

/// The RPC names faults can target: every method of RuntimeService and ImageService.
pub const RPCS: &[&str] = &[
    "Version",
    "RunPodSandbox",
    "StopPodSandbox",
    "RemovePodSandbox",
    "PodSandboxStatus",
    "ListPodSandbox",
    "CreateContainer",
    "StartContainer",
    "StopContainer",
    "RemoveContainer",
    "ListContainers",
    "ContainerStatus",
    "UpdateContainerResources",
    "ReopenContainerLog",
    "ExecSync",
    "Exec",
    "Attach",
    "PortForward",
    "ContainerStats",
    "ListContainerStats",
    "PodSandboxStats",
    "ListPodSandboxStats",
    "UpdateRuntimeConfig",
    "Status",
    "CheckpointContainer",
    "GetContainerEvents",
    "ListMetricDescriptors",
    "ListPodSandboxMetrics",
    "RuntimeConfig",
    "ListImages",
    "ImageStatus",
    "PullImage",
    "RemoveImage",
    "ImageFsInfo",
];

/// Parses a gRPC code name as written in the control API (`Unavailable`,
/// `UNAVAILABLE`, `unavailable`, or its number).
pub fn parse_code(name: &str) -> Option<Code> {
    if let Ok(number) = name.parse::<i32>() {
        return (0..=16).contains(&number).then(|| Code::from_i32(number));
    }
    let wanted: String = name
        .chars()
        .filter(|c| *c != '_')
        .collect::<String>()
        .to_ascii_lowercase();
    (0..=16)
        .map(Code::from_i32)
        .find(|code| format!("{code:?}").to_ascii_lowercase() == wanted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes() {
        assert_eq!(parse_code("Unavailable"), Some(Code::Unavailable));
        assert_eq!(
            parse_code("DEADLINE_EXCEEDED"),
            Some(Code::DeadlineExceeded)
        );
        assert_eq!(parse_code("14"), Some(Code::Unavailable));
        assert_eq!(parse_code("Nope"), None);
        assert_eq!(parse_code("99"), None);
    }

    #[tokio::test]
    async fn consumed_in_order() {
        let faults = Faults::default();
        faults.add(
            "Version",
            Fault {
                remaining: 2,
                delay: Duration::ZERO,
                fail: Some((Code::Unavailable, "x".into())),
            },
        );
        assert_eq!(
            faults.apply("Version").await.unwrap_err().code(),
            Code::Unavailable
        );
        assert!(faults.apply("Status").await.is_ok());
        assert!(faults.apply("Version").await.is_err());
        assert!(faults.apply("Version").await.is_ok());
    }
}
