//! The `embedded` backend: the API server double (`nodeconform_apiserver`) in this process.

use std::path::PathBuf;

use super::{Cluster, Error, Result, Teardown};

/// The running API server double.
pub struct Embedded {
    api: nodeconform_apiserver::ApiServer,
}

impl Embedded {
    /// The API server's URL, e.g. `http://127.0.0.1:41234`.
    pub fn url(&self) -> &str {
        self.api.url()
    }

    /// Stops the API server.
    pub async fn shutdown(self) {
        self.api.shutdown().await;
    }
}

/// How to start the embedded API server.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// The port on 127.0.0.1 (0: a free one).
    pub port: u16,
    /// Bind pods created without `spec.nodeName` to this node (the API server double's
    /// minimal scheduler); `None`: pods name their node themselves, as the cases do.
    pub scheduler_node: Option<String>,
    /// Serve `metrics.k8s.io` (`kubectl top`), as a cluster with metrics-server does.
    pub metrics_api: bool,
    /// Where to write the kubeconfig; `None`: a private temporary directory, removed with
    /// the cluster.
    pub kubeconfig: Option<PathBuf>,
    /// The release the double answers as (`1.28`, `1.36`); `None`: the newest.
    pub emulate_version: Option<String>,
}

/// Starts the API server double on 127.0.0.1 and writes its kubeconfig.
pub async fn start(options: &Options) -> Result<Cluster> {
    // A cluster has a garbage collector: Orphan and Foreground deletions complete.
    let version = match &options.emulate_version {
        Some(v) => v
            .parse::<nodeconform_apiserver::Version>()
            .map_err(|e| Error::Embedded {
                message: e.to_string(),
            })?,
        None => nodeconform_apiserver::Version::NEWEST,
    };
    let mut builder = nodeconform_apiserver::ApiServer::builder()
        .port(options.port)
        .emulate_version(version)
        .garbage_collector(true)
        .metrics_api(options.metrics_api);
    if let Some(node) = &options.scheduler_node {
        builder = builder.bind_unscheduled_pods_to(node.clone());
    }
    let api = builder.start().await.map_err(|e| Error::Embedded {
        message: crate::error_chain(&e),
    })?;
    let (path, dir) = match &options.kubeconfig {
        Some(path) => (path.clone(), None),
        None => {
            let dir = tempfile::Builder::new()
                .prefix("nodeconform")
                .tempdir()
                .map_err(|source| Error::Io {
                    what: "creating a temporary directory".into(),
                    source,
                })?;
            (dir.path().join("kubeconfig"), Some(dir))
        }
    };
    api.write_kubeconfig(&path).map_err(|e| Error::Embedded {
        message: crate::error_chain(&e),
    })?;
    Ok(Cluster {
        client: api.client(),
        kubeconfig: path,
        description: format!("embedded API server at {}", api.url()),
        default_node: None,
        teardown: Teardown::Embedded(Box::new(Embedded { api })),
        _dir: dir,
    })
}
