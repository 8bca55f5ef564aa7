//! Security contexts as the kubelet hands them to the runtime
//! (`kuberuntime`'s `determineEffectiveSecurityContext`,
//! `generatePodSandboxLinuxConfig`, `getSeccompProfile`) and its
//! `runAsNonRoot` check (`verifyRunAsNonRoot`), which needs the image's user
//! from `ImageStatus` because only the runtime knows an image's `USER`.

use std::path::Path;

use k8s_openapi::api::core::v1::{
    Container, Pod, PodSecurityContext, SeccompProfile, SecurityContext,
};
use nodeconform_cri::v1 as cri;

/// The paths a container's `/proc` masks unless `procMount: Unmasked`
/// (`securitycontext.defaultMaskedPaths`).
const DEFAULT_MASKED_PATHS: [&str; 10] = [
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];

/// The paths a container sees read-only unless `procMount: Unmasked`
/// (`securitycontext.defaultReadonlyPaths`).
const DEFAULT_READONLY_PATHS: [&str; 5] = [
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Why the kubelet refuses to make a container's config. The messages are the
/// kubelet's: they become the container's `CreateContainerConfigError` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `runAsNonRoot` with `runAsUser: 0`.
    #[error("container's runAsUser breaks non-root policy (pod: {pod:?}, container: {container})")]
    RootUser {
        /// The pod as `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// `runAsNonRoot` without `runAsUser`, and the image runs as uid 0 (or states no user).
    #[error(
        "container has runAsNonRoot and image will run as root (pod: {pod:?}, container: {container})"
    )]
    ImageRunsAsRoot {
        /// The pod as `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// `runAsNonRoot` without `runAsUser`, and the image names its user: whether that
    /// user is root cannot be told without the image's `/etc/passwd`.
    #[error(
        "container has runAsNonRoot and image has non-numeric user ({user}), cannot verify user is non-root (pod: {pod:?}, container: {container})"
    )]
    ImageUserName {
        /// The image's user name.
        user: String,
        /// The pod as `name_namespace(uid)`.
        pod: String,
        /// The container's name.
        container: String,
    },
    /// A `Localhost` seccomp profile without the profile's name.
    #[error("localhostProfile must be set if seccompProfile type is Localhost.")]
    LocalhostProfileMissing,
}

/// The user an image runs as, from `ImageStatus` (the runtime reads the image's `USER`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageUser {
    /// A numeric user.
    pub uid: Option<i64>,
    /// A user name (only when the user is not numeric).
    pub username: String,
}

impl ImageUser {
    /// `getImageUser`: the runtime's `uid`, else its `username`; an image that
    /// states neither (or that the runtime does not know) runs as root.
    pub fn from_status(image: Option<&cri::Image>) -> Self {
        match image {
            Some(cri::Image { uid: Some(uid), .. }) => Self {
                uid: Some(uid.value),
                username: String::new(),
            },
            Some(image) if !image.username.is_empty() => Self {
                uid: None,
                username: image.username.clone(),
            },
            _ => Self {
                uid: Some(0),
                username: String::new(),
            },
        }
    }
}

/// `DetermineEffectiveSecurityContext`: the pod's user, group, non-root and
/// SELinux settings, overridden field by field by the container's context.
pub fn effective(pod: &Pod, container: &Container) -> SecurityContext {
    let pod_sc = pod_context(pod);
    let mut sc = SecurityContext {
        run_as_user: pod_sc.and_then(|p| p.run_as_user),
        run_as_group: pod_sc.and_then(|p| p.run_as_group),
        run_as_non_root: pod_sc.and_then(|p| p.run_as_non_root),
        se_linux_options: pod_sc.and_then(|p| p.se_linux_options.clone()),
        windows_options: pod_sc.and_then(|p| p.windows_options.clone()),
        ..Default::default()
    };
    let Some(c) = &container.security_context else {
        return sc;
    };
    macro_rules! overlay {
        ($($field:ident),*) => {$(
            if c.$field.is_some() {
                sc.$field = c.$field.clone();
            }
        )*};
    }
    overlay!(
        se_linux_options,
        windows_options,
        capabilities,
        privileged,
        run_as_user,
        run_as_group,
        run_as_non_root,
        read_only_root_filesystem,
        allow_privilege_escalation,
        proc_mount
    );
    sc
}

