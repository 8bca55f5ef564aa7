//! Mirror pods (the kubelet's `pkg/kubelet/pod/mirror_client.go`): a static
//! pod shows in the API as a mirror pod — its own copy with the annotation
//! `kubernetes.io/config.mirror` (the static pod's hash) and the Node as its
//! controlling owner. The agent runs the static pod, never the mirror; the
//! mirror carries the static pod's status. A mirror that is being deleted, or
//! whose hash is not the static pod's, is deleted and created again; one whose
//! static pod is gone is deleted.

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::{DeleteParams, PostParams, Preconditions};
use tokio::sync::watch;

use crate::runtime::pod_key;
use crate::static_pods::CONFIG_HASH_ANNOTATION;

/// The annotation that makes a pod a mirror pod: the hash of its static pod.
pub const CONFIG_MIRROR_ANNOTATION: &str = "kubernetes.io/config.mirror";

/// Whether `pod` is a mirror pod.
pub fn is_mirror(pod: &Pod) -> bool {
    annotation(pod, CONFIG_MIRROR_ANNOTATION).is_some()
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// `IsMirrorPodOf`: the mirror carries the static pod's hash.
pub fn is_mirror_of(mirror: &Pod, static_pod: &Pod) -> bool {
    let hash = annotation(static_pod, CONFIG_HASH_ANNOTATION);
    hash.is_some() && annotation(mirror, CONFIG_MIRROR_ANNOTATION) == hash
}

/// Creates and deletes mirror pods.
#[derive(Clone)]
pub struct MirrorClient {
    client: kube::Client,
    node_name: String,
    /// The Node as last written: its UID goes into the owner reference.
    node: watch::Receiver<Option<Node>>,
}

/// Why a mirror pod could not be written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Node is not registered yet (its UID is needed).
    #[error("no Node {0} yet: its UID is the mirror pod's owner")]
    NoNode(String),
    /// The API refused.
    #[error("{op} mirror pod {pod}")]
    Api {
        /// `creating` or `deleting`.
        op: &'static str,
        /// `namespace/name`.
        pod: String,
        /// The cause.
        #[source]
        source: kube::Error,
    },
}

impl std::fmt::Debug for MirrorClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorClient")
            .field("node_name", &self.node_name)
            .finish_non_exhaustive()
    }
}

impl MirrorClient {
    /// A client for the mirror pods of `node_name`.
    pub fn new(
        client: kube::Client,
        node_name: String,
        node: watch::Receiver<Option<Node>>,
    ) -> Self {
        Self {
            client,
            node_name,
            node,
        }
    }

    /// `CreateMirrorPod`: the static pod's metadata (without its UID), spec
    /// and annotations plus `kubernetes.io/config.mirror`, owned by the Node.
    /// An existing mirror of the same hash counts as created.
    pub async fn create(&self, static_pod: &Pod) -> Result<(), Error> {
        let node = self.node.borrow().clone();
        let node_uid = node
            .and_then(|n| n.metadata.uid)
            .ok_or_else(|| Error::NoNode(self.node_name.clone()))?;
        let hash = annotation(static_pod, CONFIG_HASH_ANNOTATION)
            .unwrap_or_default()
            .to_owned();
        let mut annotations = static_pod.metadata.annotations.clone().unwrap_or_default();
        annotations.insert(CONFIG_MIRROR_ANNOTATION.into(), hash.clone());
        let mirror = Pod {
            metadata: ObjectMeta {
                name: static_pod.metadata.name.clone(),
                namespace: static_pod.metadata.namespace.clone(),
                labels: static_pod.metadata.labels.clone(),
                annotations: Some(annotations),
                owner_references: Some(vec![OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: self.node_name.clone(),
                    uid: node_uid,
                    controller: Some(true),
                    block_owner_deletion: None,
                }]),
                ..Default::default()
            },
            spec: static_pod.spec.clone(),
            status: None,
        };
        let namespace = static_pod
            .metadata
            .namespace
            .as_deref()
            .unwrap_or("default");
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &mirror).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                let name = static_pod.metadata.name.as_deref().unwrap_or_default();
                match api.get_opt(name).await {
                    Ok(Some(existing)) if is_mirror_of(&existing, static_pod) => Ok(()),
                    _ => Err(Error::Api {
                        op: "creating",
                        pod: pod_key(static_pod),
                        source: kube::Error::Api(s),
                    }),
                }
            }
            Err(source) => Err(Error::Api {
                op: "creating",
                pod: pod_key(static_pod),
                source,
            }),
        }
    }

    /// `DeleteMirrorPod`: deletes the mirror pod `uid` at once (grace 0, the
    /// UID as precondition); true if this call deleted it. A mirror already
    /// gone or replaced is no error.
    pub async fn delete(&self, mirror: &Pod) -> Result<bool, Error> {
        let namespace = mirror.metadata.namespace.as_deref().unwrap_or("default");
        let name = mirror.metadata.name.as_deref().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: mirror.metadata.uid.clone(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(s)) if s.is_not_found() || s.is_conflict() => Ok(false),
            Err(source) => Err(Error::Api {
                op: "deleting",
                pod: pod_key(mirror),
                source,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(annotations: &[(&str, &str)]) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        pod
    }

    #[test]
    fn a_mirror_is_known_by_its_hash() {
        let static_pod = pod(&[(CONFIG_HASH_ANNOTATION, "abc")]);
        let mirror = pod(&[
            (CONFIG_MIRROR_ANNOTATION, "abc"),
            (CONFIG_HASH_ANNOTATION, "abc"),
        ]);
        let stale = pod(&[(CONFIG_MIRROR_ANNOTATION, "old")]);
        assert!(is_mirror(&mirror) && is_mirror(&stale) && !is_mirror(&static_pod));
        assert!(is_mirror_of(&mirror, &static_pod));
        assert!(!is_mirror_of(&stale, &static_pod));
    }
}
