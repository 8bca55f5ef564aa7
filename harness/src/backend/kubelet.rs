//! `--kubelet PATH`: an upstream kubelet binary as the node agent, on fake-cri.
//!
//! Every node gets a `KubeletConfiguration` of its own that lets the kubelet run without a
//! real node: its QoS and pod cgroups under a cgroup root of the node's own
//! ([`super::cgroup_root`], removed when it stops; no processes ever join them) and no
//! node-allocatable enforcement, allowed on a cgroup v1 host (`failCgroupV1`,
//! true by default since 1.35; kubelets before it ignore the field), no swap check, no eviction thresholds and no
//! image garbage collection (fake-cri's filesystems are simulated), its own ports on
//! 127.0.0.1 (cases run in parallel), anonymous authentication with `AlwaysAllow` so the
//! API server can reach `/containerLogs` without client certificates, and the cluster DNS
//! that kind configures, so pods with `dnsPolicy: ClusterFirst` get no `MissingClusterDNS`
//! warnings. The flags name the node, its IP, the CRI endpoint and the root directory.
//!
//! Everything the kubelet writes goes under the node's directory. What it cannot be told
//! to put elsewhere — before 1.31 (`podLogsDir`, ignored by older kubelets with a "lenient
//! decoding" note) the pods' log files in `/var/log/pods` with links in
//! `/var/log/containers`, and in every version the device manager's
//! `/var/lib/kubelet/device-plugins` — is the node's too: the kubelet runs in a mount
//! namespace of its own where `/var/log` and `/var/lib` show directories of its node
//! ([`super::mount_ns`]). So kubelets side by side neither see nor clean up each other's
//! logs, and nothing is left on the host. fake-cri, in the harness's namespace, takes the
//! host paths of the kubelet's requests (log paths, volume mounts, which the kubelet mounts
//! inside its namespace) from the kubelet's root, `/proc/PID/root`.
//!
//! The kubelet needs root: it makes its root directory a shared mount (`MakeRShared`) and
//! reads the cgroup hierarchy at start, and its mount namespace needs `CAP_SYS_ADMIN`.
//! Without them it exits before registering, and the case reports the first lines it
//! printed. What it mounts (its root directory, pods' volumes) is in its namespace and goes
//! away when it exits. Its node IP is the host's address on the default route: the kubelet
//! refuses a loopback one.

use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

/// The environment variable naming the kubelet binary the test suite runs the cases on.
pub const ENV: &str = "NODECONFORM_KUBELET";

/// The address every kubelet of the harness listens on.
pub const ADDRESS: &str = "127.0.0.1";

/// What a kubelet of one node needs.
#[derive(Debug, Clone)]
pub struct Node<'a> {
    /// The kubelet binary.
    pub kubelet: &'a Path,
    /// The node name (`--hostname-override`).
    pub name: &'a str,
    /// The kubeconfig of the cluster.
    pub kubeconfig: &'a Path,
    /// `unix:///…/cri.sock` of the node's fake-cri.
    pub cri_endpoint: &'a str,
    /// A directory of the node's own: the configuration, the root directory, manifests.
    pub dir: &'a Path,
    /// The node's own cgroup root ([`super::cgroup_root`]); without one the kubelet keeps
    /// no QoS or pod cgroups (and cannot resize pods in place).
    pub cgroup_root: Option<&'a str>,
    /// `--node-ip` ([`node_ip`]); without one the kubelet finds an address itself.
    pub node_ip: Option<IpAddr>,
    /// The port of its kubelet API (a free one when `None`).
    pub port: Option<u16>,
}

/// Writes the node's `KubeletConfiguration` and returns the kubelet's command line.
pub fn command(node: &Node<'_>) -> std::io::Result<Vec<String>> {
    let root = node.dir.join("root");
    let manifests = node.dir.join("manifests");
    std::fs::create_dir_all(&root)?;
    std::fs::create_dir_all(&manifests)?;
    std::fs::create_dir_all(node.dir.join("logs"))?;
    let config = node.dir.join("kubelet.yaml");
    let ports = (node.port.map_or_else(free_port, Ok)?, free_port()?);
    std::fs::write(&config, configuration(ports, node.dir, node.cgroup_root))?;
    let path = |p: PathBuf| p.to_string_lossy().into_owned();
    let mut words = vec![
        node.kubelet.to_string_lossy().into_owned(),
        format!("--config={}", path(config)),
        format!("--kubeconfig={}", node.kubeconfig.to_string_lossy()),
        format!("--hostname-override={}", node.name),
        format!("--container-runtime-endpoint={}", node.cri_endpoint),
        format!("--root-dir={}", path(root)),
        // Its serving certificate, which it would otherwise write to /var/lib/kubelet/pki.
        format!("--cert-dir={}", path(node.dir.join("pki"))),
    ];
    if let Some(ip) = node.node_ip {
        words.push(format!("--node-ip={ip}"));
    }
    Ok(words)
}

