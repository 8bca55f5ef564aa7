//! A pod's DNS configuration (the kubelet's `network/dns`, `GetPodDNS`): what
//! the sandbox's `/etc/resolv.conf` says, by `dnsPolicy`.
//!
//! `ClusterFirst` (the default) uses the cluster's DNS servers, searches
//! `<ns>.svc.<domain> svc.<domain> <domain>` before the node's own search
//! paths, and `ndots:5`; without cluster DNS servers it falls back to
//! `Default` with a `MissingClusterDNS` warning, as does `ClusterFirst` on the
//! host's network. `Default` is the node's resolver configuration, `None`
//! nothing; `spec.dnsConfig` is then appended. The limits of the API's
//! validation apply: 3 name servers, 32 search paths, 2048 characters.

use std::net::IpAddr;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::Pod;
use nodeconform_cri::v1 as cri;

const MAX_NAMESERVERS: usize = 3;
const MAX_SEARCH_PATHS: usize = 32;
const MAX_SEARCH_CHARS: usize = 2048;
const MAX_SEARCH_PATH_LEN: usize = 253;

/// The node's DNS settings.
#[derive(Debug, Clone, Default)]
pub struct Configurer {
    /// The cluster's DNS servers (`clusterDNS`).
    pub cluster_dns: Vec<IpAddr>,
    /// The cluster's domain (`clusterDomain`).
    pub cluster_domain: String,
    /// The node's resolver configuration (`resolvConf`, default
    /// `/etc/resolv.conf`); `None`: none.
    pub resolver_config: Option<PathBuf>,
}

/// A pod's DNS configuration and the warnings the kubelet records with it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PodDns {
    /// What the runtime writes into the sandbox's `/etc/resolv.conf`.
    pub config: cri::DnsConfig,
    /// Warning events about the pod: `(reason, message)`.
    pub warnings: Vec<(&'static str, String)>,
}

/// A resolver configuration file's name servers, search paths and options
/// (`parseResolvConf`).
fn parse_resolv_conf(text: &str) -> cri::DnsConfig {
    let mut config = cri::DnsConfig::default();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        match fields.next() {
            Some("nameserver") => config.servers.extend(fields.next().map(str::to_owned)),
            Some("search") => {
                config.searches = fields
                    .filter(|s| *s != ".")
                    .map(|s| s.trim_end_matches('.').to_owned())
                    .collect();
            }
            Some("options") => {
                let options: Vec<String> = fields.map(str::to_owned).collect();
                config.options = merge_options(std::mem::take(&mut config.options), options);
            }
            _ => {}
        }
    }
    config
}

/// Options by name, the later one winning (`appendOptions`; upstream's order
/// comes from a Go map, so it is not stable there; here it is the first
/// appearance of each name).
fn merge_options(options: Vec<String>, more: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for option in options.into_iter().chain(more) {
        let name = option.split(':').next().unwrap_or_default().to_owned();
        match out
            .iter_mut()
            .find(|o| o.split(':').next().unwrap_or_default() == name)
        {
            Some(existing) => *existing = option,
            None => out.push(option),
        }
    }
    out
}

