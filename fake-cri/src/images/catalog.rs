//! The image catalogue: what fake-cri knows of particular images beyond
//! their names.
//!
//! fake-cri downloads nothing, so an image has no configuration of its own:
//! its id and digest are derived from its name and it has no `USER`. Some
//! clients check exactly those facts of well-known test images (critest asks
//! for the `USER` of cri-tools' `test-image-user-*` images and expects the
//! three tags of `test-image-tags` to name one image). A catalogue, loaded
//! from a JSON file, states them:
//!
//! ```json
//! {"images": [
//!   {"repository": "gcr.io/k8s-staging-cri-tools/test-image-user-uid", "user": "1002"},
//!   {"repository": "gcr.io/k8s-staging-cri-tools/test-image-tags", "tags": ["1", "2", "3"]}
//! ]}
//! ```
//!
//! An entry describes the images of one repository: with `tags`, those tags
//! name one image (one id, one digest); without, every tag names an image of
//! its own with the entry's configuration. With `credentials`, the repository
//! is private: a pull must log in with them (`PullImage`'s `auth`), as a
//! registry would demand. References the catalogue does not describe are
//! pulled as before.
//!
//! [`Catalog::cases`] is the catalogue of the images nodeconform's cases use
//! (`catalogs/cases.json`), which the harness gives every fake-cri it starts.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::reference::Reference;

/// Why a catalogue could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("reading image catalogue {path}")]
    Read {
        /// The catalogue file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a catalogue (JSON syntax, unknown or mistyped fields).
    #[error("image catalogue {path}: {source}")]
    Syntax {
        /// The catalogue file (`<inline>` for a string).
        path: PathBuf,
        /// Where and what, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// An entry names a repository, tag or digest that is not a valid reference.
    #[error("image catalogue {path}: entry {index} ({repository:?}): {reason}")]
    Entry {
        /// The catalogue file.
        path: PathBuf,
        /// The entry's position, from 0.
        index: usize,
        /// Its `repository` as written.
        repository: String,
        /// What is wrong.
        reason: String,
    },
}

/// The configuration of an image, as the runtime reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Config {
    /// The image config's `User` (`1002`, `www-data`, `1003:1004`), if any.
    pub user: Option<String>,
    /// The image's size in bytes, if stated.
    pub size: Option<u64>,
}

/// A registry login: what a private repository's pulls must present.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

/// One catalogue entry, normalized.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// `domain/path`, normalized as containerd does.
    repository: String,
    /// The tags that name this one image; empty: every tag, each its own image.
    tags: Vec<String>,
    /// The digest of the image its `tags` name.
    digest: Option<String>,
    config: Config,
    /// The login the registry demands for this repository; `None`: public.
    credentials: Option<Credentials>,
}

/// What the catalogue says of one reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Known {
    /// A seed for the image's id and digest: the same for every reference
    /// that names the same image.
    pub identity: String,
    /// The image's digest, when the catalogue states it.
    pub digest: Option<String>,
    /// Its configuration.
    pub config: Config,
}

/// The images fake-cri knows more of than their names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Catalog {
    entries: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    images: Vec<RawEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    repository: String,
    #[serde(default)]
    tags: Vec<String>,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    user: Option<String>,
    #[serde(default)]
    size: Option<u64>,
    #[serde(default)]
    credentials: Option<Credentials>,
}

/// The catalogue of the images nodeconform's cases use.
const CASES: &str = include_str!("../../catalogs/cases.json");

