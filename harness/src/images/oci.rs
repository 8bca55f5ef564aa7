//! Image archives as `docker save` writes them: an OCI image layout (`oci-layout`,
//! `index.json`, `blobs/sha256/…`) with Docker's `manifest.json` beside it, so
//! `ctr images import`, `docker load` and `podman load` all take them and name
//! the images by their tags.
//!
//! Everything is written in a fixed order with fixed times and owners, so the
//! same files give the same digests: an image id does not change from one
//! build to the next.

use std::io::Write;
use std::path::Path;

use ring::digest::{SHA256, digest};
use serde_json::json;

/// The modification time of every entry (2026-01-01T00:00:00Z): fixed, so the
/// layers' digests depend on their content alone.
const MTIME: u64 = 1_767_225_600;

/// One filesystem layer, built in memory as an uncompressed tar.
pub struct Layer {
    builder: tar::Builder<Vec<u8>>,
}

impl Default for Layer {
    fn default() -> Self {
        Self::new()
    }
}

impl Layer {
    /// An empty layer.
    pub fn new() -> Self {
        Self {
            builder: tar::Builder::new(Vec::new()),
        }
    }

    fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(kind);
        header.set_mode(mode);
        header.set_size(size);
        header.set_mtime(MTIME);
        header.set_uid(0);
        header.set_gid(0);
        header
    }

    /// A directory (`path` without a leading `/`).
    pub fn dir(&mut self, path: &str, mode: u32) -> std::io::Result<()> {
        let mut header = Self::header(tar::EntryType::Directory, mode, 0);
        self.builder
            .append_data(&mut header, format!("{path}/"), std::io::empty())
    }

    /// A regular file with `content`.
    pub fn file(&mut self, path: &str, mode: u32, content: &[u8]) -> std::io::Result<()> {
        let mut header = Self::header(tar::EntryType::Regular, mode, content.len() as u64);
        self.builder.append_data(&mut header, path, content)
    }

    /// A symbolic link at `path` to `target`.
    pub fn symlink(&mut self, path: &str, target: &str) -> std::io::Result<()> {
        let mut header = Self::header(tar::EntryType::Symlink, 0o777, 0);
        self.builder.append_link(&mut header, path, target)
    }

    fn finish(self) -> std::io::Result<Vec<u8>> {
        self.builder.into_inner()
    }
}

/// What an image's configuration says (the fields of the OCI image config's
/// `config` the runtime reads).
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// `Entrypoint`.
    pub entrypoint: Vec<String>,
    /// `Cmd`.
    pub cmd: Vec<String>,
    /// `Env`, `NAME=value`.
    pub env: Vec<String>,
    /// `User`, empty for root.
    pub user: String,
    /// `Labels`: where the image's files came from.
    pub labels: Vec<(String, String)>,
}

/// An image: its layers, lowest first, its configuration and its tags (full
/// references, `docker.io/library/busybox:1.36`).
pub struct Image {
    /// The layers' tars.
    pub layers: Vec<Layer>,
    /// The configuration.
    pub config: Config,
    /// The references the image is imported as.
    pub tags: Vec<String>,
}

