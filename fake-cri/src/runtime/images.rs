//! Images: pull, list, status, remove, and image filesystem usage.

use nodeconform_cri::v1;

use super::state::{ImageFs, Runtime, lock, now};
use crate::error::Result;
use crate::images::Reference;

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

    /// Pulls an image: after the configured delay, every reference succeeds
    /// except malformed ones and those under `registry.invalid`.
    pub(crate) async fn pull_image(&self, image: &str) -> Result<String> {
        let reference = Reference::parse(image)?;
        if !self.config.image_pull_delay.is_zero() {
            tokio::time::sleep(self.config.image_pull_delay).await;
        }
        Ok(lock(&self.images).pull(&reference)?.id)
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
