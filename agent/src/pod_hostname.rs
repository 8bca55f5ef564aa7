//! A pod's host name and domain (`GeneratePodHostNameAndDomain`), the name its
//! sandbox gets (`GetNodenameForKernel`), and the `/etc/hosts` file the kubelet
//! writes for its containers (`makeHostsMount`).

use std::io;
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{HostAlias, Pod};

/// The Linux `nodename` holds 64 bytes: the longest FQDN a pod may take as
/// its host name.
const FQDN_MAX_LEN: usize = 64;
/// A host name is cut to 63 characters (64 bytes with the terminating NUL).
const HOSTNAME_MAX_LEN: usize = 63;

/// Why a pod's host name cannot be made.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    /// `spec.hostname` is not a DNS label.
    #[error("pod Hostname {0:?} is not a valid DNS label")]
    Hostname(String),
    /// `spec.subdomain` is not a DNS label.
    #[error("pod Subdomain {0:?} is not a valid DNS label")]
    Subdomain(String),
    /// `spec.hostnameOverride` is not a DNS subdomain.
    #[error("pod HostnameOverride {0:?} is not a valid DNS subdomain")]
    HostnameOverride(String),
    /// The host name cut to 63 characters leaves nothing.
    #[error("hostname for pod {pod:?} was invalid: {hostname:?}")]
    Empty {
        /// The pod's name.
        pod: String,
        /// The host name before it was cut.
        hostname: String,
    },
    /// `setHostnameAsFQDN` with an FQDN the kernel cannot hold.
    #[error(
        "failed to construct FQDN from pod hostname and cluster domain, FQDN {fqdn} is too long ({FQDN_MAX_LEN} characters is the max, {} characters requested)",
        fqdn.len()
    )]
    FqdnTooLong {
        /// The FQDN.
        fqdn: String,
    },
}

/// A pod's short host name and its domain (`<subdomain>.<namespace>.svc.<cluster
/// domain>`, empty without a subdomain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName {
    /// `spec.hostname`, or the pod name; at most 63 characters.
    pub hostname: String,
    /// The domain, or empty.
    pub domain: String,
}

impl HostName {
    /// `GeneratePodHostNameAndDomain` for `pod` in `cluster_domain`.
    pub fn of(pod: &Pod, cluster_domain: &str) -> Result<Self, Error> {
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let spec = pod.spec.as_ref();
        // `hostnameOverride` (1.35's `HostnameOverride`, on by default) is the host name
        // as given, without a domain: `hostname`, `subdomain` and FQDN do not apply.
        if let Some(over) = spec.and_then(|s| s.hostname_override.as_deref()) {
            if !is_dns_subdomain(over) {
                return Err(Error::HostnameOverride(over.to_owned()));
            }
            return Ok(Self {
                hostname: truncate(name, over)?,
                domain: String::new(),
            });
        }
        let hostname = match spec.and_then(|s| s.hostname.as_deref()) {
            Some(h) if !h.is_empty() => {
                if !is_dns_label(h) {
                    return Err(Error::Hostname(h.to_owned()));
                }
                h
            }
            _ => name,
        };
        let hostname = truncate(name, hostname)?;
        let domain = match spec.and_then(|s| s.subdomain.as_deref()) {
            Some(sub) if !sub.is_empty() => {
                if !is_dns_label(sub) {
                    return Err(Error::Subdomain(sub.to_owned()));
                }
                let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
                format!("{sub}.{namespace}.svc.{cluster_domain}")
            }
            _ => String::new(),
        };
        Ok(Self { hostname, domain })
    }

    /// The sandbox's host name (`GetNodenameForKernel`): the FQDN when the
    /// pod asks for it with `setHostnameAsFQDN` and has a domain.
    pub fn for_kernel(&self, set_hostname_as_fqdn: bool) -> Result<String, Error> {
        if self.domain.is_empty() || !set_hostname_as_fqdn {
            return Ok(self.hostname.clone());
        }
        let fqdn = format!("{}.{}", self.hostname, self.domain);
        if fqdn.len() > FQDN_MAX_LEN {
            return Err(Error::FqdnTooLong { fqdn });
        }
        Ok(fqdn)
    }
}

