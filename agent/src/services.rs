//! The service lister: every Service, from a watch (the kubelet's service
//! informer), for the variables each container gets about the services it
//! can reach (`getServiceEnvVarMap`, `envvars.FromServices`): those of its
//! pod's namespace (unless `enableServiceLinks: false`) and, always, the
//! `kubernetes` service of `default`.

use std::collections::BTreeMap;

use futures::{FutureExt, StreamExt};
use k8s_openapi::api::core::v1::Service;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use tokio::sync::watch;

/// The services whose variables every pod gets, from `default`.
const MASTER_SERVICES: &[&str] = &["kubernetes"];

/// What the kubelet answers before its first list of services (a
/// `CreateContainerConfigError`).
pub const NOT_SYNCED: &str =
    "services have not yet been read at least once, cannot construct envvars";

/// A read handle on the services the watch has seen.
#[derive(Clone)]
pub struct Services(Store<Service>);

impl std::fmt::Debug for Services {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Services").field(&self.0.len()).finish()
    }
}

/// Starts watching every Service; the task ends at shutdown.
pub fn spawn(
    client: kube::Client,
    mut shutdown: watch::Receiver<bool>,
) -> (Services, tokio::task::JoinHandle<()>) {
    let (reader, writer) = reflector::store();
    let api: Api<Service> = Api::all(client);
    let task = tokio::spawn(async move {
        let stream = watcher::watcher(api, watcher::Config::default())
            .default_backoff()
            .modify(|s| s.metadata.managed_fields = None)
            .reflect(writer);
        tokio::pin!(stream);
        loop {
            tokio::select! {
                event = stream.next() => match event {
                    Some(Ok(_)) => {}
                    Some(Err(error)) => tracing::warn!(%error, "service watch failed; relisting"),
                    None => return,
                },
                _ = shutdown.changed() => return,
            }
        }
    });
    (Services(reader), task)
}

impl Services {
    /// The service variables of a container in `namespace`; `Err` before the
    /// first list (the kubelet's `serviceHasSynced`).
    pub fn env(&self, namespace: &str, links: bool) -> Result<BTreeMap<String, String>, String> {
        if self.0.wait_until_ready().now_or_never().is_none() {
            return Err(NOT_SYNCED.to_owned());
        }
        let mut chosen: BTreeMap<String, std::sync::Arc<Service>> = BTreeMap::new();
        for service in self.0.state() {
            let name = service.metadata.name.clone().unwrap_or_default();
            let ns = service.metadata.namespace.as_deref().unwrap_or_default();
            if !has_cluster_ip(&service) {
                continue;
            }
            if ns == "default" && MASTER_SERVICES.contains(&name.as_str()) {
                chosen.entry(name).or_insert(service);
            } else if ns == namespace && links {
                chosen.insert(name, service);
            }
        }
        Ok(chosen.values().flat_map(|s| variables(s)).collect())
    }
}

/// `IsServiceIPSet`: a cluster IP that is neither empty nor `None`.
fn has_cluster_ip(service: &Service) -> bool {
    let ip = service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref());
    !matches!(ip, None | Some("" | "None"))
}

/// `envvars.FromServices` for one service: `NAME_SERVICE_HOST`,
/// `NAME_SERVICE_PORT` (the first port) and `_SERVICE_PORT_PORTNAME` for
/// named ports, then Docker's link variables (`NAME_PORT`,
/// `NAME_PORT_8765_TCP{,_PROTO,_PORT,_ADDR}`).
fn variables(service: &Service) -> Vec<(String, String)> {
    let prefix = env_name(service.metadata.name.as_deref().unwrap_or_default());
    let Some(spec) = &service.spec else {
        return Vec::new();
    };
    let ip = spec.cluster_ip.clone().unwrap_or_default();
    let ports = spec.ports.as_deref().unwrap_or_default();
    let Some(first) = ports.first() else {
        return Vec::new();
    };
    let mut out = vec![
        (format!("{prefix}_SERVICE_HOST"), ip.clone()),
        (format!("{prefix}_SERVICE_PORT"), first.port.to_string()),
    ];
    for port in ports {
        if let Some(name) = port.name.as_deref().filter(|n| !n.is_empty()) {
            out.push((
                format!("{prefix}_SERVICE_PORT_{}", env_name(name)),
                port.port.to_string(),
            ));
        }
    }
    // Go's net.JoinHostPort: an IPv6 address in brackets.
    let host = if ip.contains(':') {
        format!("[{ip}]")
    } else {
        ip.clone()
    };
    for (i, port) in ports.iter().enumerate() {
        let protocol = port
            .protocol
            .as_deref()
            .filter(|p| !p.is_empty())
            .unwrap_or("TCP");
        let url = format!("{}://{host}:{}", protocol.to_lowercase(), port.port);
        if i == 0 {
            out.push((format!("{prefix}_PORT"), url.clone()));
        }
        let at = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
        out.push((format!("{at}_PROTO"), protocol.to_lowercase()));
        out.push((format!("{at}_PORT"), port.port.to_string()));
        out.push((format!("{at}_ADDR"), ip.clone()));
        out.push((at, url));
    }
    out
}

/// `makeEnvVariableName`: upper case, `-` as `_`.
fn env_name(name: &str) -> String {
    name.replace('-', "_").to_uppercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variables_as_the_kubelet_writes_them() {
        let service: Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "foo-service", "namespace": "ns"},
            "spec": {
                "clusterIP": "10.96.3.4",
                "ports": [
                    {"port": 8765, "protocol": "TCP"},
                    {"name": "dns-udp", "port": 53, "protocol": "UDP"}
                ]
            }
        }))
        .unwrap();
        let vars: BTreeMap<String, String> = variables(&service).into_iter().collect();
        let expected: BTreeMap<String, String> = [
            ("FOO_SERVICE_SERVICE_HOST", "10.96.3.4"),
            ("FOO_SERVICE_SERVICE_PORT", "8765"),
            ("FOO_SERVICE_SERVICE_PORT_DNS_UDP", "53"),
            ("FOO_SERVICE_PORT", "tcp://10.96.3.4:8765"),
            ("FOO_SERVICE_PORT_8765_TCP", "tcp://10.96.3.4:8765"),
            ("FOO_SERVICE_PORT_8765_TCP_PROTO", "tcp"),
            ("FOO_SERVICE_PORT_8765_TCP_PORT", "8765"),
            ("FOO_SERVICE_PORT_8765_TCP_ADDR", "10.96.3.4"),
            ("FOO_SERVICE_PORT_53_UDP", "udp://10.96.3.4:53"),
            ("FOO_SERVICE_PORT_53_UDP_PROTO", "udp"),
            ("FOO_SERVICE_PORT_53_UDP_PORT", "53"),
            ("FOO_SERVICE_PORT_53_UDP_ADDR", "10.96.3.4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(vars, expected);
        let mut headless = service.clone();
        headless.spec.as_mut().unwrap().cluster_ip = Some("None".into());
        assert!(!has_cluster_ip(&headless));
    }
}