fn sha256(data: &[u8]) -> String {
    let hash = digest(&SHA256, data);
    let hex: String = hash.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A content-addressed blob of the archive.
struct Blob {
    digest: String,
    data: Vec<u8>,
}

impl Blob {
    fn new(data: Vec<u8>) -> Self {
        Self {
            digest: sha256(&data),
            data,
        }
    }

    fn path(&self) -> String {
        format!("blobs/sha256/{}", &self.digest["sha256:".len()..])
    }

    fn descriptor(&self, media_type: &str) -> serde_json::Value {
        json!({"mediaType": media_type, "digest": self.digest, "size": self.data.len()})
    }
}

/// Docker's name for a reference in `manifest.json`'s `RepoTags`: without the
/// default registry and `library/` (`busybox:1.36`), as `docker save` writes it.
fn docker_tag(reference: &str) -> &str {
    reference
        .strip_prefix("docker.io/library/")
        .or_else(|| reference.strip_prefix("docker.io/"))
        .unwrap_or(reference)
}

/// Writes `image` to `path` as an image archive; returns the image id (the
/// config's digest, what `crictl images` shows).
pub fn write(image: Image, path: &Path) -> std::io::Result<String> {
    let Image {
        layers,
        config,
        tags,
    } = image;
    let layers = layers
        .into_iter()
        .map(|layer| layer.finish().map(Blob::new))
        .collect::<std::io::Result<Vec<_>>>()?;
    let labels: serde_json::Map<String, serde_json::Value> = config
        .labels
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    let mut image_config = serde_json::Map::new();
    for (key, value) in [("Entrypoint", &config.entrypoint), ("Cmd", &config.cmd)] {
        if !value.is_empty() {
            image_config.insert(key.to_owned(), json!(value));
        }
    }
    image_config.insert("Env".to_owned(), json!(config.env));
    if !config.user.is_empty() {
        image_config.insert("User".to_owned(), json!(config.user));
    }
    image_config.insert("Labels".to_owned(), json!(labels));
    let config_blob = Blob::new(serde_json::to_vec(&json!({
        "architecture": std::env::consts::ARCH.replace("x86_64", "amd64").replace("aarch64", "arm64"),
        "os": "linux",
        "created": "2026-01-01T00:00:00Z",
        "config": image_config,
        "rootfs": {
            "type": "layers",
            "diff_ids": layers.iter().map(|l| l.digest.clone()).collect::<Vec<_>>(),
        },
        "history": layers.iter().map(|_| json!({"created": "2026-01-01T00:00:00Z", "created_by": "nodeconform images"})).collect::<Vec<_>>(),
    }))?);
    let manifest = Blob::new(serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": config_blob.descriptor("application/vnd.oci.image.config.v1+json"),
        "layers": layers
            .iter()
            .map(|l| l.descriptor("application/vnd.oci.image.layer.v1.tar"))
            .collect::<Vec<_>>(),
    }))?);
    // One index entry per tag: containerd names an image by the entry's
    // `io.containerd.image.name`, other tools by `org.opencontainers.image.ref.name`.
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": tags.iter().map(|tag| {
            let mut descriptor = manifest.descriptor("application/vnd.oci.image.manifest.v1+json");
            descriptor["annotations"] = json!({
                "io.containerd.image.name": tag,
                "org.opencontainers.image.ref.name": tag.rsplit_once(':').map_or("latest", |(_, t)| t),
            });
            descriptor
        }).collect::<Vec<_>>(),
    });
    let docker_manifest = json!([{
        "Config": config_blob.path(),
        "RepoTags": tags.iter().map(|t| docker_tag(t)).collect::<Vec<_>>(),
        "Layers": layers.iter().map(Blob::path).collect::<Vec<_>>(),
    }]);

    let file = std::fs::File::create(path)?;
    let mut archive = tar::Builder::new(std::io::BufWriter::new(file));
    let mut add = |name: &str, data: &[u8]| {
        let mut header = Layer::header(tar::EntryType::Regular, 0o644, data.len() as u64);
        archive.append_data(&mut header, name, data)
    };
    add("oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    for blob in layers.iter().chain([&config_blob, &manifest]) {
        add(&blob.path(), &blob.data)?;
    }
    add("index.json", &serde_json::to_vec(&index)?)?;
    add("manifest.json", &serde_json::to_vec(&docker_manifest)?)?;
    archive.into_inner()?.flush()?;
    Ok(config_blob.digest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn image() -> Image {
        let mut layer = Layer::new();
        layer.dir("bin", 0o755).unwrap();
        layer.file("bin/tool", 0o755, b"#!/bin/sh\n").unwrap();
        layer.symlink("bin/alias", "tool").unwrap();
        Image {
            layers: vec![layer],
            config: Config {
                cmd: vec!["sh".into()],
                ..Config::default()
            },
            tags: vec!["docker.io/library/x:1".into(), "example.com/y:2".into()],
        }
    }

    #[test]
    fn the_same_image_gets_the_same_id_and_both_layouts_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let first = write(image(), &dir.path().join("a.tar")).unwrap();
        let second = write(image(), &dir.path().join("b.tar")).unwrap();
        assert_eq!(first, second);
        let a = std::fs::read(dir.path().join("a.tar")).unwrap();
        assert_eq!(a, std::fs::read(dir.path().join("b.tar")).unwrap());

        let mut archive = tar::Archive::new(a.as_slice());
        let mut names = Vec::new();
        let mut docker = serde_json::Value::Null;
        let mut index = serde_json::Value::Null;
        for entry in archive.entries().unwrap() {
            let mut entry = entry.unwrap();
            let name = entry.path().unwrap().to_string_lossy().into_owned();
            let mut data = Vec::new();
            std::io::Read::read_to_end(&mut entry, &mut data).unwrap();
            if name.starts_with("blobs/") {
                // Content-addressed: the name is the digest of the bytes.
                assert_eq!(format!("blobs/{}", sha256(&data).replace(':', "/")), name);
            }
            match name.as_str() {
                "manifest.json" => docker = serde_json::from_slice(&data).unwrap(),
                "index.json" => index = serde_json::from_slice(&data).unwrap(),
                _ => {}
            }
            names.push(name);
        }
        assert_eq!(names[0], "oci-layout");
        assert_eq!(docker[0]["RepoTags"], json!(["x:1", "example.com/y:2"]));
        assert_eq!(
            index["manifests"][1]["annotations"]["io.containerd.image.name"],
            "example.com/y:2"
        );
        assert_eq!(docker[0]["Config"], format!("blobs/sha256/{}", &first[7..]));
    }
}
