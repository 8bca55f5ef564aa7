//! Images: pull, list, status, remove, and image filesystem usage.

use nodeconform_cri::v1;

use base64::Engine as _;

use super::state::{ImageFs, Runtime, invalid, lock, now};
use crate::error::Result;
use crate::images::Reference;
use crate::images::catalog::Credentials;

/// containerd's `ParseAuth`: the login an `AuthConfig` gives the registry at
/// `host` — none when it is for another server; its user name and password,
/// else its identity token, else its `auth` (`base64(user:password)`).
fn login(auth: &v1::AuthConfig, host: &str) -> Result<Option<Credentials>> {
    if !auth.server_address.is_empty() {
        let address = auth.server_address.as_str();
        let address = address
            .strip_prefix("https://")
            .or_else(|| address.strip_prefix("http://"))
            .unwrap_or(address);
        let server = address.split('/').next().unwrap_or_default();
        let docker_hub =
            |h: &str| matches!(h, "docker.io" | "index.docker.io" | "registry-1.docker.io");
        if server != host && !(docker_hub(server) && docker_hub(host)) {
            return Ok(None);
        }
    }
    let credentials = |username: &str, password: &str| Credentials {
        username: username.to_owned(),
        password: password.to_owned(),
    };
    if !auth.username.is_empty() {
        return Ok(Some(credentials(&auth.username, &auth.password)));
    }
    if !auth.identity_token.is_empty() {
        return Ok(Some(credentials("", &auth.identity_token)));
    }
    if auth.auth.is_empty() {
        return Ok(None);
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth.auth.as_bytes())
        .map_err(|e| invalid("PullImage", format!("auth: {e}")))?;
    let decoded = String::from_utf8_lossy(&decoded);
    let (username, password) = decoded
        .split_once(':')
        .ok_or_else(|| invalid("PullImage", format!("invalid decoded auth: {decoded:?}")))?;
    Ok(Some(credentials(username, password.trim_matches('\0'))))
}

impl Runtime {
    pub(crate) fn list_images(&self, filter: Option<v1::ImageFilter>) -> Vec<v1::Image> {
        let wanted = filter
            .and_then(|f| f.image)
            .map(|spec| spec.image)
            .filter(|image| !image.is_empty());
        let images = lock(&self.images);
        match wanted {
            Some(image) => images
                .find(&image)
                .map(|i| i.to_cri())
                .into_iter()
                .collect(),
            None => images.list().map(|i| i.to_cri()).collect(),
        }
    }

    pub(crate) fn image_status(&self, image: &str) -> Option<v1::Image> {
        lock(&self.images).find(image).map(|i| i.to_cri())
    }

    /// Pulls an image with the client's `auth`: after the configured delay,
    /// every reference succeeds except malformed ones, those under
    /// `registry.invalid`, and private ones of the catalogue without their login.
    pub(crate) async fn pull_image(
        &self,
        image: &str,
        auth: Option<&v1::AuthConfig>,
    ) -> Result<String> {
        let reference = Reference::parse(image)?;
        let login = auth
            .map(|auth| login(auth, &reference.domain))
            .transpose()?
            .flatten();
        if !self.config.image_pull_delay.is_zero() {
            tokio::time::sleep(self.config.image_pull_delay).await;
        }
        Ok(lock(&self.images).pull(&reference, login.as_ref())?.id)
    }

    pub(crate) fn remove_image(&self, image: &str) {
        lock(&self.images).remove(image);
    }

    pub(crate) fn set_image_fs(&self, fs: ImageFs) {
        *lock(&self.image_fs) = fs;
    }

    pub(crate) fn image_fs_info(&self) -> v1::ImageFsInfoResponse {
        let fs = *lock(&self.image_fs);
        let (used, count) = {
            let images = lock(&self.images);
            (images.total_size(), images.list().count())
        };
        let containers = self.state().containers.len() as u64;
        let usage = |what: &str, used_bytes: u64, inodes: u64| v1::FilesystemUsage {
            timestamp: now(),
            fs_id: Some(v1::FilesystemIdentifier {
                mountpoint: self.fs_mountpoint(what),
            }),
            used_bytes: Some(v1::UInt64Value { value: used_bytes }),
            inodes_used: Some(v1::UInt64Value { value: inodes }),
        };
        v1::ImageFsInfoResponse {
            image_filesystems: vec![usage(
                "images",
                fs.used_bytes.unwrap_or(used),
                count as u64 * 100,
            )],
            container_filesystems: vec![usage("containers", containers * 4096, containers * 10)],
        }
    }

    pub(crate) fn image_fs(&self) -> ImageFs {
        *lock(&self.image_fs)
    }
}
