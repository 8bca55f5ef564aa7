//! Errors, and the one mapping from errors to gRPC status codes.

use std::path::PathBuf;

use tonic::Status;

use crate::script::ParseError;

/// A CRI request fake-cri refuses, with the object it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No sandbox has this id.
    #[error("pod sandbox {id:?} not found")]
    SandboxNotFound {
        /// The id asked for.
        id: String,
    },
    /// No container has this id.
    #[error("container {id:?} not found")]
    ContainerNotFound {
        /// The id asked for.
        id: String,
    },
    /// A sandbox's host port could not be opened (the CNI portmap plugin's
    /// failure in containerd).
    #[error("failed to set up the host port {port}: {source}")]
    HostPort {
        /// The port.
        port: i32,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The request lacks a field or has an invalid one.
    #[error("invalid {rpc} request: {reason}")]
    InvalidRequest {
        /// The RPC.
        rpc: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Another sandbox or container already uses this name (same metadata and attempt).
    #[error("name {name:?} is reserved for {owner:?}")]
    NameReserved {
        /// The reserved name (`name_namespace_uid_attempt` like containerd).
        name: String,
        /// The id of the object holding it.
        owner: String,
    },
    /// The object is not in a state that allows the request.
    #[error("{object} {id:?} is {state}: cannot {action}")]
    WrongState {
        /// `container` or `pod sandbox`.
        object: &'static str,
        /// Its id.
        id: String,
        /// Its state.
        state: &'static str,
        /// What was asked.
        action: &'static str,
    },
    /// The container's command uses shell syntax the interpreter does not run.
    #[error("container {container:?}: unsupported command: {source}")]
    Script {
        /// The container name.
        container: String,
        /// Where and what.
        #[source]
        source: ParseError,
    },
    /// The image reference is malformed.
    #[error("invalid image reference {image:?}: {reason}")]
    InvalidImage {
        /// The reference.
        image: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The image is not present (not pulled).
    #[error("image {image:?} not found: pull it first")]
    ImageNotPresent {
        /// The reference.
        image: String,
    },
    /// The registry does not have the image.
    #[error(
        "failed to pull and unpack image {image:?}: failed to resolve reference {image:?}: {image}: not found"
    )]
    PullNotFound {
        /// The normalized reference.
        image: String,
    },
    /// A private repository refused the pull: no login, or the wrong one.
    #[error(
        "failed to pull and unpack image {image:?}: failed to resolve reference {image:?}: pulling from host {host} failed with status code [manifests {object}]: 401 Unauthorized"
    )]
    PullUnauthorized {
        /// The normalized reference.
        image: String,
        /// The registry host.
        host: String,
        /// The tag or digest asked for.
        object: String,
    },
    /// An `ExecSync` ran past its timeout.
    #[error("exec in container {id:?} timed out after {timeout}s")]
    ExecTimeout {
        /// The container id.
        id: String,
        /// The timeout in seconds.
        timeout: i64,
    },
    /// The host root was deferred and not set in time ([`crate::Builder::defer_host_root`]).
    #[error(
        "{rpc}: the host root (where the request's host paths are) was not set within {waited}s"
    )]
    NoHostRoot {
        /// The RPC that waited.
        rpc: &'static str,
        /// How long it waited, in seconds.
        waited: u64,
    },
    /// A host path of the request cannot be resolved under the host root.
    #[error("{rpc}: cannot resolve host path {} under {}: {source}", path.display(), root.display())]
    HostPath {
        /// The RPC.
        rpc: &'static str,
        /// The path as the request gave it.
        path: PathBuf,
        /// The host root.
        root: PathBuf,
        /// Why: too many symbolic links, or the root's process has exited.
        #[source]
        source: std::io::Error,
    },
    /// A streaming RPC fake-cri does not serve.
    #[error("{rpc} is not implemented by fake-cri: {hint}")]
    Unimplemented {
        /// The RPC.
        rpc: &'static str,
        /// What to use instead.
        hint: &'static str,
    },
}

/// The result of a CRI handler.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for Status {
    fn from(error: Error) -> Self {
        let message = error.to_string();
        match error {
            Error::SandboxNotFound { .. }
            | Error::ContainerNotFound { .. }
            | Error::ImageNotPresent { .. }
            | Error::PullNotFound { .. } => Status::not_found(message),
            Error::InvalidRequest { .. } | Error::Script { .. } | Error::InvalidImage { .. } => {
                Status::invalid_argument(message)
            }
            Error::NameReserved { .. } => Status::already_exists(message),
            Error::WrongState { .. } => Status::failed_precondition(message),
            Error::ExecTimeout { .. } => Status::deadline_exceeded(message),
            Error::Unimplemented { .. } => Status::unimplemented(message),
            Error::NoHostRoot { .. } => Status::unavailable(message),
            Error::HostPath { .. } => Status::failed_precondition(message),
            // containerd's error for a registry's 401 carries no errdefs kind.
            Error::PullUnauthorized { .. } | Error::HostPort { .. } => Status::unknown(message),
        }
    }
}

/// Why fake-cri could not start serving.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// No CRI socket path was given.
    #[error("no CRI socket path given")]
    NoSocket,
    /// Something is listening on the socket already.
    #[error("socket {path} is in use by another server")]
    SocketInUse {
        /// The socket path.
        path: PathBuf,
    },
    /// The path exists and is not a socket: it is not ours to replace.
    #[error("{path} exists and is not a socket")]
    NotASocket {
        /// The path.
        path: PathBuf,
    },
    /// Creating, binding or securing the socket failed.
    /// The streaming server (the URLs of `Exec`, `Attach`, `PortForward`)
    /// could not bind 127.0.0.1.
    #[error("binding the streaming server on 127.0.0.1")]
    Streaming(#[source] std::io::Error),
    #[error("binding socket {path}")]
    Bind {
        /// The socket path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}
