//! The `kubeconfig` backend: an existing cluster from a kubeconfig file and context.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{Error, Result};

/// `$KUBECONFIG` (first entry) or `~/.kube/config`.
pub fn default_path() -> Option<PathBuf> {
    if let Some(v) = std::env::var_os("KUBECONFIG")
        && let Some(first) = std::env::split_paths(&v).next()
    {
        return Some(first);
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config"))
}

/// A client from the kubeconfig at `path` with `context` (or its current context).
pub async fn client(path: &Path, context: Option<&str>) -> Result<kube::Client> {
    let err = |message: String| Error::Kubeconfig {
        path: path.to_path_buf(),
        message,
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(|e| err(e.to_string()))?;
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .map_err(|e| err(e.to_string()))?;
    kube::Client::try_from(config).map_err(|e| err(e.to_string()))
}
