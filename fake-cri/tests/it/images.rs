//! ImageService: pull, list, status, remove, and the image filesystem.

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, expect_code, image_spec};
use nodeconform_cri::v1;
use tonic::Code;

async fn list(env: &mut Env, filter: Option<&str>) -> Vec<v1::Image> {
    env.images
        .list_images(v1::ListImagesRequest {
            filter: filter.map(|image| v1::ImageFilter {
                image: Some(image_spec(image)),
            }),
        })
        .await
        .unwrap()
        .into_inner()
        .images
}

async fn status(env: &mut Env, image: &str) -> Option<v1::Image> {
    env.images
        .image_status(v1::ImageStatusRequest {
            image: Some(image_spec(image)),
            verbose: false,
        })
        .await
        .unwrap()
        .into_inner()
        .image
}

async fn remove(env: &mut Env, image: &str) {
    env.images
        .remove_image(v1::RemoveImageRequest {
            image: Some(image_spec(image)),
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn pull_list_status_remove() {
    let mut env = Env::start().await;
    assert!(list(&mut env, None).await.is_empty());
    let busybox = env.pull("busybox").await.unwrap();
    assert!(
        busybox.starts_with("sha256:") && busybox.len() == 71,
        "{busybox}"
    );
    assert_eq!(
        env.pull("docker.io/library/busybox:latest").await.unwrap(),
        busybox,
        "same image, same id"
    );
    let pause = env.pull("registry.k8s.io/pause:3.9").await.unwrap();
    assert_ne!(pause, busybox);

    let mut images = list(&mut env, None).await;
    images.sort_by(|a, b| a.repo_tags.cmp(&b.repo_tags));
    assert_eq!(images.len(), 2);
    assert_eq!(images[0].repo_tags, ["docker.io/library/busybox:latest"]);
    assert_eq!(images[1].repo_tags, ["registry.k8s.io/pause:3.9"]);
    for image in &images {
        assert!(image.size > 0, "{image:?}");
        assert_eq!(image.repo_digests.len(), 1);
    }
    let busybox_image = images[0].clone();
    assert_eq!(busybox_image.id, busybox);

    // Found by short name, full name, id, and digest reference.
    let digest_ref = busybox_image.repo_digests[0].clone();
    for name in [
        "busybox",
        "busybox:latest",
        "docker.io/library/busybox:latest",
        &busybox,
        &digest_ref,
    ] {
        let found = status(&mut env, name)
            .await
            .unwrap_or_else(|| panic!("{name} not found"));
        assert_eq!(found.id, busybox, "{name}");
    }
    // Absent images are an empty answer, not an error.
    assert!(status(&mut env, "busybox:1.0").await.is_none());
    assert!(status(&mut env, "alpine").await.is_none());

    // The list filter.
    let filtered = list(&mut env, Some("registry.k8s.io/pause:3.9")).await;
    assert_eq!(
        filtered.iter().map(|i| i.id.clone()).collect::<Vec<_>>(),
        std::slice::from_ref(&pause)
    );
    assert!(list(&mut env, Some("alpine")).await.is_empty());

    // Stable: a pull is the same image every time, across runtimes too.
    let mut other = Env::start().await;
    assert_eq!(other.pull("busybox").await.unwrap(), busybox);

    // Remove: by name, by id; removing an absent image succeeds.
    remove(&mut env, "busybox").await;
    assert!(status(&mut env, "busybox").await.is_none());
    remove(&mut env, &pause).await;
    assert!(list(&mut env, None).await.is_empty());
    remove(&mut env, "busybox").await;
    remove(&mut env, "never/pulled:1").await;
}

#[tokio::test]
async fn pull_by_digest() {
    let mut env = Env::start().await;
    let digest = format!("sha256:{}", "ab".repeat(32));
    let reference = format!("quay.io/team/app@{digest}");
    let id = env.pull(&reference).await.unwrap();
    let image = status(&mut env, &reference)
        .await
        .expect("found by its digest");
    assert_eq!(image.id, id);
    assert_eq!(image.repo_digests, std::slice::from_ref(&reference));
    assert!(image.repo_tags.is_empty(), "a digest pull has no tag");
    // A container can run from it.
    let sandbox = env.sandbox("pod").await;
    let mut config = common::script_config("c", "exit 0");
    config.image = Some(image_spec(&reference));
    let container = env.create_raw(&sandbox, Some(config)).await.unwrap();
    let status = env.status(&container).await.unwrap();
    assert_eq!(status.image_id, id);
    assert_eq!(status.image_ref, reference);
}

#[tokio::test]
async fn containers_report_their_image() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.pull("busybox:1.36").await.unwrap();
    let mut config = common::script_config("c", "exit 0");
    config.image = Some(image_spec("busybox:1.36"));
    let container = env.create_raw(&sandbox, Some(config)).await.unwrap();
    let status = env.status(&container).await.unwrap();
    assert_eq!(
        status.image.as_ref().unwrap().image,
        "docker.io/library/busybox:1.36"
    );
    assert_eq!(status.image.unwrap().user_specified_image, "busybox:1.36");
    assert_eq!(status.image_id, id);
    assert!(
        status
            .image_ref
            .starts_with("docker.io/library/busybox@sha256:"),
        "{}",
        status.image_ref
    );
}

#[tokio::test]
async fn pull_errors() {
    let mut env = Env::start().await;
    let message = expect_code(env.pull("registry.invalid/app:1").await, Code::NotFound);
    assert!(message.contains("not found"), "{message}");
    expect_code(env.pull("UPPER/case").await, Code::InvalidArgument);
}

#[tokio::test]
async fn pull_delay() {
    let delay = Duration::from_millis(300);
    let mut env = Env::start_with(|b| b.image_pull_delay(delay)).await;
    let started = Instant::now();
    env.pull("busybox").await.unwrap();
    assert!(
        started.elapsed() >= delay,
        "pull took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn image_fs_info_counts_images_and_containers() {
    let dir = tempfile::tempdir().unwrap();
    let state_dir = dir.path().to_owned();
    let mut env = Env::start_with(|b| b.state_dir(&state_dir)).await;
    let used = |fs: &v1::FilesystemUsage| fs.used_bytes.as_ref().unwrap().value;
    let empty = env.image_fs_info().await;
    assert_eq!(empty.image_filesystems.len(), 1);
    assert_eq!(empty.container_filesystems.len(), 1);
    assert_eq!(used(&empty.image_filesystems[0]), 0);
    let mountpoint = &empty.image_filesystems[0]
        .fs_id
        .as_ref()
        .unwrap()
        .mountpoint;
    assert!(
        mountpoint.starts_with(&state_dir.display().to_string()),
        "{mountpoint}"
    );
    assert!(empty.image_filesystems[0].timestamp > 0);

    env.pull("busybox").await.unwrap();
    env.pull("nginx:1.27").await.unwrap();
    let sizes: u64 = list(&mut env, None).await.iter().map(|i| i.size).sum();
    let pulled = env.image_fs_info().await;
    assert_eq!(
        used(&pulled.image_filesystems[0]),
        sizes,
        "image fs usage is the sum of image sizes"
    );
    assert!(
        pulled.image_filesystems[0]
            .inodes_used
            .as_ref()
            .unwrap()
            .value
            > 0
    );

    let sandbox = env.sandbox("pod").await;
    env.create(&sandbox, "c", "exit 0").await.unwrap();
    let with_container = env.image_fs_info().await;
    assert!(
        used(&with_container.container_filesystems[0]) > used(&pulled.container_filesystems[0])
    );
}

/// The catalogue shipped for critest states the `USER` of cri-tools' test
/// images and that the three tags of `test-image-tags` name one image.
#[tokio::test]
async fn the_cri_tools_catalogue_gives_users_and_shared_tags() {
    let catalog = nodeconform_fake_cri::Catalog::from_path(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/catalogs/cri-tools.json"
    ))
    .unwrap();
    let mut env = Env::start_with(|builder| builder.image_catalog(catalog)).await;
    let registry = "gcr.io/k8s-staging-cri-tools";
    for (image, uid, username) in [
        ("test-image-user-uid", Some(1002), ""),
        ("test-image-user-username", None, "www-data"),
        ("test-image-user-uid-group", Some(1003), ""),
        ("test-image-user-username-group", None, "www-data"),
        ("test-image-latest", None, ""),
    ] {
        let image = format!("{registry}/{image}");
        env.pull(&image).await.unwrap();
        let status = status(&mut env, &image).await.unwrap();
        assert_eq!(status.uid.map(|uid| uid.value), uid, "{image}");
        assert_eq!(status.username, username, "{image}");
    }

    let tags = ["1", "2", "3"].map(|tag| format!("{registry}/test-image-tags:{tag}"));
    let mut ids = Vec::new();
    for tag in &tags {
        ids.push(env.pull(tag).await.unwrap());
    }
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    let mut image = list(&mut env, Some(&tags[0])).await.remove(0);
    image.repo_tags.sort();
    assert_eq!(image.repo_tags, tags);
    remove(&mut env, &tags[1]).await;
    assert!(
        status(&mut env, &tags[2]).await.is_none(),
        "removed with all its tags"
    );
}

/// Without a catalogue an image has no user, as an image without `USER`.
#[tokio::test]
async fn an_image_without_user_reports_none() {
    let mut env = Env::start().await;
    env.pull("busybox").await.unwrap();
    let image = status(&mut env, "busybox").await.unwrap();
    assert_eq!((image.uid, image.username.as_str()), (None, ""));
}