fn dedup(items: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

impl Configurer {
    fn host_config(&self) -> cri::DnsConfig {
        let Some(path) = &self.resolver_config else {
            // No resolver configuration: the node itself (`127.0.0.1`) answers.
            return cri::DnsConfig {
                servers: vec!["127.0.0.1".into()],
                searches: vec![".".into()],
                options: Vec::new(),
            };
        };
        match std::fs::read_to_string(path) {
            Ok(text) => parse_resolv_conf(&text),
            Err(error) => {
                tracing::warn!(path = %path.display(), %error, "reading the node's resolver configuration");
                cri::DnsConfig::default()
            }
        }
    }

    /// `GetPodDNS` for `pod`.
    pub fn pod_dns(&self, pod: &Pod) -> PodDns {
        let spec = pod.spec.as_ref();
        let host_network = spec.and_then(|s| s.host_network) == Some(true);
        let policy = spec
            .and_then(|s| s.dns_policy.as_deref())
            .unwrap_or("ClusterFirst");
        let mut warnings = Vec::new();
        let cluster = match policy {
            "None" => None,
            "ClusterFirstWithHostNet" => Some(true),
            "ClusterFirst" if !host_network => Some(true),
            _ => Some(false),
        };
        let mut config = match cluster {
            None => cri::DnsConfig::default(),
            Some(true) if !self.cluster_dns.is_empty() => {
                let host = self.host_config();
                let mut searches = Vec::new();
                if !self.cluster_domain.is_empty() {
                    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                    let domain = &self.cluster_domain;
                    searches = vec![
                        format!("{namespace}.svc.{domain}"),
                        format!("svc.{domain}"),
                        domain.clone(),
                    ];
                }
                searches.extend(host.searches);
                cri::DnsConfig {
                    servers: self.cluster_dns.iter().map(IpAddr::to_string).collect(),
                    searches: dedup(searches),
                    options: vec!["ndots:5".into()],
                }
            }
            Some(cluster) => {
                if cluster {
                    let name = pod.metadata.name.as_deref().unwrap_or_default();
                    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                    warnings.push((
                        "MissingClusterDNS",
                        format!(
                            "pod: \"{name}_{namespace}({})\". kubelet does not have ClusterDNS IP configured and cannot create Pod using \"ClusterFirst\" policy. Falling back to \"Default\" policy.",
                            pod.metadata.uid.as_deref().unwrap_or_default()
                        ),
                    ));
                }
                self.host_config()
            }
        };
        if let Some(extra) = spec.and_then(|s| s.dns_config.as_ref()) {
            config
                .servers
                .extend(extra.nameservers.clone().unwrap_or_default());
            config.servers = dedup(std::mem::take(&mut config.servers));
            config
                .searches
                .extend(extra.searches.clone().unwrap_or_default());
            config.searches = dedup(std::mem::take(&mut config.searches));
            let options = extra
                .options
                .iter()
                .flatten()
                .map(|o| match o.value.as_deref() {
                    Some(v) if !v.is_empty() => {
                        format!("{}:{v}", o.name.as_deref().unwrap_or_default())
                    }
                    _ => o.name.clone().unwrap_or_default(),
                })
                .collect();
            config.options = merge_options(std::mem::take(&mut config.options), options);
        }
        fit_limits(&mut config, &mut warnings);
        PodDns { config, warnings }
    }
}

/// `formDNSConfigFitsLimits`: at most 3 name servers and 32 search paths of at
/// most 253 characters, 2048 in all; what is cut is a `DNSConfigForming` warning.
fn fit_limits(config: &mut cri::DnsConfig, warnings: &mut Vec<(&'static str, String)>) {
    if config.servers.len() > MAX_NAMESERVERS {
        config.servers.truncate(MAX_NAMESERVERS);
        warnings.push((
            "DNSConfigForming",
            format!(
                "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: {}",
                config.servers.join(" ")
            ),
        ));
    }
    let mut exceeded = config.searches.len() > MAX_SEARCH_PATHS;
    config.searches.truncate(MAX_SEARCH_PATHS);
    let before = config.searches.len();
    config.searches.retain(|s| s.len() <= MAX_SEARCH_PATH_LEN);
    exceeded |= config.searches.len() != before;
    while config.searches.join(" ").len() > MAX_SEARCH_CHARS {
        config.searches.pop();
        exceeded = true;
    }
    if exceeded {
        warnings.push((
            "DNSConfigForming",
            format!(
                "Search Line limits were exceeded, some search paths have been omitted, the applied search line is: {}",
                config.searches.join(" ")
            ),
        ));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(spec: serde_json::Value) -> Pod {
        let mut spec = spec;
        spec["containers"] = json!([]);
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": spec,
        }))
        .unwrap()
    }

    fn configurer(dir: &tempfile::TempDir) -> Configurer {
        let resolv = dir.path().join("resolv.conf");
        std::fs::write(
            &resolv,
            "# host\nnameserver 192.0.2.53\nsearch example.com.\noptions edns0 ndots:2\n",
        )
        .unwrap();
        Configurer {
            cluster_dns: vec!["10.96.0.10".parse().unwrap()],
            cluster_domain: "cluster.local".into(),
            resolver_config: Some(resolv),
        }
    }

    #[test]
    fn cluster_first_uses_the_cluster_servers_and_search_paths() {
        let dir = tempfile::tempdir().unwrap();
        let dns = configurer(&dir).pod_dns(&pod(json!({})));
        assert_eq!(dns.config.servers, ["10.96.0.10"]);
        assert_eq!(
            dns.config.searches,
            [
                "ns.svc.cluster.local",
                "svc.cluster.local",
                "cluster.local",
                "example.com"
            ]
        );
        assert_eq!(dns.config.options, ["ndots:5"]);
        assert!(dns.warnings.is_empty());
    }

    #[test]
    fn default_none_host_network_and_missing_cluster_dns() {
        let dir = tempfile::tempdir().unwrap();
        let c = configurer(&dir);
        let host = c.pod_dns(&pod(json!({"dnsPolicy": "Default"}))).config;
        assert_eq!(host.servers, ["192.0.2.53"]);
        assert_eq!(host.options, ["edns0", "ndots:2"]);
        let on_host = c.pod_dns(&pod(json!({"hostNetwork": true}))).config;
        assert_eq!(
            on_host, host,
            "ClusterFirst on the host's network is Default"
        );
        let none = c.pod_dns(&pod(json!({
            "dnsPolicy": "None",
            "dnsConfig": {"nameservers": ["1.1.1.1"], "options": [{"name": "ndots", "value": "1"}, {"name": "edns0"}]},
        })));
        assert_eq!(none.config.servers, ["1.1.1.1"]);
        assert_eq!(none.config.options, ["ndots:1", "edns0"]);
        let no_cluster = Configurer {
            cluster_dns: Vec::new(),
            ..c.clone()
        };
        let fallback = no_cluster.pod_dns(&pod(json!({})));
        assert_eq!(fallback.config, host);
        assert_eq!(fallback.warnings[0].0, "MissingClusterDNS");
    }

    #[test]
    fn limits_cut_and_warn() {
        let dir = tempfile::tempdir().unwrap();
        let many: Vec<String> = (0..40).map(|i| format!("s{i}.example")).collect();
        let dns = configurer(&dir).pod_dns(&pod(json!({
            "dnsConfig": {"nameservers": ["1.1.1.1", "8.8.8.8", "9.9.9.9"], "searches": many},
        })));
        assert_eq!(dns.config.servers.len(), 3);
        assert_eq!(dns.config.searches.len(), 32);
        let reasons: Vec<&str> = dns.warnings.iter().map(|w| w.0).collect();
        assert_eq!(reasons, ["DNSConfigForming", "DNSConfigForming"]);
    }
}
