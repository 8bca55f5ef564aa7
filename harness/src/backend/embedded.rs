//! The `embedded` backend: the API server double (`nodeconform_apiserver`) in this process.

use super::{Cluster, Error, Result, Teardown};

/// The running API server double.
pub struct Embedded {
    api: nodeconform_apiserver::ApiServer,
}

impl Embedded {
    /// Stops the API server.
    pub async fn shutdown(self) {
        self.api.shutdown().await;
    }
}

/// Starts the API server double on 127.0.0.1 and writes its kubeconfig to a private temporary directory.
pub async fn start() -> Result<Cluster> {
    let api = nodeconform_apiserver::ApiServer::builder()
        .start()
        .await
        .map_err(|e| Error::Embedded {
            message: e.to_string(),
        })?;
    let dir = tempfile::Builder::new()
        .prefix("nodeconform")
        .tempdir()
        .map_err(|source| Error::Io {
            what: "creating a temporary directory".into(),
            source,
        })?;
    let path = dir.path().join("kubeconfig");
    api.write_kubeconfig(&path).map_err(|e| Error::Embedded {
        message: format!("writing the kubeconfig: {e}"),
    })?;
    Ok(Cluster {
        client: api.client(),
        kubeconfig: path,
        description: format!("embedded API server at {}", api.url()),
        default_node: None,
        teardown: Teardown::Embedded(Box::new(Embedded { api })),
        _dir: Some(dir),
    })
}
