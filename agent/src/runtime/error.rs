//! Errors of runtime calls, and the NOT_FOUND answers that mean "already gone".

use std::path::PathBuf;
use std::time::Duration;

/// Errors from the runtime.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A CRI call failed.
    #[error("CRI {op} for {target} failed")]
    Rpc {
        /// The RPC name.
        op: &'static str,
        /// What it was about: `pod ns/name`, `container c of pod ns/name`, `runtime`.
        target: String,
        /// The gRPC status.
        #[source]
        source: tonic::Status,
    },
    /// A CRI call did not answer in time.
    #[error("CRI {op} for {target} timed out after {timeout:?}")]
    Timeout {
        /// The RPC name.
        op: &'static str,
        /// What it was about.
        target: String,
        /// The timeout.
        timeout: Duration,
    },
    /// The endpoint is not a unix socket.
    #[error("invalid CRI endpoint")]
    Endpoint(#[source] nodeconform_cri::Error),
    /// The pod's host name cannot be made (`generatePodSandboxConfig`).
    #[error(transparent)]
    Hostname(#[from] crate::pod_hostname::Error),
    /// The pod's cgroup could not be made or sized (`EnsureExists`, `SetPodCgroupConfig`).
    #[error("failed to ensure that the pod's cgroups exist and are correctly applied")]
    Cgroup(#[from] crate::cgroup_manager::Error),
    /// The host file for a container's termination message could not be created.
    #[error("creating termination message file {path}")]
    TerminationFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The gRPC status of a failed call, if any.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Rpc { source, .. } => Some(source),
            Error::Timeout { .. }
            | Error::Endpoint(_)
            | Error::Hostname(_)
            | Error::Cgroup(_)
            | Error::TerminationFile { .. } => None,
        }
    }

    /// The runtime does not implement the call (UNIMPLEMENTED): an optional CRI call an older
    /// runtime lacks, such as `GetContainerEvents` or `UpdatePodSandboxResources` on containerd 1.6.
    pub fn is_unimplemented(&self) -> bool {
        self.status()
            .is_some_and(|s| s.code() == tonic::Code::Unimplemented)
    }

    /// A short message for a container's `waiting.message`.
    pub fn short_message(&self) -> String {
        match self {
            Error::Rpc { source, .. } => format!(
                "rpc error: code = {:?} desc = {}",
                source.code(),
                source.message()
            ),
            Error::Cgroup(source) => format!("{other}: {source}", other = self),
            other => other.to_string(),
        }
    }
}

/// Result of runtime calls.
pub type Result<T, E = Error> = std::result::Result<T, E>;
/// A call about something the runtime no longer has (NOT_FOUND): `None`.
pub(super) fn not_found_is_none<T>(result: Result<T>) -> Result<Option<T>> {
    match result {
        Err(e)
            if e.status()
                .is_some_and(|s| s.code() == tonic::Code::NotFound) =>
        {
            Ok(None)
        }
        other => other.map(Some),
    }
}

/// Stopping or removing something the runtime no longer has succeeds: it is
/// already gone (containerd answers NOT_FOUND for some of these calls).
pub(super) fn gone_is_done<T>(result: Result<T>) -> Result<()> {
    not_found_is_none(result).map(drop)
}
