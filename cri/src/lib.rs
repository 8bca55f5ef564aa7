//! CRI v1 (`runtime.v1`) bindings: the Kubernetes Container Runtime Interface
//! as Rust types, tonic clients and tonic servers.
//!
//! The code is generated from the vendored `proto/api.proto` (see
//! `proto/README.md` for the release) by protox and tonic-prost-build and
//! checked in (`src/generated/`), so a build runs no code generator; a test
//! (`tests/generated.rs`) fails when they no longer agree. [`connect`] opens a channel to a runtime
//! over a unix socket, the way the kubelet reaches containerd or CRI-O.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use nodeconform_cri::{connect, v1::VersionRequest, RuntimeServiceClient};
//!
//! let channel = connect("unix:///run/containerd/containerd.sock").await?;
//! let version = RuntimeServiceClient::new(channel)
//!     .version(VersionRequest::default())
//!     .await?
//!     .into_inner();
//! println!("{} {}", version.runtime_name, version.runtime_version);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use hyper_util::rt::TokioIo;
use tonic::transport::{Channel, Endpoint};

/// The generated `runtime.v1` messages, clients and servers.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod v1 {
    include!("generated/runtime.v1.rs");
}

pub use v1::image_service_client::ImageServiceClient;
pub use v1::image_service_server::{ImageService, ImageServiceServer};
pub use v1::runtime_service_client::RuntimeServiceClient;
pub use v1::runtime_service_server::{RuntimeService, RuntimeServiceServer};

/// Errors from [`connect`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The endpoint is neither `unix://PATH` nor an absolute or relative path.
    #[error("unsupported CRI endpoint {endpoint:?}: expected unix:///path/to/socket")]
    UnsupportedEndpoint {
        /// The endpoint as given.
        endpoint: String,
    },
    /// The socket could not be reached.
    #[error("connecting to CRI socket {path}")]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: tonic::transport::Error,
    },
}

/// Turns a CRI endpoint (`unix:///run/x.sock`, or a plain path) into a socket path.
pub fn socket_path(endpoint: &str) -> Result<PathBuf, Error> {
    let path = match endpoint.strip_prefix("unix://") {
        Some(path) => path,
        None if endpoint.contains("://") => "",
        None => endpoint,
    };
    if path.is_empty() {
        return Err(Error::UnsupportedEndpoint {
            endpoint: endpoint.to_owned(),
        });
    }
    Ok(PathBuf::from(path))
}

/// Connects to a CRI runtime listening on a unix socket.
///
/// `endpoint` is `unix:///path` (the kubelet's `--container-runtime-endpoint`
/// form) or a plain path. The returned channel reconnects by itself if the
/// runtime restarts, like the kubelet's gRPC connection.
pub async fn connect(endpoint: &str) -> Result<Channel, Error> {
    let path = socket_path(endpoint)?;
    connect_path(&path).await
}

async fn connect_path(path: &Path) -> Result<Channel, Error> {
    let socket = path.to_owned();
    // The URI is never dialled: the connector below ignores it and opens the socket.
    Endpoint::from_static("http://cri.invalid")
        .connect_with_connector(tower::service_fn(move |_| {
            let socket = socket.clone();
            async move {
                Ok::<_, std::io::Error>(TokioIo::new(
                    tokio::net::UnixStream::connect(socket).await?,
                ))
            }
        }))
        .await
        .map_err(|source| Error::Connect {
            path: path.to_owned(),
            source,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(
            socket_path("unix:///run/x.sock").unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert_eq!(
            socket_path("/run/x.sock").unwrap(),
            PathBuf::from("/run/x.sock")
        );
        assert!(socket_path("tcp://127.0.0.1:1").is_err());
        assert!(socket_path("unix://").is_err());
        assert!(socket_path("").is_err());
    }
}