impl Catalog {
    /// Loads a catalogue from a JSON file.
    pub fn from_path(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text, path)
    }

    /// Parses a catalogue from JSON text.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        Self::parse(text, Path::new("<inline>"))
    }

    fn parse(text: &str, path: &Path) -> Result<Self, Error> {
        let file: File = serde_json::from_str(text).map_err(|source| Error::Syntax {
            path: path.to_owned(),
            source,
        })?;
        let entries = file
            .images
            .into_iter()
            .enumerate()
            .map(|(index, raw)| {
                Entry::normalize(raw).map_err(|(repository, reason)| Error::Entry {
                    path: path.to_owned(),
                    index,
                    repository,
                    reason,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { entries })
    }

    /// The images nodeconform's cases use, as their registries serve them
    /// (`catalogs/cases.json`): the users their images run as and the
    /// private repository of the pull-secret cases.
    pub fn cases() -> Self {
        // The file is part of the crate and its test parses it: it cannot fail here.
        Self::parse(CASES, Path::new("catalogs/cases.json")).unwrap_or_default()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the catalogue has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// What the catalogue says of `reference`, if anything. The first entry
    /// that describes it wins.
    pub(crate) fn lookup(&self, reference: &Reference) -> Option<Known> {
        let repository = reference.repository();
        self.entries
            .iter()
            .filter(|entry| entry.repository == repository)
            .find_map(|entry| entry.describe(reference))
    }

    /// The login `reference`'s repository demands, if it is private.
    pub(crate) fn credentials(&self, reference: &Reference) -> Option<&Credentials> {
        let repository = reference.repository();
        self.entries
            .iter()
            .filter(|entry| entry.repository == repository)
            .find_map(|entry| entry.credentials.as_ref())
    }
}

impl Entry {
    /// Validates and normalizes an entry; on error, its repository and what is wrong.
    fn normalize(raw: RawEntry) -> Result<Self, (String, String)> {
        let fail = |reason: String| (raw.repository.clone(), reason);
        let parsed = Reference::parse(&raw.repository).map_err(|error| {
            fail(match error {
                crate::error::Error::InvalidImage { reason, .. } => reason.to_owned(),
                other => other.to_string(),
            })
        })?;
        if parsed.digest.is_some()
            || raw
                .repository
                .rsplit('/')
                .next()
                .is_some_and(|last| last.contains(':'))
        {
            return Err(fail(
                "`repository` names a repository without tag or digest; use `tags` and `digest`"
                    .to_owned(),
            ));
        }
        let repository = parsed.repository();
        for tag in &raw.tags {
            Reference::parse(&format!("{repository}:{tag}"))
                .map_err(|_| fail(format!("invalid tag {tag:?}")))?;
        }
        if let Some(digest) = &raw.digest {
            if raw.tags.is_empty() {
                return Err(fail(
                    "a `digest` names one image: list the `tags` that name it".to_owned(),
                ));
            }
            Reference::parse(&format!("{repository}@{digest}"))
                .map_err(|_| fail(format!("invalid digest {digest:?}")))?;
        }
        Ok(Self {
            repository,
            tags: raw.tags,
            digest: raw.digest,
            config: Config {
                user: raw.user.filter(|user| !user.is_empty()),
                size: raw.size,
            },
            credentials: raw.credentials,
        })
    }

    fn describe(&self, reference: &Reference) -> Option<Known> {
        let known = |identity: String| Known {
            identity,
            digest: self.digest.clone(),
            config: self.config.clone(),
        };
        if self.tags.is_empty() {
            // Every tag its own image; a digest reference is its own image too.
            let name = reference.tag.as_deref().or(reference.digest.as_deref())?;
            return Some(Known {
                digest: None,
                ..known(format!("catalog:{}:{name}", self.repository))
            });
        }
        let named = match (&reference.digest, &reference.tag) {
            (Some(digest), _) => self.digest.as_ref() == Some(digest),
            (None, Some(tag)) => self.tags.contains(tag),
            (None, None) => false,
        };
        named.then(|| {
            known(format!(
                "catalog:{}:{}",
                self.repository,
                self.tags.join(",")
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(image: &str) -> Reference {
        Reference::parse(image).unwrap()
    }

    #[test]
    fn tags_of_one_entry_name_one_image() {
        let catalog = Catalog::from_json(
            r#"{"images": [{"repository": "example.com/app", "tags": ["1", "2"], "user": "www-data:1004"}]}"#,
        )
        .unwrap();
        let one = catalog.lookup(&reference("example.com/app:1")).unwrap();
        let two = catalog.lookup(&reference("example.com/app:2")).unwrap();
        assert_eq!(one, two);
        assert_eq!(one.config.user.as_deref(), Some("www-data:1004"));
        assert_eq!(catalog.lookup(&reference("example.com/app:3")), None);
        assert_eq!(catalog.lookup(&reference("example.com/other:1")), None);
    }

    #[test]
    fn an_entry_without_tags_describes_every_tag() {
        let catalog =
            Catalog::from_json(r#"{"images": [{"repository": "busybox", "user": "1002"}]}"#)
                .unwrap();
        let latest = catalog
            .lookup(&reference("docker.io/library/busybox"))
            .unwrap();
        let pinned = catalog.lookup(&reference("busybox:1.36")).unwrap();
        assert_ne!(latest.identity, pinned.identity);
        assert_eq!(pinned.config.user.as_deref(), Some("1002"));
    }

    #[test]
    fn a_digest_names_the_entry_s_image() {
        let digest = format!("sha256:{}", "b".repeat(64));
        let catalog = Catalog::from_json(&format!(
            r#"{{"images": [{{"repository": "example.com/app", "tags": ["1"], "digest": "{digest}"}}]}}"#
        ))
        .unwrap();
        let by_digest = catalog
            .lookup(&reference(&format!("example.com/app@{digest}")))
            .unwrap();
        assert_eq!(
            by_digest,
            catalog.lookup(&reference("example.com/app:1")).unwrap()
        );
        assert_eq!(by_digest.digest.as_deref(), Some(digest.as_str()));
    }

    #[test]
    fn the_cases_catalogue_parses() {
        let catalog = Catalog::cases();
        assert!(!catalog.is_empty());
        let pause = catalog
            .lookup(&reference("registry.k8s.io/pause:3.9"))
            .unwrap();
        assert_eq!(pause.config.user.as_deref(), Some("65535:65535"));
        assert!(
            catalog
                .credentials(&reference("gcr.io/authenticated-image-pulling/alpine:3.7"))
                .is_some()
        );
        assert!(catalog.credentials(&reference("busybox:1.36")).is_none());
    }

    #[test]
    fn bad_catalogues_say_where_and_what() {
        let error = |text: &str| Catalog::from_json(text).unwrap_err().to_string();
        assert!(
            error("{\"images\": [{\"repo\": \"x\"}]}").contains("unknown field `repo`"),
            "{}",
            error("{\"images\": [{\"repo\": \"x\"}]}")
        );
        assert!(error("{\"images\": [").contains("line 1 column"));
        assert_eq!(
            error(r#"{"images": [{"repository": "Example/App"}]}"#),
            "image catalogue <inline>: entry 0 (\"Example/App\"): repository name must be lowercase"
        );
        assert!(error(r#"{"images": [{"repository": "app:1"}]}"#).contains("without tag"));
        assert!(
            error(r#"{"images": [{"repository": "app", "tags": ["-x"]}]}"#)
                .contains("invalid tag \"-x\"")
        );
        assert!(
            error(r#"{"images": [{"repository": "app", "digest": "sha256:00"}]}"#)
                .contains("list the `tags`")
        );
    }
}
