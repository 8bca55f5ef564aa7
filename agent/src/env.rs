//! A container's environment, as the kubelet's `makeEnvironmentVariables`
//! builds it: `envFrom` sources first (ConfigMaps and Secrets, with their
//! prefix), then `env` entries in order, each either a literal value with
//! `$(VAR)` references expanded or a `valueFrom` reference (the downward API's
//! `fieldRef`, a ConfigMap or Secret key). `$(VAR)` in `command` and `args`
//! expands against the result ([`expand`]).
//!
//! A missing ConfigMap, Secret or key that is not `optional` fails the
//! container start with the kubelet's message (`CreateContainerConfigError`).
//! A `resourceFieldRef` reads the container's limits and requests, those it
//! does not limit defaulting to the node's allocatable ([`resource`]).
//! [`Sources`] reads the ConfigMaps and Secrets (the volume manager reads its
//! ConfigMap and Secret volumes through it too).

use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret};
use kube::Api;

use crate::resource;

/// The values the downward API reads from outside the pod object.
#[derive(Debug, Clone, Copy)]
pub struct Downward<'a> {
    /// The node's IP (`status.hostIP`).
    pub host_ip: Option<&'a str>,
    /// The pod's IP (`status.podIP`), once its sandbox has one.
    pub pod_ip: Option<&'a str>,
    /// The node's `status.allocatable` (the default of a container's unset
    /// limits), once the Node is registered.
    pub allocatable: Option<&'a resource::List>,
}

/// Builds `container`'s environment, in order, then the `services`'
/// variables it does not define itself (they also serve `$(VAR)` references
/// the container's own variables leave open); `Err` is the message of a
/// `CreateContainerConfigError`.
pub async fn resolve(
    client: &kube::Client,
    pod: &Pod,
    container: &Container,
    downward: Downward<'_>,
    services: &BTreeMap<String, String>,
) -> Result<Vec<(String, String)>, String> {
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("default");
    let mut sources = Sources::new(client, namespace);
    let mut env: Vec<(String, String)> = Vec::new();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.clone().unwrap_or_default();
        let data = if let Some(cm) = &from.config_map_ref {
            let optional = cm.optional == Some(true);
            match sources.configmap(&cm.name).await? {
                Some(data) => data,
                None if optional => continue,
                None => return Err(format!("configmap {:?} not found", cm.name)),
            }
        } else if let Some(s) = &from.secret_ref {
            let optional = s.optional == Some(true);
            match sources.secret(&s.name).await? {
                Some(data) => data,
                None if optional => continue,
                None => return Err(format!("secret {:?} not found", s.name)),
            }
        } else {
            continue;
        };
        for (key, value) in data {
            set(&mut env, format!("{prefix}{key}"), lossy(&value));
        }
    }
    for var in container.env.iter().flatten() {
        let value = match &var.value_from {
            None => expand_with(var.value.as_deref().unwrap_or_default(), |name| {
                lookup(&env, name).or_else(|| services.get(name).map(String::as_str))
            }),
            Some(from) => {
                if let Some(field) = &from.field_ref {
                    match field_value(pod, &field.field_path, downward) {
                        Some(v) => v,
                        None => {
                            return Err(format!("unsupported fieldPath: {}", field.field_path));
                        }
                    }
                } else if let Some(key) = &from.config_map_key_ref {
                    let optional = key.optional == Some(true);
                    match sources.configmap(&key.name).await? {
                        Some(data) => match data.get(&key.key) {
                            Some(v) => lossy(v),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in ConfigMap {namespace}/{}",
                                    key.key, key.name
                                ));
                            }
                        },
                        None if optional => continue,
                        None => return Err(format!("configmap {:?} not found", key.name)),
                    }
                } else if let Some(key) = &from.secret_key_ref {
                    let optional = key.optional == Some(true);
                    match sources.secret(&key.name).await? {
                        Some(data) => match data.get(&key.key) {
                            Some(v) => lossy(v),
                            None if optional => continue,
                            None => {
                                return Err(format!(
                                    "couldn't find key {} in Secret {namespace}/{}",
                                    key.key, key.name
                                ));
                            }
                        },
                        None if optional => continue,
                        None => return Err(format!("secret {:?} not found", key.name)),
                    }
                } else if let Some(selector) = &from.resource_field_ref {
                    // `defaultPodLimitsForDownwardAPI` reads the Node first.
                    let allocatable = downward
                        .allocatable
                        .ok_or("failed to find node object, expected a node")?;
                    resource::runtime_value(selector, pod, container, allocatable)?
                } else {
                    continue;
                }
            }
        };
        set(&mut env, var.name.clone(), value);
    }
    for (name, value) in services {
        if lookup(&env, name).is_none() {
            env.push((name.clone(), value.clone()));
        }
    }
    Ok(env)
}

/// The value of `name` in `env` (its last definition).
fn lookup<'a>(env: &'a [(String, String)], name: &str) -> Option<&'a str> {
    env.iter()
        .rev()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Sets `name` (a later definition replaces an earlier one in its place).
fn set(env: &mut Vec<(String, String)>, name: String, value: String) {
    match env.iter_mut().find(|(n, _)| *n == name) {
        Some(slot) => slot.1 = value,
        None => env.push((name, value)),
    }
}

/// A value from a ConfigMap or Secret as an environment variable's (lossy UTF-8).
fn lossy(value: &[u8]) -> String {
    String::from_utf8_lossy(value).into_owned()
}

/// The data of a ConfigMap or Secret: key → bytes.
pub type Data = BTreeMap<String, Vec<u8>>;