/// `verifyRunAsNonRoot`: with `runAsNonRoot`, the container must not run as
/// uid 0, whether its `runAsUser` or its image's user says so, and a named
/// image user cannot be verified.
pub fn verify_run_as_non_root(
    pod: &Pod,
    container: &Container,
    image: &ImageUser,
) -> Result<(), Error> {
    let sc = effective(pod, container);
    if sc.run_as_non_root != Some(true) {
        return Ok(());
    }
    let pod_desc = pod_desc(pod);
    let container = container.name.clone();
    match (sc.run_as_user, image.uid, image.username.as_str()) {
        (Some(0), _, _) => Err(Error::RootUser {
            pod: pod_desc,
            container,
        }),
        (Some(_), _, _) => Ok(()),
        (None, Some(0), _) => Err(Error::ImageRunsAsRoot {
            pod: pod_desc,
            container,
        }),
        (None, None, user) if !user.is_empty() => Err(Error::ImageUserName {
            user: user.to_owned(),
            pod: pod_desc,
            container,
        }),
        (None, _, _) => Ok(()),
    }
}

/// The container's CRI security context (`determineEffectiveSecurityContext`):
/// the effective context, the image's user where none is set, the seccomp
/// profile, supplemental groups (fsGroup first), no_new_privs and the masked
/// `/proc` paths. AppArmor annotations are not read.
pub fn container_context(
    pod: &Pod,
    container: &Container,
    image: &ImageUser,
    seccomp_root: &Path,
    namespace_options: cri::NamespaceOption,
) -> Result<cri::LinuxContainerSecurityContext, Error> {
    let sc = effective(pod, container);
    let seccomp = container
        .security_context
        .as_ref()
        .and_then(|c| c.seccomp_profile.as_ref())
        .or_else(|| pod_context(pod).and_then(|p| p.seccomp_profile.as_ref()));
    let (run_as_user, run_as_username) = match sc.run_as_user {
        Some(uid) => (Some(uid), String::new()),
        None => (image.uid, image.username.clone()),
    };
    let unmasked = sc.proc_mount.as_deref() == Some("Unmasked");
    let paths = |list: &[&str]| {
        if unmasked {
            Vec::new()
        } else {
            list.iter().map(|p| (*p).to_owned()).collect()
        }
    };
    Ok(cri::LinuxContainerSecurityContext {
        capabilities: sc.capabilities.as_ref().map(|c| cri::Capability {
            add_capabilities: c.add.clone().unwrap_or_default(),
            drop_capabilities: c.drop.clone().unwrap_or_default(),
            ..Default::default()
        }),
        privileged: sc.privileged.unwrap_or(false),
        namespace_options: Some(namespace_options),
        selinux_options: sc.se_linux_options.as_ref().map(selinux),
        run_as_user: run_as_user.map(|value| cri::Int64Value { value }),
        run_as_group: sc.run_as_group.map(|value| cri::Int64Value { value }),
        run_as_username,
        readonly_rootfs: sc.read_only_root_filesystem.unwrap_or(false),
        supplemental_groups: supplemental_groups(pod),
        no_new_privs: sc.allow_privilege_escalation == Some(false),
        masked_paths: paths(&DEFAULT_MASKED_PATHS),
        readonly_paths: paths(&DEFAULT_READONLY_PATHS),
        seccomp: Some(seccomp_profile(seccomp, seccomp_root)?),
        ..Default::default()
    })
}