/// The host's address on its default route: the kubelet refuses a loopback node IP
/// (`failed to validate nodeIP: nodeIP can't be loopback address`) and wants one of the
/// host's own. Connecting a UDP socket sends nothing; it only picks the route. Without
/// a default route the kubelet is left to find an address itself.
pub fn node_ip() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // TEST-NET-3 (RFC 5737): routed like any outside address, never reached.
    socket.connect((Ipv4Addr::new(203, 0, 113, 1), 9)).ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Why `path` cannot be run as a kubelet, if it cannot.
pub fn check_binary(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a file".into());
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err("not executable".into());
    }
    Ok(())
}

/// The `KubeletConfiguration` (see the module docs for why each setting).
/// The cluster DNS server every node of the harness is given (kind's), so a
/// `ClusterFirst` pod's `/etc/resolv.conf` is the same whatever the agent.
pub const CLUSTER_DNS: &str = "10.96.0.10";

fn configuration(
    (port, healthz_port): (u16, u16),
    dir: &Path,
    cgroup_root: Option<&str>,
) -> String {
    let cgroups = match cgroup_root {
        Some(root) => format!("cgroupsPerQOS: true\ncgroupRoot: {root}"),
        None => "cgroupsPerQOS: false".to_owned(),
    };
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: {ADDRESS}
port: {port}
readOnlyPort: 0
healthzBindAddress: {ADDRESS}
healthzPort: {healthz_port}
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
{cgroups}
failCgroupV1: false
enforceNodeAllocatable: []
failSwapOn: false
evictionHard: {{}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
localStorageCapacityIsolation: false
serializeImagePulls: false
clusterDNS:
- {CLUSTER_DNS}
clusterDomain: cluster.local
staticPodPath: {dir}/manifests
podLogsDir: {dir}/logs
volumePluginDir: {dir}/volume-plugins
shutdownGracePeriod: 0s
rotateCertificates: false
serverTLSBootstrap: false
"#,
        dir = dir.display(),
    )
}

/// A port nothing listens on now. Another process may take it before the kubelet binds
/// it; the kubelet then exits and the case says so.
pub(super) fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_gets_its_configuration_and_flags() {
        let dir = tempfile::tempdir().unwrap();
        let words = command(&Node {
            kubelet: Path::new("/opt/kubelet"),
            name: "nc-1-x",
            kubeconfig: Path::new("/k"),
            cri_endpoint: "unix:///c.sock",
            dir: dir.path(),
            cgroup_root: Some("/nodeconform-nc-1-x"),
            node_ip: Some(IpAddr::from([192, 0, 2, 7])),
            port: Some(10250),
        })
        .unwrap();
        assert_eq!(words[0], "/opt/kubelet");
        for flag in [
            "--kubeconfig=/k",
            "--hostname-override=nc-1-x",
            "--container-runtime-endpoint=unix:///c.sock",
            "--node-ip=192.0.2.7",
        ] {
            assert!(words.iter().any(|w| w == flag), "{flag} in {words:?}");
        }
        let config = std::fs::read_to_string(dir.path().join("kubelet.yaml")).unwrap();
        let config: serde_yaml::Value = serde_yaml::from_str(&config).unwrap();
        assert_eq!(config["kind"], "KubeletConfiguration");
        assert_eq!(config["cgroupsPerQOS"], true);
        assert_eq!(config["cgroupRoot"], "/nodeconform-nc-1-x");
        assert_eq!(config["authorization"]["mode"], "AlwaysAllow");
        assert_eq!(config["port"], 10250);
        assert_ne!(config["port"], config["healthzPort"]);
        assert!(dir.path().join("root").is_dir());
    }
}