/// Where the ConfigMaps and Secrets of one namespace are read, each once per
/// user (a container start, a pod's volume set-up).
#[derive(Debug)]
pub struct Sources {
    configmaps: Api<ConfigMap>,
    secrets: Api<Secret>,
    /// What was read, by `(is a Secret, name)`.
    read: HashMap<(bool, String), Option<Data>>,
}

impl Sources {
    /// Reads from `namespace`.
    pub fn new(client: &kube::Client, namespace: &str) -> Self {
        Self {
            configmaps: Api::namespaced(client.clone(), namespace),
            secrets: Api::namespaced(client.clone(), namespace),
            read: HashMap::new(),
        }
    }

    /// A ConfigMap's data and binary data; `None` if it does not exist.
    pub async fn configmap(&mut self, name: &str) -> Result<Option<Data>, String> {
        self.data(false, name).await
    }

    /// A Secret's data (and stringData), decoded; `None` if it does not exist.
    pub async fn secret(&mut self, name: &str) -> Result<Option<Data>, String> {
        self.data(true, name).await
    }

    async fn data(&mut self, secret: bool, name: &str) -> Result<Option<Data>, String> {
        let key = (secret, name.to_owned());
        if let Some(known) = self.read.get(&key) {
            return Ok(known.clone());
        }
        let bytes = |(k, v): (String, k8s_openapi::ByteString)| (k, v.0);
        let data = if secret {
            let found = self.secrets.get_opt(name).await;
            let found = found.map_err(|e| format!("reading secret {name:?}: {e}"))?;
            found.map(|s| {
                let mut data: Data = s.data.unwrap_or_default().into_iter().map(bytes).collect();
                let strings = s.string_data.unwrap_or_default().into_iter();
                data.extend(strings.map(|(k, v)| (k, v.into_bytes())));
                data
            })
        } else {
            let found = self.configmaps.get_opt(name).await;
            let found = found.map_err(|e| format!("reading configmap {name:?}: {e}"))?;
            found.map(|cm| {
                let strings = cm.data.unwrap_or_default().into_iter();
                let mut data: Data = strings.map(|(k, v)| (k, v.into_bytes())).collect();
                data.extend(cm.binary_data.unwrap_or_default().into_iter().map(bytes));
                data
            })
        };
        self.read.insert(key, data.clone());
        Ok(data)
    }
}

/// The downward API's `fieldRef` values (`podFieldSelectorRuntimeValue`).
pub fn field_value(pod: &Pod, path: &str, downward: Downward<'_>) -> Option<String> {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let map_key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['"))
            .and_then(|rest| rest.strip_suffix("']"))
    };
    // A key the pod does not have (or a pod without labels or annotations) is "".
    let entry = |map: &Option<BTreeMap<String, String>>, key: &str| {
        map.as_ref()
            .and_then(|m| m.get(key))
            .cloned()
            .unwrap_or_default()
    };
    if let Some(key) = map_key("metadata.labels") {
        return Some(entry(&meta.labels, key));
    }
    if let Some(key) = map_key("metadata.annotations") {
        return Some(entry(&meta.annotations, key));
    }
    let value = match path {
        "metadata.name" => meta.name.clone(),
        "metadata.namespace" => meta.namespace.clone(),
        "metadata.uid" => meta.uid.clone(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()),
        "spec.serviceAccountName" => spec.and_then(|s| s.service_account_name.clone()),
        "status.hostIP" | "status.hostIPs" => downward.host_ip.map(str::to_owned),
        "status.podIP" | "status.podIPs" => downward.pod_ip.map(str::to_owned),
        _ => return None,
    };
    Some(value.unwrap_or_default())
}

/// Expands `$(VAR)` references to variables of `env` (`expansion.Expand`):
/// `$$` is a literal `$`, an unknown reference stays as written.
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    if crate::mutants::active(crate::mutants::Mutant::EnvExpansionSkipped) {
        return input.to_owned();
    }
    expand_with(input, |name| lookup(env, name))
}

/// [`expand`] with the values `value_of` gives (`expansion.MappingFuncFor`).
fn expand_with<'a>(input: &str, value_of: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('(')
            && let Some(end) = inner.find(')')
        {
            let name = &inner[..end];
            match value_of(name) {
                Some(value) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_upstream() {
        let env = vec![
            ("A".to_owned(), "x".to_owned()),
            ("B".to_owned(), "y".to_owned()),
        ];
        assert_eq!(expand("$(A)-$(B)", &env), "x-y");
        assert_eq!(expand("$$(A)", &env), "$(A)", "escaped");
        assert_eq!(
            expand("$(C) $A $", &env),
            "$(C) $A $",
            "unknown and bare stay"
        );
        assert_eq!(expand("$(A", &env), "$(A", "unterminated stays");
    }

    #[test]
    fn downward_api_fields() {
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
        let downward = Downward {
            host_ip: Some("10.0.0.1"),
            pod_ip: Some("10.88.0.2"),
            allocatable: None,
        };
        let field = |path: &str| field_value(&pod, path, downward);
        assert_eq!(field("metadata.name").as_deref(), Some("p"));
        assert_eq!(field("metadata.labels['app']").as_deref(), Some("web"));
        assert_eq!(field("metadata.labels['nope']").as_deref(), Some(""));
        assert_eq!(field("metadata.annotations['nope']").as_deref(), Some(""));
        assert_eq!(field("status.podIP").as_deref(), Some("10.88.0.2"));
        assert_eq!(field("status.hostIP").as_deref(), Some("10.0.0.1"));
        assert_eq!(field("spec.nope"), None);
    }
}
