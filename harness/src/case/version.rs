//! Kubelet versions a case or an expectation applies to: `since` (inclusive) and `until`
//! (exclusive), compared with the node's `status.nodeInfo.kubeletVersion` by minor version.
//! Where kubelets of two versions behave differently, a case holds both expectations, each
//! with its range; a case outside its range is ignored with the reason, never changed.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Kubernetes minor version (`1.31`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MinorVersion {
    /// The major version (1).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

/// A string that does not name a Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a Kubernetes version (write it as \"1.31\")")]
pub struct BadVersion(String);

impl FromStr for MinorVersion {
    type Err = BadVersion;

    /// `1.31`, or a version as a kubelet reports it (`v1.36.2`, `v1.33.0-nodeconform.0.1.0`):
    /// its major and minor numbers.
    fn from_str(s: &str) -> Result<Self, BadVersion> {
        let bad = || BadVersion(s.to_string());
        let digits = s.strip_prefix('v').unwrap_or(s);
        let mut parts = digits.splitn(3, '.');
        let number = |p: Option<&str>| -> Result<u32, BadVersion> {
            let p = p.ok_or_else(bad)?;
            let end = p.find(|c: char| !c.is_ascii_digit()).unwrap_or(p.len());
            if end == 0 {
                return Err(bad());
            }
            p[..end].parse().map_err(|_| bad())
        };
        let major = number(parts.next())?;
        let minor = number(parts.next())?;
        Ok(MinorVersion { major, minor })
    }
}

impl fmt::Display for MinorVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl<'de> Deserialize<'de> for MinorVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // YAML reads `1.30` as the number 1.3: only a string says which minor it is.
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = MinorVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Kubernetes version as a string, e.g. \"1.31\"")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<MinorVersion, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<MinorVersion, E> {
                Err(E::custom(format!(
                    "a version must be quoted (\"{v}\"): YAML reads 1.30 as the number 1.3"
                )))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<MinorVersion, E> {
                self.visit_f64(v as f64)
            }
        }
        d.deserialize_any(Visitor)
    }
}

impl Serialize for MinorVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The kubelet versions something applies to: from `since` (inclusive) until `until`
/// (exclusive); either may be open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Versions {
    /// The first version it applies to.
    pub since: Option<MinorVersion>,
    /// The first version it no longer applies to.
    pub until: Option<MinorVersion>,
}

impl Versions {
    /// Whether `version` is in the range.
    pub fn contains(&self, version: MinorVersion) -> bool {
        self.since.is_none_or(|s| version >= s) && self.until.is_none_or(|u| version < u)
    }

    /// Whether the range is open on both ends (applies to every kubelet).
    pub fn is_all(&self) -> bool {
        self.since.is_none() && self.until.is_none()
    }

    /// Whether a node reporting `reported` as its kubelet version is in the range; `Err`
    /// says why not (a version outside it, or one that is not a version).
    pub fn admits(&self, reported: &str) -> Result<(), String> {
        if self.is_all() {
            return Ok(());
        }
        match reported.parse::<MinorVersion>() {
            Ok(v) if self.contains(v) => Ok(()),
            Ok(_) => Err(format!(
                "applies to {self}; the node's kubelet is {reported}"
            )),
            Err(_) => Err(format!(
                "applies to {self}; the node reports kubeletVersion {reported:?}, not a version"
            )),
        }
    }
}

impl Versions {
    /// Whether an API server reporting `reported` (its `gitVersion`) can serve what the
    /// range needs: a kubelet may not be newer than its API server, so what applies from
    /// `since` needs an API server of that release or later (an older one lacks the fields
    /// and subresources the behaviour shows through). `Err` says why not; a version that
    /// does not parse is not held against the case.
    pub fn admits_server(&self, reported: &str) -> Result<(), String> {
        match (self.since, reported.parse::<MinorVersion>()) {
            (Some(since), Ok(server)) if server < since => Err(format!(
                "applies to {self}, which needs an API server of {since} or later (a kubelet may \
                 not be newer than its API server); the API server is {reported}"
            )),
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Versions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.since, self.until) {
            (None, None) => f.write_str("every kubelet"),
            (Some(s), None) => write!(f, "kubelet {s} and later"),
            (None, Some(u)) => write!(f, "kubelets before {u}"),
            (Some(s), Some(u)) => write!(f, "kubelet {s} up to (not including) {u}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> MinorVersion {
        s.parse().unwrap()
    }

    #[test]
    fn versions_as_cases_and_kubelets_write_them() {
        assert_eq!(
            v("1.31"),
            MinorVersion {
                major: 1,
                minor: 31
            }
        );
        assert_eq!(v("v1.36.2"), v("1.36"));
        assert_eq!(v("v1.33.0-nodeconform.0.1.0"), v("1.33"));
        assert_eq!(v("v1.28.7+k3s1"), v("1.28"));
        for bad in ["", "1", "one.two", "v.1", "1.x"] {
            assert!(bad.parse::<MinorVersion>().is_err(), "{bad}");
        }
    }

    #[test]
    fn ranges_include_since_and_exclude_until() {
        let r = Versions {
            since: Some(v("1.29")),
            until: Some(v("1.31")),
        };
        assert!(!r.contains(v("1.28")));
        assert!(r.contains(v("1.29")) && r.contains(v("1.30")));
        assert!(!r.contains(v("1.31")));
        assert!(Versions::default().admits("anything").is_ok());
        let reason = r.admits("v1.36.2").unwrap_err();
        assert_eq!(
            reason,
            "applies to kubelet 1.29 up to (not including) 1.31; the node's kubelet is v1.36.2"
        );
        assert!(r.admits("unknown").unwrap_err().contains("not a version"));
    }

    #[test]
    fn what_applies_since_a_release_needs_an_api_server_of_it() {
        let r = Versions {
            since: Some(v("1.34")),
            until: None,
        };
        assert!(r.admits_server("v1.36.2").is_ok() && r.admits_server("v1.34.0").is_ok());
        assert!(r.admits_server("not a version").is_ok());
        let reason = r.admits_server("v1.28.7-nodeconform").unwrap_err();
        assert!(
            reason.contains("needs an API server of 1.34 or later"),
            "{reason}"
        );
        assert!(
            reason.ends_with("the API server is v1.28.7-nodeconform"),
            "{reason}"
        );
        let before = Versions {
            since: None,
            until: Some(v("1.31")),
        };
        assert!(before.admits_server("v1.28.7").is_ok());
    }

    #[test]
    fn unquoted_versions_are_refused_with_the_reason() {
        let e = serde_yaml::from_str::<MinorVersion>("1.30").unwrap_err();
        assert!(e.to_string().contains("must be quoted"), "{e}");
        assert_eq!(
            serde_yaml::from_str::<MinorVersion>("\"1.30\"").unwrap(),
            v("1.30")
        );
    }
}
