//! Image pull credentials from a pod's `imagePullSecrets`, matched to an image
//! as the kubelet's `credentialprovider` does (`MakeDockerKeyring`,
//! `BasicDockerKeyring.Add` and `Lookup`, `URLsMatch`): a registry key
//! (`https://gcr.io`, `quay.io/team`, `*.example.com:5000`) matches an image
//! when the port is the same, the host has as many dot-separated parts and
//! each matches as a glob, and the key's path is a prefix of the image's.
//! More specific keys come first; `index.docker.io` also serves Docker Hub
//! images. The node's own credentials (the kubelet's default keyring and
//! credential provider plugins) are not modelled.

use std::collections::BTreeMap;

use base64::Engine as _;
use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

/// The key the kubelet reads from a `kubernetes.io/dockerconfigjson` Secret.
const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The key the kubelet reads from a `kubernetes.io/dockercfg` Secret.
const DOCKER_CFG_KEY: &str = ".dockercfg";
/// Docker Hub's registry host in credentials.
const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// Why a pull secret cannot be read; the pull fails with this message, as the kubelet's does.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The Secret's docker configuration is not JSON of the expected shape.
    #[error("secret {secret}: {source}")]
    Syntax {
        /// The Secret's name.
        secret: String,
        /// What is wrong, with line and column.
        #[source]
        source: serde_json::Error,
    },
    /// An entry's `auth` is not `base64(username:password)`.
    #[error(
        "secret {secret}: unable to parse auth field, must be formatted as base64(username:password)"
    )]
    Auth {
        /// The Secret's name.
        secret: String,
    },
}

/// One set of credentials, as the CRI `AuthConfig` carries them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password.
    pub password: String,
}

/// `credentialprovider.DockerConfigJSON`.
#[derive(Deserialize)]
struct ConfigJson {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

/// `credentialprovider.DockerConfigEntry` as written: `auth` wins over `username`/`password`.
#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    username: String,
    #[serde(default)]
    password: String,
    #[serde(default)]
    auth: String,
}

/// The credentials of a pod's pull secrets, by registry key, most specific key first.
#[derive(Debug, Default, Clone)]
pub struct Keyring {
    entries: Vec<(String, Vec<Credentials>)>,
}

impl Keyring {
    /// `MakeDockerKeyring`: the entries of every `kubernetes.io/dockerconfigjson`
    /// Secret with `.dockerconfigjson` and every `kubernetes.io/dockercfg` Secret
    /// with `.dockercfg`; other Secrets are ignored, as the kubelet ignores them.
    pub fn from_secrets(secrets: &[Secret]) -> Result<Self, Error> {
        let mut by_key: BTreeMap<String, Vec<Credentials>> = BTreeMap::new();
        for secret in secrets {
            let name = secret.metadata.name.clone().unwrap_or_default();
            let data = |key: &str| {
                secret
                    .data
                    .as_ref()
                    .and_then(|d| d.get(key))
                    .filter(|v| !v.0.is_empty())
            };
            let entries = match (
                secret.type_.as_deref(),
                data(DOCKER_CONFIG_JSON_KEY),
                data(DOCKER_CFG_KEY),
            ) {
                (Some("kubernetes.io/dockerconfigjson"), Some(bytes), _) => {
                    serde_json::from_slice::<ConfigJson>(&bytes.0)
                        .map_err(|source| Error::Syntax {
                            secret: name.clone(),
                            source,
                        })?
                        .auths
                }
                (Some("kubernetes.io/dockercfg"), _, Some(bytes)) => serde_json::from_slice::<
                    BTreeMap<String, Entry>,
                >(&bytes.0)
                .map_err(|source| Error::Syntax {
                    secret: name.clone(),
                    source,
                })?,
                _ => continue,
            };
            for (location, entry) in entries {
                let credentials = entry.credentials(&name)?;
                by_key.entry(key(&location)).or_default().push(credentials);
            }
        }
        // Reverse-sorted, so `quay.io/team` is tried before `quay.io`.
        let mut entries: Vec<_> = by_key.into_iter().collect();
        entries.reverse();
        Ok(Self { entries })
    }

    /// `Lookup`: the credentials for `repository` (`gcr.io/project/image`, no tag),
    /// in the order they are tried; empty: pull without credentials.
    pub fn lookup(&self, repository: &str) -> Vec<Credentials> {
        let found: Vec<Credentials> = self
            .entries
            .iter()
            .filter(|(key, _)| urls_match(key, repository))
            .flat_map(|(_, credentials)| credentials.iter().cloned())
            .collect();
        if !found.is_empty() || !is_default_registry(repository) {
            return found;
        }
        self.entries
            .iter()
            .find(|(key, _)| key == DEFAULT_REGISTRY_HOST)
            .map(|(_, credentials)| credentials.clone())
            .unwrap_or_default()
    }
}

impl Entry {
    fn credentials(self, secret: &str) -> Result<Credentials, Error> {
        if self.auth.is_empty() {
            return Ok(Credentials {
                username: self.username,
                password: self.password,
            });
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(self.auth.as_bytes())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok());
        let Some((username, password)) = decoded.as_deref().and_then(|d| d.split_once(':')) else {
            return Err(Error::Auth {
                secret: secret.to_owned(),
            });
        };
        Ok(Credentials {
            username: username.to_owned(),
            password: password.trim_matches('\0').to_owned(),
        })
    }
}

/// The keyring's key for a registry location: scheme dropped, `/v1/` or `/v2/`
/// dropped from the path, the host alone when no path is left.
fn key(location: &str) -> String {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = split_host(rest);
    let path = path
        .strip_prefix("/v2/")
        .or_else(|| path.strip_prefix("/v1/"))
        .map_or(path.to_owned(), |p| format!("/{p}"));
    if path.is_empty() || path == "/" {
        host.to_owned()
    } else {
        format!("{host}{path}")
    }
}

