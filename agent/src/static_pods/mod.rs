//! Static pods: the kubelet's file source (`pkg/kubelet/config/file.go` and
//! `common.go`). Every pod manifest in one directory (YAML or JSON, one pod per
//! file, names starting with `.` skipped) is a pod of this node that no API
//! server asked for. The source follows the directory's changes as they happen
//! (inotify, as the kubelet does), rereads it every
//! [`Timings::file_check_frequency`](crate::Timings::file_check_frequency), and
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

mod inotify;

use inotify::{Change, Watch};

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
fn scan(dir: &Path, node: &str, cache: &mut HashMap<PathBuf, Read>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            if error.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(dir = %dir.display(), %error, "reading the static pod directory");
            }
            cache.clear();
            return;
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
}

/// One manifest, or `None` (logged) when it does not decode; an empty file
/// (one being written) is skipped quietly.
fn load(path: &Path, node: &str) -> Option<Pod> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => return None,
        Ok(text) => text,
        Err(source) => {
            let error = Error::Read {
                path: path.to_owned(),
                source,
            };
            tracing::warn!(%error, "static pod manifest skipped");
            return None;
        }
    };
    match decode(path, &text, node) {
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

/// The file source's state: what each file holds and the set last sent.
struct Source {
    dir: PathBuf,
    node: String,
    files: HashMap<PathBuf, Read>,
    sent: Option<Vec<String>>,
    tx: mpsc::UnboundedSender<Vec<Arc<Pod>>>,
}

impl Source {
    /// Sends the set of pods if it differs from the one last sent.
    fn send(&mut self) {
        let mut pods: Vec<Arc<Pod>> = self.files.values().filter_map(|r| r.pod.clone()).collect();
        pods.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        let uids: Vec<String> = pods
            .iter()
            .map(|p| p.metadata.uid.clone().unwrap_or_default())
            .collect();
        if self.sent.as_ref() != Some(&uids) {
            self.sent = Some(uids);
            let _ = self.tx.send(pods);
        }
    }

    /// Reads the whole directory again (at start, every
    /// `file_check_frequency`, and when events were lost).
    async fn rescan(&mut self) {
        let (dir, node) = (self.dir.clone(), self.node.clone());
        let mut cache = std::mem::take(&mut self.files);
        let scanned = tokio::task::spawn_blocking(move || {
            scan(&dir, &node, &mut cache);
            cache
        })
        .await;
        self.files = scanned.unwrap_or_default();
        self.send();
    }

    /// One change, sent on its own: a manifest removed and written again is
    /// a pod removed, then added.
    async fn apply(&mut self, change: Change) {
        match change {
            Change::Rescan => return self.rescan().await,
            Change::Removed(name) => {
                self.files.remove(&self.dir.join(name));
            }
            Change::Written(name) => {
                let path = self.dir.join(name);
                let node = self.node.clone();
                let read = tokio::task::spawn_blocking(move || {
                    let meta = std::fs::metadata(&path).ok()?;
                    let stamp = (meta.len(), meta.modified().ok());
                    let pod = load(&path, &node).map(Arc::new);
                    Some((path, Read { stamp, pod }))
                })
                .await;
                if let Ok(Some((path, read))) = read {
                    self.files.insert(path, read);
                }
            }
        }
        self.send();
    }
}

/// Waits for the next changes of `watch`, or forever without one.
async fn changes(watch: &mut Option<Watch>) -> std::io::Result<Vec<Change>> {
    match watch {
        Some(watch) => watch.changes().await,
        None => std::future::pending().await,
    }
}

/// Watches `dir` for the static pods of `node` and sends the whole set at
/// start and whenever it changes, until shutdown: every change as inotify
/// reports it, and a full reread every `every` (the kubelet's
/// `fileCheckFrequency`; also how a directory created later is found).
pub fn spawn(
    dir: PathBuf,
    node: String,
    every: Duration,
    tx: mpsc::UnboundedSender<Vec<Arc<Pod>>>,
    mut shutdown: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut source = Source {
            dir,
            node,
            files: HashMap::new(),
            sent: None,
            tx,
        };
        let mut watch: Option<Watch> = None;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if watch.is_none() && source.dir.is_dir() {
                match Watch::new(&source.dir) {
                    Ok(w) => watch = Some(w),
                    Err(error) => {
                        tracing::warn!(dir = %source.dir.display(), %error, "cannot watch the static pod directory; rereading it periodically")
                    }
                }
            }
            tokio::select! {
                _ = tick.tick() => source.rescan().await,
                batch = changes(&mut watch) => match batch {
                    Ok(batch) => {
                        for change in batch {
                            source.apply(change).await;
                        }
                    }
                    Err(error) => {
                        tracing::warn!(%error, "reading static pod directory events");
                        watch = None;
                    }
                },
                _ = shutdown.changed() => return,
            }
            if source.tx.is_closed() {
                return;
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
        let err = decode(
            path,
            "apiVersion: v1\nkind: Pod\nmetadata: {}\nspec: {containers: []}\n",
            "n",
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("metadata.name is required"),
            "{err}"
        );
        assert!(decode(path, "{{{", "n").is_err());
    }

    #[test]
    fn scanning_skips_hidden_and_broken_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("web.yaml"), MANIFEST).unwrap();
        std::fs::write(dir.path().join(".web.yaml.swp"), MANIFEST).unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "nope: [").unwrap();
        let mut cache = HashMap::new();
        scan(dir.path(), "n", &mut cache);
        let pods = cache.values().filter(|r| r.pod.is_some()).count();
        assert_eq!(pods, 1);
        assert_eq!(
            cache.len(),
            2,
            "the broken file is remembered, the hidden one not"
        );
    }
}
