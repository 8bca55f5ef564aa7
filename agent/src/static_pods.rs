//! Static pods: the kubelet's file source (`pkg/kubelet/config/file.go` and
//! `common.go`). Every pod manifest in one directory (YAML or JSON, one pod per
//! file, names starting with `.` skipped) is a pod of this node that no API
//! server asked for. The source rereads the directory every
//! [`Timings::file_check_frequency`](crate::Timings::file_check_frequency) and
//! sends the complete set whenever it changed.
//!
//! Each pod gets what `applyDefaults` gives it: its UID is a digest of the
//! manifest, the node and the file (so any change to the manifest makes a new
//! pod, and the old one is terminated), its name is `<name>-<node>`, its
//! namespace `default` when it has none, `spec.nodeName` is this node, a
//! toleration of every `NoExecute` taint, and the annotations
//! `kubernetes.io/config.hash` (the UID), `kubernetes.io/config.source: file`
//! and `kubernetes.io/config.seen`. Its mirror pod in the API is kept by
//! [`crate::mirror_pods`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{Pod, Toleration};
use tokio::sync::{mpsc, watch};

use crate::pod_config::CONFIG_SOURCE_ANNOTATION;

/// The annotation holding a static pod's hash (its UID).
pub const CONFIG_HASH_ANNOTATION: &str = "kubernetes.io/config.hash";
/// The annotation holding when the kubelet first saw a pod.
pub const CONFIG_SEEN_ANNOTATION: &str = "kubernetes.io/config.seen";

/// Why a manifest was not taken (logged; the file is skipped as upstream does).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("reading static pod manifest {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a pod manifest.
    #[error("static pod manifest {path} is not a v1 Pod: {message}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
}

/// Decodes one manifest and gives it the defaults of a static pod on `node`.
pub fn decode(path: &Path, text: &str, node: &str) -> Result<Pod, Error> {
    let invalid = |message: String| Error::Decode {
        path: path.to_owned(),
        message,
    };
    let value: serde_json::Value =
        serde_yaml::from_str(text).map_err(|e| invalid(e.to_string()))?;
    let kind = value.get("kind").and_then(|k| k.as_str());
    let version = value.get("apiVersion").and_then(|k| k.as_str());
    if kind != Some("Pod") || version != Some("v1") {
        return Err(invalid(format!(
            "kind {kind:?} apiVersion {version:?} (want Pod v1)"
        )));
    }
    let mut pod: Pod = serde_json::from_value(value.clone()).map_err(|e| invalid(e.to_string()))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    if name.is_empty() {
        return Err(invalid("metadata.name is required".into()));
    }
    let meta = &mut pod.metadata;
    let uid = meta
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| digest(&value, node, path));
    meta.uid = Some(uid.clone());
    meta.name = Some(format!("{name}-{}", node.to_lowercase()));
    if meta.namespace.as_deref().unwrap_or_default().is_empty() {
        meta.namespace = Some("default".into());
    }
    let annotations = meta.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(CONFIG_HASH_ANNOTATION.into(), uid);
    annotations.insert(CONFIG_SOURCE_ANNOTATION.into(), "file".into());
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_name = Some(node.to_owned());
    let tolerate_all = Toleration {
        operator: Some("Exists".into()),
        effect: Some("NoExecute".into()),
        ..Default::default()
    };
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    if !tolerations.contains(&tolerate_all) {
        tolerations.push(tolerate_all);
    }
    pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
        phase: Some("Pending".into()),
        ..Default::default()
    });
    Ok(pod)
}

/// The UID of a manifest: a digest of its content, the node and the file, so
/// that the same manifest in the same place is the same pod after a restart
/// and any change makes another (upstream hashes the same three, with MD5).
fn digest(manifest: &serde_json::Value, node: &str, path: &Path) -> String {
    use ring::digest::{Context, SHA256};
    let mut context = Context::new(&SHA256);
    // serde_json orders object keys: equal manifests give equal text.
    context.update(manifest.to_string().as_bytes());
    context.update(format!("host:{node}").as_bytes());
    context.update(format!("file:{}", path.display()).as_bytes());
    let digest = context.finish();
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What was read of one file, reused while its length and mtime stay the same.
#[derive(Debug, Clone)]
struct Read {
    stamp: (u64, Option<SystemTime>),
    pod: Option<Arc<Pod>>,
}

/// Reads the directory: the pods of the manifests that decode, by file.
fn scan(dir: &Path, node: &str, cache: &mut HashMap<PathBuf, Read>) -> Vec<Arc<Pod>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            if error.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), %error, "reading the static pod directory");
            }
            cache.clear();
            return Vec::new();
        }
    };
    let mut seen = HashMap::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let hidden = entry.file_name().to_string_lossy().starts_with('.');
        let Ok(meta) = entry.metadata() else { continue };
        if hidden || !meta.is_file() {
            continue;
        }
        let stamp = (meta.len(), meta.modified().ok());
        let read = match cache.remove(&path) {
            Some(read) if read.stamp == stamp => read,
            _ => Read {
                stamp,
                pod: load(&path, node).map(Arc::new),
            },
        };
        seen.insert(path, read);
    }
    *cache = seen;
    let mut pods: Vec<Arc<Pod>> = cache.values().filter_map(|r| r.pod.clone()).collect();
    pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    pods
}

