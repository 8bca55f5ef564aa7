//! Everything a case creates is deleted afterwards — also after a failure or Ctrl-C.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};

use crate::case::Object;

/// What a case made in the cluster.
#[derive(Debug, Clone, Default)]
pub struct Made {
    /// Extra objects (kind, name).
    pub objects: Vec<(&'static str, String)>,
}

/// The namespaces of cases in flight and the objects in them.
#[derive(Debug, Default)]
pub struct Janitor {
    live: Mutex<BTreeMap<String, Made>>,
}

impl Janitor {
    /// Records that `namespace` (with `objects`) is about to be created.
    pub fn register(&self, namespace: &str, objects: &[Object]) {
        let made = Made {
            objects: objects
                .iter()
                .map(|o| (o.kind(), o.metadata().name.clone().unwrap_or_default()))
                .collect(),
        };
        if let Ok(mut live) = self.live.lock() {
            live.insert(namespace.to_string(), made);
        }
    }

    /// Deletes what was made in `namespace` and forgets it.
    pub async fn clean(&self, client: &kube::Client, namespace: &str) {
        let made = self
            .live
            .lock()
            .ok()
            .and_then(|mut l| l.remove(namespace))
            .unwrap_or_default();
        clean_namespace(client, namespace, &made).await;
    }

    /// Deletes everything still registered (after Ctrl-C); returns how many namespaces were cleaned.
    pub async fn clean_all(&self, client: &kube::Client) -> usize {
        let all: Vec<(String, Made)> = self
            .live
            .lock()
            .map(|mut l| std::mem::take(&mut *l).into_iter().collect())
            .unwrap_or_default();
        let n = all.len();
        futures::future::join_all(
            all.iter()
                .map(|(ns, made)| clean_namespace(client, ns, made)),
        )
        .await;
        n
    }
}

/// Strips finalizers from and force-deletes every pod, deletes the extra objects and the namespace.
pub async fn clean_namespace(client: &kube::Client, namespace: &str, made: &Made) {
    let work = async {
        let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
        if let Ok(list) = pods.list(&ListParams::default()).await {
            for pod in list.items {
                let Some(name) = pod.metadata.name.as_deref() else {
                    continue;
                };
                if pod
                    .metadata
                    .finalizers
                    .as_ref()
                    .is_some_and(|f| !f.is_empty())
                {
                    let _ = pods
                        .patch(
                            name,
                            &PatchParams::default(),
                            &Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}})),
                        )
                        .await;
                }
                let _ = pods
                    .delete(name, &DeleteParams::default().grace_period(0))
                    .await;
            }
        }
        let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        let services: Api<Service> = Api::namespaced(client.clone(), namespace);
        let gone = DeleteParams::default();
        for (kind, name) in &made.objects {
            let _ = match *kind {
                "configmap" => configmaps.delete(name, &gone).await.map(drop),
                "service" => services.delete(name, &gone).await.map(drop),
                _ => secrets.delete(name, &gone).await.map(drop),
            };
        }
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let _ = namespaces.delete(namespace, &DeleteParams::default()).await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(15), work).await;
}
