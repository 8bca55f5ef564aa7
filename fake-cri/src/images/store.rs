//! The image store: the images pulled so far.
//!
//! Pulls download nothing: an image "exists" in every registry except under
//! the reserved host `registry.invalid`; a repository the catalogue makes
//! private needs its credentials. Its id, digest and size are derived
//! from its name (stable across runs) unless the [`Catalog`] states them.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use nodeconform_cri::v1;

use super::catalog::{Catalog, Config, Credentials};
use super::reference::Reference;
use crate::error::{Error, Result};

/// The registry host whose images never exist.
pub const MISSING_REGISTRY: &str = "registry.invalid";

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
    /// The image config's `User`, if it has one.
    pub user: Option<String>,
}

impl Image {
    fn for_reference(reference: &Reference, catalog: &Catalog) -> Self {
        let repository = reference.repository();
        let known = catalog.lookup(reference);
        let identity = known.as_ref().map_or_else(
            || format!("content:{repository}:{:?}", reference.tag),
            |known| known.identity.clone(),
        );
        let content = fake_digest(&identity);
        let digest = known
            .as_ref()
            .and_then(|known| known.digest.clone())
            .or_else(|| reference.digest.clone())
            .unwrap_or_else(|| format!("sha256:{content}"));
        let id = format!("sha256:{}", fake_digest(&format!("id:{digest}")));
        let Config { user, size } = known.map(|known| known.config).unwrap_or_default();
        // 1–64 MiB, stable per image, unless the catalogue says.
        let size = size.unwrap_or_else(|| {
            1_048_576 + u64::from_str_radix(&content[..8], 16).unwrap_or(0) % (63 << 20)
        });
        Self {
            id,
            repo_tags: reference
                .tag
                .as_ref()
                .map(|tag| vec![format!("{repository}:{tag}")])
                .unwrap_or_default(),
            repo_digests: vec![format!("{repository}@{digest}")],
            size,
            user,
        }
    }

    /// The image's user as the CRI reports it: a numeric user as `uid`, a
    /// name as `username`, the group dropped; neither when the image has no
    /// `User` (containerd's `getUserFromImage`).
    pub(crate) fn cri_user(&self) -> (Option<i64>, String) {
        let Some(user) = self.user.as_deref() else {
            return (None, String::new());
        };
        let user = user.split(':').next().unwrap_or_default();
        match user.parse::<i64>() {
            Ok(uid) => (Some(uid), String::new()),
            Err(_) => (None, user.to_owned()),
        }
    }

    /// The CRI view of the image.
    pub(crate) fn to_cri(&self) -> v1::Image {
        let (uid, username) = self.cri_user();
        v1::Image {
            id: self.id.clone(),
            repo_tags: self.repo_tags.clone(),
            repo_digests: self.repo_digests.clone(),
            size: self.size,
            uid: uid.map(|value| v1::Int64Value { value }),
            username,
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
    catalog: Catalog,
}

impl Images {
    /// An empty store whose pulls consult `catalog`.
    pub(crate) fn new(catalog: Catalog) -> Self {
        Self {
            by_id: HashMap::new(),
            catalog,
        }
    }

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

    /// Records a pulled image and returns it, the registry having seen the
    /// pull's `login`. Fails for `registry.invalid`, and for a private
    /// repository of the catalogue without its credentials.
    pub(crate) fn pull(
        &mut self,
        reference: &Reference,
        login: Option<&Credentials>,
    ) -> Result<Image> {
        if reference.domain == MISSING_REGISTRY
            || reference
                .domain
                .starts_with(&format!("{MISSING_REGISTRY}:"))
        {
            return Err(Error::PullNotFound {
                image: reference.full(),
            });
        }
        if let Some(wanted) = self.catalog.credentials(reference)
            && login != Some(wanted)
        {
            return Err(Error::PullUnauthorized {
                image: reference.full(),
                host: reference.domain.clone(),
                object: reference
                    .tag
                    .clone()
                    .or_else(|| reference.digest.clone())
                    .unwrap_or_default(),
            });
        }
        let image = Image::for_reference(reference, &self.catalog);
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

    fn parse(image: &str) -> Reference {
        Reference::parse(image).unwrap()
    }

    #[test]
    fn pull_and_find() {
        let mut images = Images::default();
        let image = images.pull(&parse("busybox"), None).unwrap();
        assert!(image.id.starts_with("sha256:") && image.id.len() == 71);
        assert_eq!(images.find("busybox").unwrap().id, image.id);
        assert_eq!(
            images.find("docker.io/library/busybox:latest").unwrap().id,
            image.id
        );
        assert_eq!(images.find(&image.id).unwrap().id, image.id);
        assert_eq!(images.find(&image.repo_digests[0]).unwrap().id, image.id);
        assert!(images.find("busybox:other").is_none());
        let missing = parse("registry.invalid/nope:1");
        assert!(matches!(
            images.pull(&missing, None),
            Err(Error::PullNotFound { .. })
        ));
        images.remove("busybox");
        assert!(images.find("busybox").is_none());
    }

    #[test]
    fn users_are_reported_as_containerd_reports_them() {
        let catalog = Catalog::from_json(
            r#"{"images": [
                {"repository": "example.com/uid", "user": "1003:1004"},
                {"repository": "example.com/name", "user": "www-data:1004"}
            ]}"#,
        )
        .unwrap();
        let mut images = Images::new(catalog);
        let user =
            |images: &mut Images, image: &str| images.pull(&parse(image), None).unwrap().cri_user();
        assert_eq!(
            user(&mut images, "example.com/uid"),
            (Some(1003), String::new())
        );
        assert_eq!(
            user(&mut images, "example.com/name"),
            (None, "www-data".to_owned())
        );
        assert_eq!(user(&mut images, "busybox"), (None, String::new()));
    }

    #[test]
    fn private_repositories_need_their_login() {
        let catalog = Catalog::from_json(
            r#"{"images": [{"repository": "example.com/private",
                "credentials": {"username": "u", "password": "p"}}]}"#,
        )
        .unwrap();
        let mut images = Images::new(catalog);
        let private = parse("example.com/private:1");
        let login = |username: &str, password: &str| Credentials {
            username: username.into(),
            password: password.into(),
        };
        assert_eq!(
            images.pull(&private, None).unwrap_err().to_string(),
            "failed to pull and unpack image \"example.com/private:1\": failed to resolve reference \"example.com/private:1\": pulling from host example.com failed with status code [manifests 1]: 401 Unauthorized"
        );
        assert!(images.pull(&private, Some(&login("u", "x"))).is_err());
        assert!(images.pull(&private, Some(&login("u", "p"))).is_ok());
        assert!(images.pull(&parse("example.com/public:1"), None).is_ok());
    }

    #[test]
    fn catalogued_tags_of_one_image_share_it() {
        let catalog = Catalog::from_json(
            r#"{"images": [{"repository": "example.com/tags", "tags": ["1", "2", "3"]}]}"#,
        )
        .unwrap();
        let mut images = Images::new(catalog);
        let ids: Vec<String> = ["1", "2", "3"]
            .iter()
            .map(|tag| {
                images
                    .pull(&parse(&format!("example.com/tags:{tag}")), None)
                    .unwrap()
                    .id
            })
            .collect();
        assert!(ids.iter().all(|id| *id == ids[0]));
        let mut tags = images.find("example.com/tags:2").unwrap().repo_tags.clone();
        tags.sort();
        assert_eq!(
            tags,
            [
                "example.com/tags:1",
                "example.com/tags:2",
                "example.com/tags:3"
            ]
        );
        assert_eq!(images.list().count(), 1);
    }
}
