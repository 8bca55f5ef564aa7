//! The Kubernetes release the double emulates (`--emulate-version`, as kube-apiserver's
//! flag of that name) and what differs between the releases it knows: the double's
//! fixtures are kube-apiserver v1.28.7's, its types and newer rules v1.36.2's.

use std::fmt;
use std::str::FromStr;

/// A Kubernetes minor release the double can answer as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    minor: u32,
}

/// A version the double does not emulate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported version {0:?}: the API server double emulates 1.28 and 1.36")]
pub struct UnsupportedVersion(pub String);

impl Version {
    /// Kubernetes 1.28, checked against kube-apiserver v1.28.7.
    pub const V1_28: Version = Version { minor: 28 };
    /// Kubernetes 1.36, checked against kube-apiserver v1.36.2.
    pub const V1_36: Version = Version { minor: 36 };
    /// The newest release the double emulates, its default.
    pub const NEWEST: Version = Version::V1_36;
    /// Every release the double emulates.
    pub const SUPPORTED: [Version; 2] = [Version::V1_28, Version::V1_36];

    /// The minor version.
    pub fn minor(self) -> u32 {
        self.minor
    }

    /// The release `/version` names: the kube-apiserver the double is held to.
    pub fn git_version(self) -> &'static str {
        match self.minor {
            28 => "v1.28.7-nodeconform",
            _ => "v1.36.2-nodeconform",
        }
    }

    /// Pods carry `metadata.generation`, bumped by spec changes and graceful deletion,
    /// and a status write that leaves `observedGeneration` out keeps the stored one
    /// (KEP-5067, from 1.33).
    pub(crate) fn pods_have_generation(self) -> bool {
        self.minor >= 33
    }

    /// WebSocket `exec`/`attach` requests offering `v5.channel.k8s.io` are
    /// answered by the API server and sent on to the kubelet as SPDY
    /// (`TranslateStreamCloseWebsocketRequests`, beta and on from 1.30).
    pub(crate) fn translates_websocket_streams(self) -> bool {
        self.minor >= 30
    }

    /// WebSocket port forwarding (`SPDY/3.1+portforward.k8s.io`) is tunnelled
    /// to the kubelet as SPDY (`PortForwardWebsockets`, beta and on from 1.31).
    pub(crate) fn tunnels_port_forwarding(self) -> bool {
        self.minor >= 31
    }

    /// Any container may set its own `restartPolicy` and `restartPolicyRules`
    /// (`ContainerRestartRules`, beta and on from 1.35).
    pub(crate) fn container_restart_rules(self) -> bool {
        self.minor >= 35
    }

    /// A restart rule may restart all of the pod's containers (`RestartAllContainers`;
    /// `RestartAllContainersOnContainerExits`, beta and on from 1.36).
    pub(crate) fn restart_all_containers(self) -> bool {
        self.minor >= 36
    }

    /// Nodes declare the features they implement and updates that need an undeclared one
    /// are refused (`NodeDeclaredFeatures`, beta and on from 1.36).
    pub(crate) fn node_declared_features(self) -> bool {
        self.minor >= 36
    }

    /// Pods have the `resize` subresource, the only way to change their containers'
    /// resources in place (KEP-1287; beta, on by default, from 1.33).
    pub(crate) fn pods_resize(self) -> bool {
        self.minor >= 33
    }
}

impl Default for Version {
    fn default() -> Self {
        Version::NEWEST
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

impl FromStr for Version {
    type Err = UnsupportedVersion;

    /// `1.36`, `v1.36` or a patch release such as `1.36.2`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let unsupported = || UnsupportedVersion(s.to_owned());
        let rest = s.strip_prefix('v').unwrap_or(s);
        let mut parts = rest.split('.');
        let (Some("1"), Some(minor)) = (parts.next(), parts.next()) else {
            return Err(unsupported());
        };
        if parts.next().is_some_and(|p| p.parse::<u32>().is_err()) || parts.next().is_some() {
            return Err(unsupported());
        }
        let minor: u32 = minor.parse().map_err(|_| unsupported())?;
        Version::SUPPORTED
            .into_iter()
            .find(|v| v.minor == minor)
            .ok_or_else(unsupported)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_read_as_kube_apiserver_writes_them() {
        assert_eq!("1.28".parse(), Ok(Version::V1_28));
        assert_eq!("v1.36.2".parse(), Ok(Version::V1_36));
        assert_eq!(Version::default(), Version::V1_36);
        assert_eq!(Version::V1_28.to_string(), "1.28");
        for bad in ["1.30", "2.28", "1", "1.28.x", "1.28.7.1", ""] {
            assert_eq!(
                bad.parse::<Version>(),
                Err(UnsupportedVersion(bad.to_owned())),
                "{bad}"
            );
        }
        assert!(!Version::V1_28.pods_have_generation());
        assert!(Version::V1_36.pods_have_generation());
    }
}
