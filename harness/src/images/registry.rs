//! A registry on the host's loopback that serves the image archives: the pull half of the
//! OCI distribution API (`GET`/`HEAD` of `/v2/`, manifests by tag or digest, blobs), so
//! that a pull — `imagePullPolicy: Always`, a changed image — goes to a registry as it does
//! on a real node, and nothing leaves the machine.
//!
//! Each node's containerd reaches it through its namespace's loopback
//! ([`crate::backend::netns::NetNs::forward_in`]) as a mirror of every registry the
//! archives name (`hosts.toml` under containerd's `config_path`); containerd says which
//! registry a request mirrors with the `ns` query parameter. A reference not among the
//! archives is `MANIFEST_UNKNOWN` (404), as a real registry answers for a tag it lacks;
//! containerd then falls back to the registry itself, which the namespace has no route to.
//!
//! A repository whose image config carries a login ([`super::private`]) is served only to a
//! request with that login (`Authorization: Basic …`); any other gets `401 UNAUTHORIZED` with
//! a `Basic` challenge, on which containerd retries with the credentials of the pull.
//!
//! The archives' OCI layouts are served (`index.json` with `io.containerd.image.name`, as
//! [`super::oci`] writes them); an archive with only docker's `manifest.json` is imported
//! into containerd but not served.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// One reference as a registry splits it: `docker.io`, `library/busybox`, `1.36`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Tag {
    host: String,
    repository: String,
    tag: String,
}

impl Tag {
    /// A full reference (`docker.io/library/busybox:1.36`, as containerd names images).
    fn parse(reference: &str) -> Option<Self> {
        let (host, rest) = reference.split_once('/')?;
        let (repository, tag) = rest.rsplit_once(':')?;
        (!repository.is_empty() && !tag.contains('/')).then(|| Self {
            host: host.to_owned(),
            repository: repository.to_owned(),
            tag: tag.to_owned(),
        })
    }
}

/// What the registry serves, read from a directory of archives.
#[derive(Debug, Default)]
pub struct Content {
    /// Every blob of the archives by digest (`sha256:…`): layers, configs, manifests.
    blobs: HashMap<String, Bytes>,
    /// The manifests' media types, by digest.
    manifests: HashMap<String, String>,
    /// The tags, to manifest digests.
    tags: HashMap<Tag, String>,
    /// The `Authorization` a private repository (host, repository) demands.
    logins: HashMap<(String, String), String>,
}

impl Content {
    /// Reads every `*.tar` of `dir` into memory (the test images are a few megabytes;
    /// agnhost about sixty).
    pub fn read(dir: &Path) -> std::io::Result<Self> {
        let mut content = Self::default();
        for entry in std::fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|x| x == "tar") {
                content.add_archive(&path)?;
            }
        }
        Ok(content)
    }

    fn add_archive(&mut self, path: &Path) -> std::io::Result<()> {
        let mut index = None;
        super::for_each_file(
            path,
            |name, _| name == "index.json" || name.starts_with("blobs/sha256/"),
            |name, data| match name.strip_prefix("blobs/sha256/") {
                Some(hex) => {
                    self.blobs.insert(format!("sha256:{hex}"), data.into());
                }
                None => index = serde_json::from_slice::<serde_json::Value>(&data).ok(),
            },
        )?;
        let descriptors = index
            .as_ref()
            .and_then(|i| i["manifests"].as_array())
            .into_iter()
            .flatten();
        for descriptor in descriptors {
            let (Some(digest), Some(media_type)) = (
                descriptor["digest"].as_str(),
                descriptor["mediaType"].as_str(),
            ) else {
                continue;
            };
            self.manifests
                .insert(digest.to_owned(), media_type.to_owned());
            if let Some(tag) = descriptor["annotations"]["io.containerd.image.name"]
                .as_str()
                .and_then(Tag::parse)
            {
                if let Some(login) = self.login_of(digest) {
                    self.logins.insert(
                        (tag.host.clone(), tag.repository.clone()),
                        super::private::basic_authorization(&login),
                    );
                }
                self.tags.insert(tag, digest.to_owned());
            }
        }
        Ok(())
    }

    /// The login the config of the manifest `digest` demands, if any.
    fn login_of(&self, digest: &str) -> Option<String> {
        let json = |digest: &str| {
            serde_json::from_slice::<serde_json::Value>(self.blobs.get(digest)?).ok()
        };
        let manifest = json(digest)?;
        let config = json(manifest["config"]["digest"].as_str()?)?;
        super::private::login(&config).map(str::to_owned)
    }

    /// Whether a request for `repository` (at `host`, any when not said) may be answered:
    /// the repository is public, or `authorization` is the login it demands.
    fn authorized(
        &self,
        host: Option<&str>,
        repository: &str,
        authorization: Option<&str>,
    ) -> bool {
        self.logins
            .iter()
            .filter(|((h, r), _)| r == repository && host.is_none_or(|host| host == h))
            .all(|(_, login)| authorization == Some(login.as_str()))
    }

    /// The registries the archives' references name (`docker.io`, `registry.k8s.io`).
    pub fn hosts(&self) -> std::collections::BTreeSet<String> {
        self.tags.keys().map(|t| t.host.clone()).collect()
    }

    /// The manifest `reference` (a tag or a digest) of `repository` at `host` (any host
    /// when the request does not say): its digest, media type and bytes.
    fn manifest(
        &self,
        host: Option<&str>,
        repository: &str,
        reference: &str,
    ) -> Option<(&str, &str, &Bytes)> {
        let digest = if reference.starts_with("sha256:") {
            self.manifests.get_key_value(reference).map(|(d, _)| d)?
        } else {
            self.tags
                .iter()
                .find(|(t, _)| {
                    t.repository == repository
                        && t.tag == reference
                        && host.is_none_or(|h| t.host == h)
                })
                .map(|(_, d)| d)?
        };
        let media_type = self.manifests.get(digest)?;
        Some((digest, media_type, self.blobs.get(digest)?))
    }

    /// Whether `repository` (at `host`) has any tag: else a request is `NAME_UNKNOWN`.
    fn knows(&self, host: Option<&str>, repository: &str) -> bool {
        self.tags
            .keys()
            .any(|t| t.repository == repository && host.is_none_or(|h| t.host == h))
    }
}

