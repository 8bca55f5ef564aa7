//! What a container's processes see, built from the CRI request as
//! containerd + runc would build it: the mounts, the environment, the host
//! name and the user.

use nodeconform_cri::v1;

use crate::images::Image;
use crate::sandbox::Sandbox;
use crate::script::{Context, Env, FileSystem, Mount};

/// The context of a container created from `config` in `sandbox`, with
/// `config`'s mounts as `mounts` (their host paths resolved under the root).
pub(super) fn context(
    config: &v1::ContainerConfig,
    mounts: Vec<Mount>,
    sandbox: &Sandbox,
    image: &Image,
) -> Context {
    // containerd uses the node's host name when the sandbox has none (host
    // network); fake-cri reads nothing of the host, so the pod name stands in.
    let hostname = match sandbox.config.hostname.as_str() {
        "" => sandbox.metadata().name,
        name => name.to_owned(),
    };
    let security = config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref());
    let uid = security
        .and_then(|s| s.run_as_user.as_ref())
        .map(|u| u.value)
        .or_else(|| security.and_then(|s| s.run_as_username.parse().ok()))
        .or_else(|| image_user(image))
        .unwrap_or(0);
    let gid = security
        .and_then(|s| s.run_as_group.as_ref())
        .map_or(0, |g| g.value);
    // Values are bytes from CRI 1.36 on (a kubelet may pass any file content); the
    // interpreter's variables are text.
    let envs: Vec<(&str, std::borrow::Cow<'_, str>)> = config
        .envs
        .iter()
        .map(|kv| (kv.key.as_str(), String::from_utf8_lossy(&kv.value)))
        .collect();
    let envs = envs.iter().map(|(k, v)| (*k, v.as_ref()));
    let files = FileSystem::new(mounts, security.is_some_and(|s| s.readonly_rootfs));
    // containerd writes the sandbox's host name file and mounts it into
    // every container.
    files.provide("/etc/hostname", format!("{hostname}\n").into_bytes());
    // The sandbox's sysctls, as runc writes them into the container's /proc/sys
    // (the only kernel parameters an interpreted process can read).
    for (name, value) in sandbox.config.linux.iter().flat_map(|l| &l.sysctls) {
        files.provide(
            &format!("/proc/sys/{}", name.replace('.', "/")),
            format!("{value}\n").into_bytes(),
        );
    }
    if let Some(dns) = &sandbox.config.dns_config {
        files.provide("/etc/resolv.conf", resolv_conf(dns).into_bytes());
    }
    Context {
        files,
        env: Env::container(envs, &hostname, uid),
        hostname,
        uid,
        gid,
        address: Some(sandbox.address()),
    }
}

/// `/etc/resolv.conf` from the sandbox's DNS config, as containerd writes it
/// (`parseDNSOptions`): `search`, then one `nameserver` line each, then `options`.
/// Without a DNS config containerd copies the host's file, which fake-cri does
/// not read: the container then has none.
fn resolv_conf(dns: &v1::DnsConfig) -> String {
    let mut out = String::new();
    if !dns.searches.is_empty() {
        out.push_str(&format!("search {}\n", dns.searches.join(" ")));
    }
    for server in &dns.servers {
        out.push_str(&format!("nameserver {server}\n"));
    }
    if !dns.options.is_empty() {
        out.push_str(&format!("options {}\n", dns.options.join(" ")));
    }
    out
}

/// The uid of the image's `USER` (from the image catalogue), the default when
/// the request sets none. A user name would need the image's `/etc/passwd`,
/// which fake-cri does not have: such an image, like one without `USER`, runs
/// as root (0).
fn image_user(image: &Image) -> Option<i64> {
    image.cri_user().0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_is_written_as_containerd_writes_it() {
        let dns = v1::DnsConfig {
            servers: vec!["8.8.8.8".into(), "1.1.1.1".into()],
            searches: vec!["ns.svc.cluster.local".into(), "svc.cluster.local".into()],
            options: vec!["ndots:5".into()],
        };
        assert_eq!(
            resolv_conf(&dns),
            "search ns.svc.cluster.local svc.cluster.local\nnameserver 8.8.8.8\nnameserver 1.1.1.1\noptions ndots:5\n"
        );
        assert_eq!(resolv_conf(&v1::DnsConfig::default()), "");
    }
}
