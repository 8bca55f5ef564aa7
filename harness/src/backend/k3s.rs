//! The `k3s` backend: not built in this version.
//!
//! It would start a K3s container through testcontainers as the API server; that needs a Docker
//! engine (absent where this was written) and a large dependency tree. `--backend k3s` fails with
//! a clear message instead; `--backend kind` or `--backend kubeconfig` (e.g. against a k3d cluster)
//! cover the same ground.

use super::Error;

/// Always the "not built" error.
pub fn start() -> Error {
    Error::K3sNotBuilt
}

#[cfg(test)]
mod tests {
    #[tokio::test]
    async fn k3s_fails_with_a_clear_message() {
        let err = match super::super::Cluster::start(
            super::super::BackendKind::K3s,
            &super::super::ClusterOptions::default(),
        )
        .await
        {
            Ok(_) => panic!("k3s must not start"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains("k3s backend is not built"), "{err}");
        assert!(err.contains("--backend kind"), "{err}");
    }
}
