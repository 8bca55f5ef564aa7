//! Image references and the image store.
//!
//! Pulls download nothing: an image "exists" in every registry except under
//! the reserved host `registry.invalid`, and its id, digest and size are
//! derived from its name, so they are stable across runs.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use nodeconform_cri::v1;

use crate::error::{Error, Result};

/// The registry host whose images never exist.
pub const MISSING_REGISTRY: &str = "registry.invalid";

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

/// A 64-hex-digit digest derived from `seed`: stable, not cryptographic.
pub(crate) fn fake_digest(seed: &str) -> String {
    (0..4u64)
        .map(|round| {
            let mut hasher = DefaultHasher::new();
            round.hash(&mut hasher);
            seed.hash(&mut hasher);
            format!("{:016x}", hasher.finish())
        })
        .collect()
}

/// A pulled image.
#[derive(Debug, Clone)]
pub(crate) struct Image {
    pub id: String,
    pub repo_tags: Vec<String>,
    pub repo_digests: Vec<String>,
    pub size: u64,
}

impl Image {
    fn for_reference(reference: &Reference) -> Self {
        let repository = reference.repository();
        let content = fake_digest(&format!("content:{repository}:{:?}", reference.tag));
        let digest = reference
            .digest
            .clone()
            .unwrap_or_else(|| format!("sha256:{content}"));
        let id = format!("sha256:{}", fake_digest(&format!("id:{digest}")));
        // 1–64 MiB, stable per image.
        let size = 1_048_576 + u64::from_str_radix(&content[..8], 16).unwrap_or(0) % (63 << 20);
        Self {
            id,
            repo_tags: reference
                .tag
                .as_ref()
                .map(|tag| vec![format!("{repository}:{tag}")])
                .unwrap_or_default(),
            repo_digests: vec![format!("{repository}@{digest}")],
            size,
        }
    }

    /// The CRI view of the image.
    pub(crate) fn to_cri(&self) -> v1::Image {
        v1::Image {
            id: self.id.clone(),
            repo_tags: self.repo_tags.clone(),
            repo_digests: self.repo_digests.clone(),
            size: self.size,
            uid: Some(v1::Int64Value { value: 0 }),
            username: String::new(),
            spec: Some(v1::ImageSpec {
                image: self.id.clone(),
                ..Default::default()
            }),
            pinned: false,
        }
    }
}

/// The images pulled so far, by id.
#[derive(Debug, Default)]
pub(crate) struct Images {
    by_id: HashMap<String, Image>,
}

impl Images {
    /// The image `reference` names: an id (`sha256:…` or bare hex), a tag or a digest reference.
    pub(crate) fn find(&self, reference: &str) -> Option<&Image> {
        if let Some(image) = self
            .by_id
            .get(reference)
            .or_else(|| self.by_id.get(&format!("sha256:{reference}")))
        {
            return Some(image);
        }
        let parsed = Reference::parse(reference).ok()?;
        let wanted_digest = parsed
            .digest
            .as_ref()
            .map(|d| format!("{}@{d}", parsed.repository()));
        let wanted_tag = parsed
            .tag
            .as_ref()
            .map(|t| format!("{}:{t}", parsed.repository()));
        self.by_id.values().find(|image| match &wanted_digest {
            Some(digest) => image.repo_digests.contains(digest),
            None => wanted_tag
                .as_ref()
                .is_some_and(|tag| image.repo_tags.contains(tag)),
        })
    }

    /// Records a pulled image and returns it. Fails for `registry.invalid`.
    pub(crate) fn pull(&mut self, reference: &Reference) -> Result<Image> {
        if reference.domain == MISSING_REGISTRY
            || reference
                .domain
                .starts_with(&format!("{MISSING_REGISTRY}:"))
        {
            return Err(Error::PullNotFound {
                image: reference.full(),
            });
        }
        let image = Image::for_reference(reference);
        let entry = self
            .by_id
            .entry(image.id.clone())
            .or_insert_with(|| image.clone());
        for tag in image.repo_tags {
            if !entry.repo_tags.contains(&tag) {
                entry.repo_tags.push(tag);
            }
        }
        Ok(entry.clone())
    }

    /// Removes an image; removing an absent image succeeds, as in containerd.
    pub(crate) fn remove(&mut self, reference: &str) {
        if let Some(id) = self.find(reference).map(|image| image.id.clone()) {
            self.by_id.remove(&id);
        }
    }

    /// All images.
    pub(crate) fn list(&self) -> impl Iterator<Item = &Image> {
        self.by_id.values()
    }

    /// Bytes used by all images.
    pub(crate) fn total_size(&self) -> u64 {
        self.by_id.values().map(|i| i.size).sum()
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

    #[test]
    fn pull_and_find() {
        let mut images = Images::default();
        let image = images.pull(&Reference::parse("busybox").unwrap()).unwrap();
        assert!(image.id.starts_with("sha256:") && image.id.len() == 71);
        assert_eq!(images.find("busybox").unwrap().id, image.id);
        assert_eq!(
            images.find("docker.io/library/busybox:latest").unwrap().id,
            image.id
        );
        assert_eq!(images.find(&image.id).unwrap().id, image.id);
        assert_eq!(images.find(&image.repo_digests[0]).unwrap().id, image.id);
        assert!(images.find("busybox:other").is_none());
        let missing = Reference::parse("registry.invalid/nope:1").unwrap();
        assert!(matches!(
            images.pull(&missing),
            Err(Error::PullNotFound { .. })
        ));
        images.remove("busybox");
        assert!(images.find("busybox").is_none());
    }
}