/// The sandbox's CRI security context (`generatePodSandboxLinuxConfig`): the
/// pod's user, group, supplemental groups and SELinux options, privileged when
/// any container is, and the runtime's default seccomp profile for the pause
/// process whatever the pod asks for.
pub fn sandbox_context(
    pod: &Pod,
    namespace_options: cri::NamespaceOption,
) -> cri::LinuxSandboxSecurityContext {
    let sc = pod_context(pod);
    let privileged = pod.spec.as_ref().is_some_and(|spec| {
        spec.containers
            .iter()
            .chain(spec.init_containers.iter().flatten())
            .any(|c| {
                c.security_context
                    .as_ref()
                    .and_then(|s| s.privileged)
                    .unwrap_or(false)
            })
    });
    cri::LinuxSandboxSecurityContext {
        namespace_options: Some(namespace_options),
        selinux_options: sc.and_then(|s| s.se_linux_options.as_ref()).map(selinux),
        run_as_user: sc
            .and_then(|s| s.run_as_user)
            .map(|value| cri::Int64Value { value }),
        run_as_group: sc
            .and_then(|s| s.run_as_group)
            .map(|value| cri::Int64Value { value }),
        supplemental_groups: supplemental_groups(pod),
        privileged,
        seccomp: Some(cri::SecurityProfile {
            profile_type: cri::security_profile::ProfileType::RuntimeDefault as i32,
            localhost_ref: String::new(),
        }),
        ..Default::default()
    }
}

fn pod_context(pod: &Pod) -> Option<&PodSecurityContext> {
    pod.spec.as_ref().and_then(|s| s.security_context.as_ref())
}

/// The kubelet's `format.Pod`: `name_namespace(uid)`.
fn pod_desc(pod: &Pod) -> String {
    format!(
        "{}_{}({})",
        pod.metadata.name.as_deref().unwrap_or_default(),
        pod.metadata.namespace.as_deref().unwrap_or_default(),
        pod.metadata.uid.as_deref().unwrap_or_default()
    )
}

/// `fsGroup`, then `supplementalGroups`, as the kubelet lists them.
fn supplemental_groups(pod: &Pod) -> Vec<i64> {
    let sc = pod_context(pod);
    sc.and_then(|s| s.fs_group)
        .into_iter()
        .chain(
            sc.and_then(|s| s.supplemental_groups.clone())
                .into_iter()
                .flatten(),
        )
        .collect()
}

fn selinux(o: &k8s_openapi::api::core::v1::SELinuxOptions) -> cri::SeLinuxOption {
    cri::SeLinuxOption {
        user: o.user.clone().unwrap_or_default(),
        role: o.role.clone().unwrap_or_default(),
        r#type: o.type_.clone().unwrap_or_default(),
        level: o.level.clone().unwrap_or_default(),
    }
}