/// The sandbox host name of `pod`: [`HostName::of`] then [`HostName::for_kernel`].
pub fn sandbox_hostname(pod: &Pod, cluster_domain: &str) -> Result<String, Error> {
    let set_fqdn = pod
        .spec
        .as_ref()
        .and_then(|s| s.set_hostname_as_fqdn)
        .unwrap_or(false);
    HostName::of(pod, cluster_domain)?.for_kernel(set_fqdn)
}

/// `truncatePodHostnameIfNeeded`: 63 characters, without a trailing `-` or `.`.
fn truncate(pod_name: &str, hostname: &str) -> Result<String, Error> {
    if hostname.len() <= HOSTNAME_MAX_LEN {
        return Ok(hostname.to_owned());
    }
    // A DNS label or pod name is ASCII: byte 63 is a character boundary.
    let cut = hostname
        .get(..HOSTNAME_MAX_LEN)
        .unwrap_or(hostname)
        .trim_end_matches(['-', '.']);
    if cut.is_empty() {
        return Err(Error::Empty {
            pod: pod_name.to_owned(),
            hostname: hostname.to_owned(),
        });
    }
    Ok(cut.to_owned())
}

fn is_dns_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// `IsDNS1123Subdomain`: dot-separated DNS labels, at most 253 characters.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// The header of a hosts file for a pod on the pod network.
const MANAGED_HEADER: &str = "# Kubernetes-managed hosts file.\n";
/// The header of a hosts file for a pod on the host's network.
const MANAGED_HEADER_HOST_NETWORK: &str = "# Kubernetes-managed hosts file (host network).\n";

/// What the kubelet writes as a pod's `/etc/hosts` (`managedHostsFileContent`):
/// localhost entries, one line per pod IP with the host name (FQDN first
/// when the pod has a domain), then the `hostAliases`.
pub fn managed_hosts_file(pod_ips: &[String], name: &HostName, aliases: &[HostAlias]) -> String {
    let mut out = String::from(MANAGED_HEADER);
    out.push_str("127.0.0.1\tlocalhost\n");
    out.push_str("::1\tlocalhost ip6-localhost ip6-loopback\n");
    out.push_str("fe00::0\tip6-localnet\n");
    out.push_str("fe00::0\tip6-mcastprefix\n");
    out.push_str("fe00::1\tip6-allnodes\n");
    out.push_str("fe00::2\tip6-allrouters\n");
    for ip in pod_ips {
        if name.domain.is_empty() {
            out.push_str(&format!("{ip}\t{}\n", name.hostname));
        } else {
            out.push_str(&format!(
                "{ip}\t{}.{}\t{}\n",
                name.hostname, name.domain, name.hostname
            ));
        }
    }
    out.push_str(&host_aliases(aliases));
    out
}

/// A host-network pod's `/etc/hosts` (`nodeHostsFileContent`): the node's own
/// file under a header, then the `hostAliases`.
pub fn node_hosts_file(node_hosts: &str, aliases: &[HostAlias]) -> String {
    format!(
        "{MANAGED_HEADER_HOST_NETWORK}{node_hosts}{}",
        host_aliases(aliases)
    )
}

/// `hostsEntriesFromHostAliases`: one line per alias IP, names tab-separated.
fn host_aliases(aliases: &[HostAlias]) -> String {
    if aliases.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n# Entries added by HostAliases.\n");
    for alias in aliases {
        let names = alias.hostnames.as_deref().unwrap_or_default().join("\t");
        out.push_str(&format!("{}\t{names}\n", alias.ip));
    }
    out
}

