//! What a container's processes see, built from the CRI request as
//! containerd + runc would build it: the mounts, the environment, the host
//! name and the user.

use nodeconform_cri::v1;

use crate::images::Image;
use crate::sandbox::Sandbox;
use crate::script::{Context, Env, FileSystem, Mount};

/// The context of a container created from `config` in `sandbox`.
pub(super) fn context(config: &v1::ContainerConfig, sandbox: &Sandbox, image: &Image) -> Context {
    // containerd uses the node's host name when the sandbox has none (host
    // network); fake-cri reads nothing of the host, so the pod name stands in.
    let hostname = match sandbox.config.hostname.as_str() {
        "" => sandbox.metadata().name,
        name => name.to_owned(),
    };
    let security = config
        .linux
        .as_ref()
        .and_then(|l| l.security_context.as_ref());
    let uid = security
        .and_then(|s| s.run_as_user.as_ref())
        .map(|u| u.value)
        .or_else(|| security.and_then(|s| s.run_as_username.parse().ok()))
        .or_else(|| image_user(image))
        .unwrap_or(0);
    let gid = security
        .and_then(|s| s.run_as_group.as_ref())
        .map_or(0, |g| g.value);
    let envs = config
        .envs
        .iter()
        .map(|kv| (kv.key.as_str(), kv.value.as_str()));
    let mounts = config
        .mounts
        .iter()
        .map(|m| Mount::new(&m.container_path, &m.host_path, m.readonly))
        .collect();
    Context {
        files: FileSystem::new(mounts, security.is_some_and(|s| s.readonly_rootfs)),
        env: Env::container(envs, &hostname, uid),
        hostname,
        uid,
        gid,
    }
}

/// The uid of the image's `USER` (from the image catalogue), the default when
/// the request sets none. A user name would need the image's `/etc/passwd`,
/// which fake-cri does not have: such an image, like one without `USER`, runs
/// as root (0).
fn image_user(image: &Image) -> Option<i64> {
    image.cri_user().0
}