/// `fieldSeccompProfile` without `seccompDefault` (the kubelet's default):
/// nothing set is `Unconfined`; a `Localhost` profile is a file under the
/// kubelet's `<root-dir>/seccomp`.
fn seccomp_profile(
    profile: Option<&SeccompProfile>,
    root: &Path,
) -> Result<cri::SecurityProfile, Error> {
    use cri::security_profile::ProfileType;
    let (profile_type, localhost_ref) = match profile.map(|p| (p.type_.as_str(), p)) {
        Some(("RuntimeDefault", _)) => (ProfileType::RuntimeDefault, String::new()),
        Some(("Localhost", p)) => match p.localhost_profile.as_deref() {
            Some(name) if !name.is_empty() => (
                ProfileType::Localhost,
                root.join(name).to_string_lossy().into_owned(),
            ),
            _ => return Err(Error::LocalhostProfileMissing),
        },
        _ => (ProfileType::Unconfined, String::new()),
    };
    Ok(cri::SecurityProfile {
        profile_type: profile_type as i32,
        localhost_ref,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Capabilities, PodSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    /// Upstream's `MustMixinRestrictedPodSecurity` around one busybox container.
    fn restricted(run_as_user: Option<i64>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                ..Default::default()
            },
            spec: Some(PodSpec {
                security_context: Some(PodSecurityContext {
                    run_as_non_root: Some(true),
                    run_as_user,
                    seccomp_profile: Some(SeccompProfile {
                        type_: "RuntimeDefault".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("busybox:1.36".into()),
                    security_context: Some(SecurityContext {
                        allow_privilege_escalation: Some(false),
                        capabilities: Some(Capabilities {
                            drop: Some(vec!["ALL".into()]),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn image(uid: Option<i64>, username: &str) -> ImageUser {
        ImageUser {
            uid,
            username: username.into(),
        }
    }

    #[test]
    fn image_user_defaults_to_root() {
        assert_eq!(ImageUser::from_status(None), image(Some(0), ""));
        let named = cri::Image {
            username: "www-data".into(),
            ..Default::default()
        };
        assert_eq!(
            ImageUser::from_status(Some(&named)),
            image(None, "www-data")
        );
    }

    #[test]
    fn run_as_non_root_is_checked_against_the_image_user() {
        let pod = restricted(None);
        let c = &pod.spec.as_ref().unwrap().containers[0];
        assert_eq!(
            verify_run_as_non_root(&pod, c, &image(Some(0), ""))
                .unwrap_err()
                .to_string(),
            r#"container has runAsNonRoot and image will run as root (pod: "p_ns(u1)", container: c)"#
        );
        assert_eq!(
            verify_run_as_non_root(&pod, c, &image(None, "www-data"))
                .unwrap_err()
                .to_string(),
            r#"container has runAsNonRoot and image has non-numeric user (www-data), cannot verify user is non-root (pod: "p_ns(u1)", container: c)"#
        );
        assert!(verify_run_as_non_root(&pod, c, &image(Some(1234), "")).is_ok());
        let explicit = restricted(Some(1000));
        assert!(verify_run_as_non_root(&explicit, c, &image(Some(0), "")).is_ok());
        let root = restricted(Some(0));
        assert!(matches!(
            verify_run_as_non_root(&root, c, &image(Some(1234), "")),
            Err(Error::RootUser { .. })
        ));
    }

    #[test]
    fn restricted_context_reaches_the_runtime() {
        let pod = restricted(Some(1000));
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let sc = container_context(
            &pod,
            c,
            &image(Some(0), ""),
            Path::new("/var/lib/kubelet/seccomp"),
            cri::NamespaceOption::default(),
        )
        .unwrap();
        assert_eq!(sc.run_as_user, Some(cri::Int64Value { value: 1000 }));
        assert!(sc.no_new_privs);
        assert_eq!(sc.capabilities.unwrap().drop_capabilities, vec!["ALL"]);
        assert_eq!(
            sc.seccomp.unwrap().profile_type,
            cri::security_profile::ProfileType::RuntimeDefault as i32
        );
        assert_eq!(sc.masked_paths.len(), DEFAULT_MASKED_PATHS.len());
        let sandbox = sandbox_context(&pod, cri::NamespaceOption::default());
        assert_eq!(sandbox.run_as_user, Some(cri::Int64Value { value: 1000 }));
    }

    #[test]
    fn image_user_fills_in_and_localhost_profiles_need_a_name() {
        let mut pod = restricted(None);
        let spec = pod.spec.as_mut().unwrap();
        spec.security_context.as_mut().unwrap().seccomp_profile = Some(SeccompProfile {
            type_: "Localhost".into(),
            localhost_profile: Some("audit.json".into()),
        });
        let c = spec.containers[0].clone();
        let sc = container_context(
            &pod,
            &c,
            &image(None, "www-data"),
            Path::new("/r/seccomp"),
            cri::NamespaceOption::default(),
        )
        .unwrap();
        assert_eq!(sc.run_as_user, None);
        assert_eq!(sc.run_as_username, "www-data");
        assert_eq!(sc.seccomp.unwrap().localhost_ref, "/r/seccomp/audit.json");
        pod.spec.as_mut().unwrap().security_context = Some(PodSecurityContext {
            seccomp_profile: Some(SeccompProfile {
                type_: "Localhost".into(),
                localhost_profile: None,
            }),
            ..Default::default()
        });
        assert_eq!(
            container_context(
                &pod,
                &c,
                &image(Some(0), ""),
                Path::new("/r"),
                cri::NamespaceOption::default()
            ),
            Err(Error::LocalhostProfileMissing)
        );
    }
}