/// A running registry; dropping it stops it.
#[derive(Debug)]
pub struct Registry {
    addr: SocketAddr,
    hosts: std::collections::BTreeSet<String>,
    task: tokio::task::AbortHandle,
}

impl Registry {
    /// Serves `content` on a free port of `127.0.0.1`.
    pub async fn start(content: Arc<Content>) -> std::io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let hosts = content.hosts();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let content = Arc::clone(&content);
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let content = Arc::clone(&content);
                        async move { Ok::<_, Infallible>(respond(&content, &req)) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Self {
            addr,
            hosts,
            task: task.abort_handle(),
        })
    }

    /// Its port on the loopback.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// The registries it mirrors.
    pub fn hosts(&self) -> &std::collections::BTreeSet<String> {
        &self.hosts
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The distribution API's error body (`{"errors":[{"code":…}]}`) with its status.
fn error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({"errors": [{"code": code, "message": message}]});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// `data` as a `GET` or `HEAD` of it: the length, type and digest, and the body on a `GET`.
fn found(method: &Method, data: &Bytes, media_type: &str, digest: &str) -> Response<Full<Bytes>> {
    let body = if method == Method::HEAD {
        Bytes::new()
    } else {
        data.clone()
    };
    let mut builder = Response::builder()
        .header(hyper::header::CONTENT_TYPE, media_type)
        .header(hyper::header::CONTENT_LENGTH, data.len());
    if !digest.is_empty() {
        builder = builder.header("Docker-Content-Digest", digest);
    }
    builder
        .body(Full::new(body))
        .unwrap_or_else(|_| error(StatusCode::INTERNAL_SERVER_ERROR, "UNKNOWN", "response"))
}

fn respond<B>(content: &Content, req: &Request<B>) -> Response<Full<Bytes>> {
    let mut response = route(content, req);
    response.headers_mut().insert(
        "Docker-Distribution-API-Version",
        hyper::header::HeaderValue::from_static("registry/2.0"),
    );
    response
}

fn route<B>(content: &Content, req: &Request<B>) -> Response<Full<Bytes>> {
    let method = req.method();
    if method != Method::GET && method != Method::HEAD {
        return error(
            StatusCode::METHOD_NOT_ALLOWED,
            "UNSUPPORTED",
            "the operation is unsupported: this registry serves pulls only",
        );
    }
    let host = req
        .uri()
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("ns=")));
    let Some(path) = req.uri().path().strip_prefix("/v2/") else {
        return error(StatusCode::NOT_FOUND, "NAME_UNKNOWN", "not a /v2/ path");
    };
    if path.is_empty() {
        return found(method, &Bytes::from_static(b"{}"), "application/json", "");
    }
    let repository = path
        .rsplit_once("/manifests/")
        .or_else(|| path.rsplit_once("/blobs/"))
        .map(|(repository, _)| repository);
    let authorization = req
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if let Some(repository) = repository
        && !content.authorized(host, repository, authorization)
    {
        let mut response = error(
            StatusCode::UNAUTHORIZED,
            "UNAUTHORIZED",
            "authentication required",
        );
        response.headers_mut().insert(
            hyper::header::WWW_AUTHENTICATE,
            hyper::header::HeaderValue::from_static("Basic realm=\"nodeconform\""),
        );
        return response;
    }
    if let Some((repository, reference)) = path.rsplit_once("/manifests/") {
        return match content.manifest(host, repository, reference) {
            Some((digest, media_type, data)) => found(method, data, media_type, digest),
            None if !content.knows(host, repository) && !reference.starts_with("sha256:") => error(
                StatusCode::NOT_FOUND,
                "NAME_UNKNOWN",
                "repository name not known to registry",
            ),
            None => error(
                StatusCode::NOT_FOUND,
                "MANIFEST_UNKNOWN",
                "manifest unknown",
            ),
        };
    }
    if let Some((_, digest)) = path.rsplit_once("/blobs/") {
        return match content.blobs.get(digest) {
            Some(data) => {
                let media_type = content
                    .manifests
                    .get(digest)
                    .map_or("application/octet-stream", String::as_str);
                found(method, data, media_type, digest)
            }
            None => error(
                StatusCode::NOT_FOUND,
                "BLOB_UNKNOWN",
                "blob unknown to registry",
            ),
        };
    }
    error(StatusCode::NOT_FOUND, "NAME_UNKNOWN", "not a registry path")
}

/// containerd's `hosts.toml` for `host`: pulls and resolution go to the registry on the
/// namespace's loopback first.
pub fn hosts_toml(port: u16) -> String {
    format!(
        "# Written by nodeconform: the harness's registry of the node's image archives.\n\
         [host.\"http://127.0.0.1:{port}\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_split_into_host_repository_and_tag() {
        let tag = Tag::parse("registry.k8s.io/e2e-test-images/agnhost:2.53").unwrap();
        assert_eq!(tag.host, "registry.k8s.io");
        assert_eq!(tag.repository, "e2e-test-images/agnhost");
        assert_eq!(tag.tag, "2.53");
        assert_eq!(Tag::parse("localhost:5000/x"), None);
        assert_eq!(Tag::parse("busybox"), None);
    }
}