fn load(path: &Path, node: &str) -> Option<Pod> {
    let result = std::fs::read_to_string(path)
        .map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })
        .and_then(|text| decode(path, &text, node));
    match result {
        Ok(mut pod) => {
            // When the kubelet first saw the pod (RFC 3339 with nanoseconds).
            let seen = k8s_openapi::jiff::Timestamp::now().to_string();
            let annotations = pod.metadata.annotations.get_or_insert_with(BTreeMap::new);
            annotations.insert(CONFIG_SEEN_ANNOTATION.into(), seen);
            Some(pod)
        }
        Err(error) => {
            tracing::warn!(%error, "static pod manifest skipped");
            None
        }
    }
}

/// Watches `dir` for the static pods of `node`: sends the whole set at start
/// and again whenever it changes, until shutdown.
pub fn spawn(
    dir: PathBuf,
    node: String,
    every: Duration,
    tx: mpsc::UnboundedSender<Vec<Arc<Pod>>>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut cache = HashMap::new();
        let mut last: Option<Vec<String>> = None;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = shutdown.changed() => return,
            }
            let (pods, kept) = {
                let dir = dir.clone();
                let node = node.clone();
                let mut cache_now = std::mem::take(&mut cache);
                match tokio::task::spawn_blocking(move || {
                    let pods = scan(&dir, &node, &mut cache_now);
                    (pods, cache_now)
                })
                .await
                {
                    Ok(result) => result,
                    Err(_) => return,
                }
            };
            cache = kept;
            let uids: Vec<String> = pods
                .iter()
                .map(|p| p.metadata.uid.clone().unwrap_or_default())
                .collect();
            if last.as_ref() != Some(&uids) {
                last = Some(uids);
                if tx.send(pods).is_err() {
                    return;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MANIFEST: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  namespace: ns\nspec:\n  containers:\n  - name: test\n    image: busybox\n";

    #[test]
    fn a_manifest_becomes_a_static_pod_of_the_node() {
        let path = Path::new("/etc/manifests/web.yaml");
        let pod = decode(path, MANIFEST, "Node-1").unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("web-node-1"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("ns"));
        let uid = pod.metadata.uid.clone().unwrap();
        assert_eq!(uid.len(), 32);
        let annotations = pod.metadata.annotations.clone().unwrap();
        assert_eq!(annotations[CONFIG_HASH_ANNOTATION], uid);
        assert_eq!(annotations[CONFIG_SOURCE_ANNOTATION], "file");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.node_name.as_deref(), Some("Node-1"));
        assert_eq!(spec.tolerations.unwrap().len(), 1);
        // The same manifest is the same pod; a changed one is another.
        let again = decode(path, MANIFEST, "Node-1").unwrap();
        assert_eq!(again.metadata.uid.as_deref(), Some(uid.as_str()));
        let changed = decode(path, &MANIFEST.replace("busybox", "pause"), "Node-1").unwrap();
        assert_ne!(changed.metadata.uid.as_deref(), Some(uid.as_str()));
    }

    #[test]
    fn bad_manifests_say_why() {
        let path = Path::new("/m/x.yaml");
        let err = decode(path, "kind: Service\napiVersion: v1\n", "n").unwrap_err();
        assert!(err.to_string().contains("is not a v1 Pod"), "{err}");
        let err = decode(path, "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: []}\n", "n")
            .unwrap_err();
        assert!(err.to_string().contains("metadata.name is required"), "{err}");
        assert!(decode(path, "{{{", "n").is_err());
    }

    #[test]
    fn scanning_skips_hidden_and_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("web.yaml"), MANIFEST).unwrap();
        std::fs::write(dir.path().join(".web.yaml.swp"), MANIFEST).unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "nope: [").unwrap();
        let mut cache = HashMap::new();
        let pods = scan(dir.path(), "n", &mut cache);
        assert_eq!(pods.len(), 1);
        assert_eq!(cache.len(), 2, "the broken file is remembered, the hidden one not");
    }
}
