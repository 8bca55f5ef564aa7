//! The object steps of a case: creating, applying, patching and deleting
//! the ConfigMaps, Secrets, Services and the pod of a case's namespace.

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::case::{DeleteObject, Object, PatchStep, PatchType, Subresource, Target};

/// Creates `object` in `namespace`; with `replace`, an existing one is replaced instead (`apply`).
pub async fn create(
    client: &kube::Client,
    namespace: &str,
    object: &Object,
    replace: bool,
) -> Result<(), String> {
    let result = match object {
        Object::ConfigMap(c) => put(client, namespace, (**c).clone(), replace).await,
        Object::Secret(s) => put(client, namespace, (**s).clone(), replace).await,
        Object::Service(s) => put(client, namespace, (**s).clone(), replace).await,
    };
    result.map_err(|e| {
        let verb = if replace { "applying" } else { "creating" };
        format!("{verb} {}: {e}", object.describe())
    })
}

async fn put<K>(
    client: &kube::Client,
    namespace: &str,
    mut object: K,
    replace: bool,
) -> kube::Result<()>
where
    K: kube::Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    object.meta_mut().namespace = Some(namespace.to_string());
    let api: Api<K> = Api::namespaced(client.clone(), namespace);
    match api.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(status)) if replace && status.code == 409 => {
            let name = object.meta().name.clone().unwrap_or_default();
            let current = api.get(&name).await?;
            object.meta_mut().resource_version = current.meta().resource_version.clone();
            api.replace(&name, &PostParams::default(), &object)
                .await
                .map(drop)
        }
        other => other.map(drop),
    }
}

/// Applies a `patch` step to the case's pod (named `pod`) or a ConfigMap/Secret.
pub async fn patch(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    step: &PatchStep,
) -> Result<(), String> {
    if step.patch_type == PatchType::Update {
        return update(client, namespace, pod, step).await;
    }
    let document = step.patch.clone();
    let patch = match step.patch_type {
        PatchType::Strategic | PatchType::Update => Patch::Strategic(document),
        PatchType::Merge => Patch::Merge(document),
        PatchType::Json => Patch::Json::<serde_json::Value>(
            serde_json::from_value(document).map_err(|e| format!("patch: {e}"))?,
        ),
    };
    let params = PatchParams::default();
    let result = match &step.object {
        Target::Pod => {
            let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
            match step.subresource {
                Some(sub) => api
                    .patch_subresource(sub.as_str(), pod, &params, &patch)
                    .await
                    .map(drop),
                None => api.patch(pod, &params, &patch).await.map(drop),
            }
        }
        Target::ConfigMap(name) => Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .patch(name, &params, &patch)
            .await
            .map(drop),
        Target::Secret(name) => Api::<Secret>::namespaced(client.clone(), namespace)
            .patch(name, &params, &patch)
            .await
            .map(drop),
    };
    let target = match &step.object {
        Target::Pod => format!("pod/{pod}"),
        other => other.to_string(),
    };
    let sub = step
        .subresource
        .map(|s| format!(" {}", s.as_str()))
        .unwrap_or_default();
    result.map_err(|e| format!("patching {target}{sub}: {e}"))
}

/// A `type: update` step: the pod read, the document merged into it, the whole written
/// back with `PUT` (through the subresource, if any).
async fn update(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    step: &PatchStep,
) -> Result<(), String> {
    let sub = step.subresource.map(Subresource::as_str);
    let what = format!(
        "pod/{pod}{}",
        sub.map(|s| format!(" {s}")).unwrap_or_default()
    );
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let current = match sub {
        Some(sub) => api.get_subresource(sub, pod).await,
        None => api.get(pod).await,
    }
    .map_err(|e| format!("reading {what} to update it: {e}"))?;
    let mut object = serde_json::to_value(current).map_err(|e| format!("{what}: {e}"))?;
    json_patch::merge(&mut object, &step.patch);
    let params = PostParams::default();
    match sub {
        Some(sub) => api
            .replace_subresource(sub, pod, &params, &object)
            .await
            .map(drop),
        None => {
            let object: Pod = serde_json::from_value(object).map_err(|e| format!("{what}: {e}"))?;
            api.replace(pod, &params, &object).await.map(drop)
        }
    }
    .map_err(|e| format!("updating {what}: {e}"))
}

/// Deletes a ConfigMap or Secret of the case.
pub async fn delete(
    client: &kube::Client,
    namespace: &str,
    object: &DeleteObject,
) -> Result<(), String> {
    let params = DeleteParams::default();
    let result = match object {
        DeleteObject::ConfigMap(name) => Api::<ConfigMap>::namespaced(client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(drop),
        DeleteObject::Secret(name) => Api::<Secret>::namespaced(client.clone(), namespace)
            .delete(name, &params)
            .await
            .map(drop),
    };
    result.map_err(|e| format!("deleting {}: {e}", object.target()))
}