/// `host[:port]` and `/path` of a schemeless URL.
fn split_host(url: &str) -> (&str, &str) {
    match url.find('/') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    }
}

/// `URLsMatch`: the same port, as many host parts, each a glob match, and
/// the key's path a prefix of the image's.
fn urls_match(key: &str, image: &str) -> bool {
    let (key_host, key_path) = split_host(key);
    let (image_host, image_path) = split_host(image);
    let (key_parts, key_port) = split_port(key_host);
    let (image_parts, image_port) = split_port(image_host);
    key_port == image_port
        && key_parts.len() == image_parts.len()
        && image_path.starts_with(key_path)
        && key_parts
            .iter()
            .zip(&image_parts)
            .all(|(glob, part)| glob_match(glob.as_bytes(), part.as_bytes()))
}

/// `SplitURL`: a host's dot-separated parts and its port (empty if none).
fn split_port(host: &str) -> (Vec<&str>, &str) {
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) => {
            (name.split('.').collect(), port)
        }
        _ => (host.split('.').collect(), ""),
    }
}

/// `filepath.Match` for `*` and `?`; other characters match themselves.
fn glob_match(glob: &[u8], text: &[u8]) -> bool {
    match glob.split_first() {
        None => text.is_empty(),
        Some((b'*', rest)) => (0..=text.len()).any(|skip| glob_match(rest, &text[skip..])),
        Some((b'?', rest)) => !text.is_empty() && glob_match(rest, &text[1..]),
        Some((c, rest)) => text.first() == Some(c) && glob_match(rest, &text[1..]),
    }
}

/// `isDefaultRegistryMatch`: a Docker Hub image (`docker.io/…`, or a first
/// part that is no host).
fn is_default_registry(repository: &str) -> bool {
    match repository.split_once('/') {
        _ if repository.is_empty() => false,
        None => true,
        Some((first, _)) => {
            first == "docker.io" || first == DEFAULT_REGISTRY_HOST || !first.contains(['.', ':'])
        }
    }
}

/// The repository an image reference pulls from, fully qualified as the
/// kubelet's `ParseImageName` gives it: tag and digest dropped, Docker Hub's
/// `docker.io` (and `library/`) added to short names.
pub fn repository(image: &str) -> String {
    let name = image.split_once('@').map_or(image, |(name, _)| name);
    let name = match name.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => name,
    };
    match name.split_once('/') {
        Some((first, _)) if first.contains(['.', ':']) || first == "localhost" => name.to_owned(),
        Some(_) => format!("docker.io/{name}"),
        None => format!("docker.io/library/{name}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn secret(name: &str, type_: &str, key: &str, json: &str) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            type_: Some(type_.into()),
            data: Some([(key.to_owned(), ByteString(json.as_bytes().to_vec()))].into()),
            ..Default::default()
        }
    }

    fn creds(username: &str, password: &str) -> Credentials {
        Credentials {
            username: username.into(),
            password: password.into(),
        }
    }

    #[test]
    fn repositories_are_fully_qualified() {
        assert_eq!(repository("busybox:1.36"), "docker.io/library/busybox");
        assert_eq!(repository("team/app"), "docker.io/team/app");
        assert_eq!(
            repository("gcr.io/authenticated-image-pulling/alpine:3.7"),
            "gcr.io/authenticated-image-pulling/alpine"
        );
        assert_eq!(repository("localhost:5000/a@sha256:00"), "localhost:5000/a");
    }

    #[test]
    fn keys_match_as_the_kubelet_matches_them() {
        // base64("user:pass")
        let json = r#"{"auths": {
            "https://gcr.io": {"auth": "dXNlcjpwYXNz"},
            "quay.io/team": {"username": "t", "password": "p1"},
            "*.example.com:5000": {"username": "w", "password": "p2"},
            "https://index.docker.io/v1/": {"username": "hub", "password": "p3"}
        }}"#;
        let keyring = Keyring::from_secrets(&[
            secret(
                "s",
                "kubernetes.io/dockerconfigjson",
                ".dockerconfigjson",
                json,
            ),
            secret("ignored", "Opaque", ".dockerconfigjson", json),
        ])
        .unwrap();
        assert_eq!(
            keyring.lookup("gcr.io/authenticated-image-pulling/alpine"),
            vec![creds("user", "pass")]
        );
        assert_eq!(keyring.lookup("quay.io/team/app"), vec![creds("t", "p1")]);
        assert!(keyring.lookup("quay.io/other/app").is_empty());
        assert_eq!(
            keyring.lookup("registry.example.com:5000/app"),
            vec![creds("w", "p2")]
        );
        assert!(keyring.lookup("registry.example.com/app").is_empty());
        assert_eq!(
            keyring.lookup("docker.io/library/busybox"),
            vec![creds("hub", "p3")]
        );
        assert!(keyring.lookup("k8s.gcr.io.evil.com/x").is_empty());
    }

    #[test]
    fn bad_secrets_are_errors_naming_the_secret() {
        let broken = secret("b", "kubernetes.io/dockercfg", ".dockercfg", "{");
        assert!(
            Keyring::from_secrets(&[broken])
                .unwrap_err()
                .to_string()
                .starts_with("secret b:")
        );
        let no_colon = secret(
            "c",
            "kubernetes.io/dockercfg",
            ".dockercfg",
            r#"{"gcr.io": {"auth": "dXNlcg=="}}"#,
        );
        assert!(matches!(
            Keyring::from_secrets(&[no_colon]),
            Err(Error::Auth { .. })
        ));
    }
}
