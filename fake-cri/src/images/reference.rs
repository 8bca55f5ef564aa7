//! Image references, parsed and normalized as containerd does.

use crate::error::{Error, Result};

/// A parsed, normalized image reference (`docker.io/library/busybox:latest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reference {
    /// Registry host, with port if given.
    pub domain: String,
    /// Repository path.
    pub path: String,
    /// Tag (`latest` when neither tag nor digest is given).
    pub tag: Option<String>,
    /// `sha256:…` when pinned by digest.
    pub digest: Option<String>,
}

impl Reference {
    /// Parses and normalizes a reference the way containerd does
    /// (`busybox` → `docker.io/library/busybox:latest`).
    pub(crate) fn parse(image: &str) -> Result<Self> {
        let invalid = |reason| Error::InvalidImage {
            image: image.to_owned(),
            reason,
        };
        if image.is_empty() {
            return Err(invalid("empty reference"));
        }
        let (rest, digest) = match image.split_once('@') {
            Some((rest, digest)) => {
                if !valid_digest(digest) {
                    return Err(invalid("invalid digest"));
                }
                (rest, Some(digest.to_owned()))
            }
            None => (image, None),
        };
        // A tag follows the last ':' after the last '/'.
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(invalid("invalid tag"));
        }
        if name.len() > 255 {
            return Err(invalid(
                "repository name must not be longer than 255 characters",
            ));
        }
        let mut components: Vec<&str> = name.split('/').collect();
        let domain = if components.len() > 1
            && (components[0].contains(['.', ':']) || components[0] == "localhost")
        {
            let domain = components.remove(0);
            if !valid_domain(domain) {
                return Err(invalid("invalid registry host"));
            }
            domain.to_owned()
        } else {
            "docker.io".to_owned()
        };
        if components
            .iter()
            .any(|c| c.chars().any(|ch| ch.is_ascii_uppercase()))
        {
            return Err(invalid("repository name must be lowercase"));
        }
        if !components.iter().all(|c| valid_path_component(c)) {
            return Err(invalid("invalid reference format"));
        }
        if domain == "docker.io" && components.len() == 1 {
            components.insert(0, "library");
        }
        let tag = match (tag, &digest) {
            (Some(tag), _) => Some(tag.to_owned()),
            (None, Some(_)) => None,
            (None, None) => Some("latest".to_owned()),
        };
        Ok(Self {
            domain,
            path: components.join("/"),
            tag,
            digest,
        })
    }

    /// `domain/path`.
    pub(crate) fn repository(&self) -> String {
        format!("{}/{}", self.domain, self.path)
    }

    /// The normalized reference as a string.
    pub(crate) fn full(&self) -> String {
        let mut out = self.repository();
        if let Some(tag) = &self.tag {
            out.push(':');
            out.push_str(tag);
        }
        if let Some(digest) = &self.digest {
            out.push('@');
            out.push_str(digest);
        }
        out
    }
}

fn valid_path_component(c: &str) -> bool {
    // [a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*
    let bytes = c.as_bytes();
    if bytes.is_empty() || !is_alnum(bytes[0]) || !is_alnum(bytes[bytes.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        if is_alnum(bytes[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && !is_alnum(bytes[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let dashes = sep.bytes().all(|b| b == b'-');
        if !(sep == "." || sep == "_" || sep == "__" || dashes) {
            return false;
        }
    }
    true
}

fn is_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

fn valid_domain(domain: &str) -> bool {
    let (host, port) = match domain.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    let port_ok = port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    let host_ok = !host.is_empty()
        && host.split('.').all(|label| {
            !label.is_empty()
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        });
    port_ok && host_ok
}

fn valid_tag(tag: &str) -> bool {
    let bytes = tag.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && (bytes[0].is_ascii_alphanumeric() || bytes[0] == b'_')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

fn valid_digest(digest: &str) -> bool {
    match digest.split_once(':') {
        Some((algorithm, hex)) => {
            !algorithm.is_empty()
                && algorithm
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'+' | b'.'))
                && hex.len() >= 32
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full(image: &str) -> String {
        Reference::parse(image).unwrap().full()
    }

    #[test]
    fn normalizes_like_containerd() {
        assert_eq!(full("busybox"), "docker.io/library/busybox:latest");
        assert_eq!(full("busybox:1.36"), "docker.io/library/busybox:1.36");
        assert_eq!(full("library/busybox"), "docker.io/library/busybox:latest");
        assert_eq!(full("user/app:v1"), "docker.io/user/app:v1");
        assert_eq!(
            full("registry.k8s.io/pause:3.9"),
            "registry.k8s.io/pause:3.9"
        );
        assert_eq!(full("localhost:5000/a/b"), "localhost:5000/a/b:latest");
        let digest = format!("sha256:{}", "a".repeat(64));
        assert_eq!(
            full(&format!("busybox@{digest}")),
            format!("docker.io/library/busybox@{digest}")
        );
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "Busybox",
            "busy box",
            "busybox:",
            "busybox::1",
            "-busybox",
            "a//b",
            "busybox@sha256:xyz",
            "registry.k8s.io:abc/pause",
            "busybox:-tag",
        ] {
            assert!(Reference::parse(bad).is_err(), "{bad:?} should be invalid");
        }
    }
}