/// Writes `content` as the pod's hosts file in `pod_dir` (`etc-hosts`, mode
/// 0644, as `ensureHostsFile`) and returns its path.
pub fn write_hosts_file(pod_dir: &Path, content: &str) -> io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(pod_dir)?;
    let path = pod_dir.join("etc-hosts");
    std::fs::write(&path, content)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(name: &str, mut spec: serde_json::Value) -> Pod {
        spec["containers"] = json!([]);
        let mut pod: Pod =
            serde_json::from_value(serde_json::json!({ "spec": spec })).expect("pod");
        pod.metadata.name = Some(name.into());
        pod.metadata.namespace = Some("ns".into());
        pod
    }

    #[test]
    fn hostname_and_domain_as_the_kubelet_makes_them() {
        let p = pod("web", json!({}));
        assert_eq!(sandbox_hostname(&p, "cluster.local").unwrap(), "web");
        let p = pod("web", json!({"subdomain": "t"}));
        let name = HostName::of(&p, "cluster.local").unwrap();
        assert_eq!(name.domain, "t.ns.svc.cluster.local");
        assert_eq!(sandbox_hostname(&p, "cluster.local").unwrap(), "web");
        let p = pod("web", json!({"subdomain": "t", "setHostnameAsFQDN": true}));
        assert_eq!(
            sandbox_hostname(&p, "cluster.local").unwrap(),
            "web.t.ns.svc.cluster.local"
        );
        // Without a subdomain setHostnameAsFQDN changes nothing.
        let p = pod("web", json!({"setHostnameAsFQDN": true, "hostname": "h"}));
        assert_eq!(sandbox_hostname(&p, "cluster.local").unwrap(), "h");
        // hostnameOverride wins over hostname, subdomain and FQDN.
        let p = pod(
            "web",
            json!({"hostnameOverride": "over.example", "hostname": "h", "subdomain": "t",
                   "setHostnameAsFQDN": true}),
        );
        let name = HostName::of(&p, "cluster.local").unwrap();
        assert_eq!(
            (name.hostname.as_str(), name.domain.as_str()),
            ("over.example", "")
        );
        assert_eq!(
            sandbox_hostname(&p, "cluster.local").unwrap(),
            "over.example"
        );
        let p = pod("web", json!({"hostnameOverride": "Not_Valid"}));
        assert_eq!(
            HostName::of(&p, "cluster.local"),
            Err(Error::HostnameOverride("Not_Valid".into()))
        );
    }

    #[test]
    fn long_names_are_cut_or_refused_as_upstream() {
        let long = format!("{}-x", "a".repeat(62));
        let p = pod(&long, json!({}));
        assert_eq!(
            sandbox_hostname(&p, "cluster.local").unwrap(),
            "a".repeat(62)
        );
        let p = pod(
            "hostfqdnveryveryveryverylongforfqdntobemorethan64bytes",
            json!({"subdomain": "t", "setHostnameAsFQDN": true}),
        );
        let err = sandbox_hostname(&p, "cluster.local").unwrap_err();
        assert_eq!(
            err.to_string(),
            "failed to construct FQDN from pod hostname and cluster domain, FQDN \
             hostfqdnveryveryveryverylongforfqdntobemorethan64bytes.t.ns.svc.cluster.local \
             is too long (64 characters is the max, 77 characters requested)"
        );
    }

    #[test]
    fn hosts_file_has_the_fqdn_first_and_the_aliases() {
        let name = HostName {
            hostname: "web".into(),
            domain: "t.ns.svc.cluster.local".into(),
        };
        let aliases = [HostAlias {
            ip: "123.45.67.89".into(),
            hostnames: Some(vec!["foo".into(), "bar".into()]),
        }];
        let file = managed_hosts_file(&["10.88.0.5".into()], &name, &aliases);
        assert!(file.starts_with("# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n"));
        assert!(file.contains("\n10.88.0.5\tweb.t.ns.svc.cluster.local\tweb\n"));
        assert!(file.ends_with("\n\n# Entries added by HostAliases.\n123.45.67.89\tfoo\tbar\n"));
        let plain = HostName {
            hostname: "web".into(),
            domain: String::new(),
        };
        assert!(
            managed_hosts_file(&["10.88.0.5".into()], &plain, &[]).ends_with("\n10.88.0.5\tweb\n")
        );
    }
}
