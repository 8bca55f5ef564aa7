//! A pod's volumes, as the kubelet's volume manager sets them up for a pod worker
//! (`WaitForAttachAndMount` before the sandbox exists, `makeMounts` for each container,
//! teardown before the terminal status).
//!
//! Each volume lives in `<pod dir>/volumes/kubernetes.io~<plugin>/<name>`: `emptyDir` is a
//! directory; `configMap`, `secret`, `downwardAPI` and `projected` (those three plus
//! `serviceAccountToken`, through the TokenRequest API) are files written from the API,
//! rewritten when the pod is synced a `syncFrequency` after the last write (so updates
//! reach running containers) by the kubelet's atomic writer (`atomic_writer`: a
//! timestamped directory behind the `..data` link, each file a link through it, with
//! `defaultMode`/item `mode`, 0644 by default); `hostPath` is handed to the runtime as it is, and nothing
//! is created or read on the host for it. Other volume types (persistent volume claims,
//! CSI, ephemeral, …) are not supported and fail like an unmountable volume: the pod
//! waits in `ContainerCreating` with a `FailedMount` event (upstream's message,
//! `MountVolume.SetUp failed for volume "v" : configmap "c" not found`) and is retried
//! with back-off. Paths from the spec never leave the volume's directory.

mod atomic_writer;
pub mod downward;
mod medium;

use medium::Medium;
pub use medium::MemoryMedium;

use std::collections::{BTreeMap, HashMap};
use std::path::{Component, Path, PathBuf};

use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Container, KeyToPath, Pod, ServiceAccount, Volume};
use kube::Api;
use kube::api::PostParams;
use nodeconform_cri::v1 as cri;

use crate::env::{self, Downward};

/// A volume that could not be set up: the `FailedMount` event's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MountVolume.SetUp failed for volume {volume:?} : {message}")]
pub struct MountError {
    /// The volume's name in the pod spec.
    pub volume: String,
    /// What failed, in the kubelet's words.
    pub message: String,
}

/// A pod's set-up volumes by name.
#[derive(Debug, Clone, Default)]
pub struct Volumes {
    host_paths: HashMap<String, HostPath>,
    /// The pod's labels and annotations the downward-API files were written from, when
    /// it has such volumes.
    downward_metadata: Option<Metadata>,
}

/// A pod's labels and annotations.
type Metadata = (BTreeMap<String, String>, BTreeMap<String, String>);

fn metadata(pod: &Pod) -> Metadata {
    (
        pod.metadata.labels.clone().unwrap_or_default(),
        pod.metadata.annotations.clone().unwrap_or_default(),
    )
}

/// Where a volume is on the host.
#[derive(Debug, Clone)]
struct HostPath {
    path: PathBuf,
    /// Containers get it read-only whatever their `volumeMounts` say.
    read_only: bool,
    /// The agent made it (not a `hostPath`), so it may create sub-paths in it.
    managed: bool,
}

use atomic_writer::{File, Payload as Files};

/// A file's mode: the item's `mode`, else the volume's `defaultMode`, else 0644
/// (`ConfigMapVolumeSourceDefaultMode` and its siblings, `420`).
fn file_mode(item: Option<i32>, default_mode: Option<i32>) -> u32 {
    (item.or(default_mode).unwrap_or(0o644) as u32) & 0o7777
}

/// Whether the pod has a volume whose content comes from the API (and so is refreshed).
pub fn has_api_volumes(pod: &Pod) -> bool {
    volumes(pod).iter().any(|v| {
        v.config_map.is_some()
            || v.secret.is_some()
            || v.downward_api.is_some()
            || v.projected.is_some()
    })
}

fn volumes(pod: &Pod) -> &[Volume] {
    pod.spec
        .as_ref()
        .and_then(|s| s.volumes.as_deref())
        .unwrap_or_default()
}

/// Sets up every volume of `pod` under `pod_dir` (`SetUp` of each volume plugin), the
/// memory-backed ones as `memory` says.
pub async fn set_up(
    client: &kube::Client,
    pod: &Pod,
    pod_dir: &Path,
    downward: Downward<'_>,
    memory: MemoryMedium,
) -> Result<Volumes, MountError> {
    let mut out = Volumes::default();
    let has_downward = volumes(pod).iter().any(|v| {
        v.downward_api.is_some()
            || v.projected
                .as_ref()
                .is_some_and(|p| p.sources.iter().flatten().any(|s| s.downward_api.is_some()))
    });
    out.downward_metadata = has_downward.then(|| metadata(pod));
    let mut writes: Vec<Write> = Vec::new();
    let mut api = Sources::new(client, pod);
    for volume in volumes(pod) {
        let fail = |message: String| MountError {
            volume: volume.name.clone(),
            message,
        };
        let dir = |plugin: &str| {
            pod_dir
                .join("volumes")
                .join(format!("kubernetes.io~{plugin}"))
                .join(&volume.name)
        };
        let (path, read_only, files) = if let Some(host) = &volume.host_path {
            let path = PathBuf::from(&host.path);
            out.host_paths.insert(
                volume.name.clone(),
                HostPath {
                    path,
                    read_only: false,
                    managed: false,
                },
            );
            continue;
        } else if volume.empty_dir.is_some() {
            (dir("empty-dir"), false, None)
        } else if let Some(cm) = &volume.config_map {
            let files = api
                .config_map(&cm.name, cm.items.as_deref(), cm.optional, cm.default_mode)
                .await
                .map_err(fail)?;
            (dir("configmap"), true, Some(files))
        } else if let Some(secret) = &volume.secret {
            let name = secret.secret_name.clone().unwrap_or_default();
            let files = api
                .secret(
                    &name,
                    secret.items.as_deref(),
                    secret.optional,
                    secret.default_mode,
                )
                .await
                .map_err(fail)?;
            (dir("secret"), true, Some(files))
        } else if let Some(d) = &volume.downward_api {
            let items = d.items.as_deref().unwrap_or_default();
            let files = downward::files(pod, items, downward, d.default_mode).map_err(fail)?;
            (dir("downward-api"), true, Some(files))
        } else if let Some(projected) = &volume.projected {
            let mut files = Files::new();
            let mode = projected.default_mode;
            for source in projected.sources.iter().flatten() {
                let more = if let Some(cm) = &source.config_map {
                    api.config_map(&cm.name, cm.items.as_deref(), cm.optional, mode)
                        .await
                } else if let Some(s) = &source.secret {
                    api.secret(&s.name, s.items.as_deref(), s.optional, mode)
                        .await
                } else if let Some(d) = &source.downward_api {
                    downward::files(pod, d.items.as_deref().unwrap_or_default(), downward, mode)
                } else if let Some(token) = &source.service_account_token {
                    match relative(&token.path) {
                        Ok(path) => api
                            .token(pod, token.audience.clone(), token.expiration_seconds)
                            .await
                            .map(|t| {
                                let file = File {
                                    content: t.into_bytes(),
                                    mode: file_mode(None, mode),
                                };
                                Files::from([(path, file)])
                            }),
                        Err(e) => Err(e),
                    }
                } else {
                    Err("projected volume source not supported by nodeconform-agent".into())
                };
                files.extend(more.map_err(fail)?);
            }
            (dir("projected"), true, Some(files))
        } else {
            return Err(fail(
                "volume type not supported by nodeconform-agent".into(),
            ));
        };
        out.host_paths.insert(
            volume.name.clone(),
            HostPath {
                path: path.clone(),
                read_only,
                managed: true,
            },
        );
        writes.push(Write {
            medium: medium::of(volume, pod, downward.allocatable, memory),
            dir: path,
            files,
        });
    }
    if !writes.is_empty() {
        let failed = tokio::task::spawn_blocking(move || write_all(writes))
            .await
            .unwrap_or_else(|e| Err(("".into(), std::io::Error::other(e))));
        if let Err((path, error)) = failed {
            return Err(MountError {
                volume: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                message: format!("writing {}: {error}", path.display()),
            });
        }
    }
    Ok(out)
}

/// One volume's directory to set up.
struct Write {
    dir: PathBuf,
    medium: Medium,
    /// An API-backed volume's files; `None` for an `emptyDir`.
    files: Option<Files>,
}

/// Creates each volume directory (a tmpfs mounted on it for a memory-backed one); an
/// API-backed volume's files are written by the atomic writer.
fn write_all(writes: Vec<Write>) -> Result<(), (PathBuf, std::io::Error)> {
    use std::os::unix::fs::PermissionsExt as _;
    for Write { dir, medium, files } in writes {
        let at = |e| (dir.clone(), e);
        // `emptyDir`'s `setupDir`: permissions 0777 whatever the umask, so any user a
        // container runs as may write into it; then the tmpfs over it, whose root is
        // 1777 (only the permission bits are compared, so a refresh keeps the sticky bit).
        std::fs::create_dir_all(&dir).map_err(at)?;
        let mode = std::fs::metadata(&dir).map_err(at)?.permissions().mode();
        if mode & 0o777 != 0o777 {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).map_err(at)?;
        }
        if let Medium::Memory { size } = medium {
            medium::mount_tmpfs(&dir, size).map_err(at)?;
        }
        if let Some(files) = files {
            atomic_writer::write(&dir, &files).map_err(at)?;
        }
    }
    Ok(())
}

/// Removes every volume of the pod whose directory is `pod_dir` (`TearDown`): a
/// memory-backed one is unmounted first.
pub async fn tear_down(pod_dir: PathBuf) {
    let result = tokio::task::spawn_blocking(move || remove_volumes(&pod_dir)).await;
    if let Ok(Err(error)) = result {
        tracing::warn!(%error, "tearing down volumes");
    }
}

/// Unmounts and removes the volumes of the pod directory `pod_dir`. Blocking.
pub fn remove_volumes(pod_dir: &Path) -> std::io::Result<()> {
    medium::unmount_volumes(pod_dir)?;
    match std::fs::remove_dir_all(pod_dir.join("volumes")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl Volumes {
    /// Whether the pod's labels or annotations changed since its downward-API files
    /// were written: the kubelet rewrites those volumes when it syncs the updated pod
    /// (their plugins require a remount), not a `syncFrequency` later.
    pub fn downward_stale(&self, pod: &Pod) -> bool {
        if crate::mutants::active(crate::mutants::Mutant::DownwardApiStale) {
            return false;
        }
        self.downward_metadata
            .as_ref()
            .is_some_and(|m| *m != metadata(pod))
    }

    /// The CRI mounts for `container`'s `volumeMounts` (`makeMounts`), creating a
    /// missing `subPath` directory inside a volume the agent made; `Err` is the
    /// message of a `CreateContainerConfigError`.
    pub async fn mounts(
        &self,
        container: &Container,
        env: &[(String, String)],
    ) -> Result<Vec<cri::Mount>, String> {
        let mut mounts = Vec::new();
        for m in container.volume_mounts.iter().flatten() {
            let Some(volume) = self.host_paths.get(&m.name) else {
                return Err(format!(
                    "cannot find volume {:?} to mount into container {:?}",
                    m.name, container.name
                ));
            };
            let sub_path = match (&m.sub_path, &m.sub_path_expr) {
                (Some(p), _) if !p.is_empty() => p.clone(),
                (_, Some(expr)) => env::expand(expr, env),
                _ => String::new(),
            };
            let host_path = if sub_path.is_empty() {
                volume.path.clone()
            } else {
                let sub = relative(&sub_path).map_err(|e| format!("subPath {sub_path:?}: {e}"))?;
                let path = volume.path.join(sub);
                if volume.managed && !tokio::fs::try_exists(&path).await.unwrap_or(true) {
                    tokio::fs::create_dir_all(&path)
                        .await
                        .map_err(|e| format!("creating subPath {sub_path:?}: {e}"))?;
                }
                path
            };
            let propagation = match m.mount_propagation.as_deref() {
                Some("HostToContainer") => cri::MountPropagation::PropagationHostToContainer,
                Some("Bidirectional") => cri::MountPropagation::PropagationBidirectional,
                _ => cri::MountPropagation::PropagationPrivate,
            };
            mounts.push(cri::Mount {
                container_path: m.mount_path.clone(),
                host_path: host_path.to_string_lossy().into_owned(),
                readonly: m.read_only == Some(true) || volume.read_only,
                propagation: propagation.into(),
                ..Default::default()
            });
        }
        Ok(mounts)
    }
}

/// A path from the spec as a relative path that stays inside its volume.
fn relative(path: &str) -> Result<PathBuf, String> {
    let p = Path::new(path);
    if path.is_empty() || !p.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!(
            "path {path:?} must be relative and may not contain '..'"
        ));
    }
    Ok(p.to_path_buf())
}

/// The files of a ConfigMap or Secret's data: every key, or the `items` chosen.
fn select(
    data: env::Data,
    items: Option<&[KeyToPath]>,
    optional: bool,
    default_mode: Option<i32>,
    missing_key: &str,
) -> Result<Files, String> {
    let file = |content: &Vec<u8>, mode: Option<i32>| File {
        content: content.clone(),
        mode: file_mode(mode, default_mode),
    };
    match items {
        None => data
            .iter()
            .map(|(k, v)| Ok((relative(k)?, file(v, None))))
            .collect(),
        Some(items) => {
            let mut files = Files::new();
            for item in items {
                match data.get(&item.key) {
                    Some(v) => {
                        files.insert(relative(&item.path)?, file(v, item.mode));
                    }
                    None if optional => {}
                    None => return Err(format!("{missing_key}: {}", item.key)),
                }
            }
            Ok(files)
        }
    }
}

/// The API objects the volumes read, in the pod's namespace.
struct Sources {
    objects: env::Sources,
    accounts: Api<ServiceAccount>,
}

impl Sources {
    fn new(client: &kube::Client, pod: &Pod) -> Self {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        Self {
            objects: env::Sources::new(client, ns),
            accounts: Api::namespaced(client.clone(), ns),
        }
    }

    async fn config_map(
        &mut self,
        name: &str,
        items: Option<&[KeyToPath]>,
        optional: Option<bool>,
        default_mode: Option<i32>,
    ) -> Result<Files, String> {
        let optional = optional == Some(true);
        match self.objects.configmap(name).await? {
            Some(data) => select(
                data,
                items,
                optional,
                default_mode,
                "configmap references non-existent config key",
            ),
            None if optional => Ok(Files::new()),
            None => Err(format!("configmap {name:?} not found")),
        }
    }

    async fn secret(
        &mut self,
        name: &str,
        items: Option<&[KeyToPath]>,
        optional: Option<bool>,
        default_mode: Option<i32>,
    ) -> Result<Files, String> {
        let optional = optional == Some(true);
        match self.objects.secret(name).await? {
            Some(data) => select(
                data,
                items,
                optional,
                default_mode,
                "references non-existent secret key",
            ),
            None if optional => Ok(Files::new()),
            None => Err(format!("secret {name:?} not found")),
        }
    }

    /// A token for the pod's service account, bound to the pod (TokenRequest).
    async fn token(
        &self,
        pod: &Pod,
        audience: Option<String>,
        expiration_seconds: Option<i64>,
    ) -> Result<String, String> {
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".into());
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(audience.into_iter().collect()),
                expiration_seconds,
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: pod.metadata.name.clone(),
                    uid: pod.metadata.uid.clone(),
                }),
            }),
            ..Default::default()
        };
        self.accounts
            .create_token_request(&account, &PostParams::default(), &request)
            .await
            .map(|t| t.status.and_then(|s| s.token).unwrap_or_default())
            .map_err(|e| format!("requesting a token for service account {account:?}: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::VolumeMount;

    #[test]
    fn spec_paths_stay_inside_the_volume() {
        assert_eq!(relative("a/b"), Ok(PathBuf::from("a/b")));
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "./a"] {
            assert!(relative(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn items_pick_keys_with_modes_and_a_missing_key_fails_unless_optional() {
        let data = BTreeMap::from([
            ("a".to_owned(), b"1".to_vec()),
            ("b".to_owned(), b"2".to_vec()),
        ]);
        let item = |key: &str, path: &str, mode: Option<i32>| KeyToPath {
            key: key.into(),
            path: path.into(),
            mode,
        };
        let file = |content: &[u8], mode: u32| File {
            content: content.to_vec(),
            mode,
        };
        let all = select(data.clone(), None, false, None, "missing").unwrap();
        assert_eq!(
            all,
            Files::from([
                (PathBuf::from("a"), file(b"1", 0o644)),
                (PathBuf::from("b"), file(b"2", 0o644))
            ])
        );
        let picked = select(
            data.clone(),
            Some(&[item("a", "dir/x", None), item("b", "y", Some(0o400))]),
            false,
            Some(0o600),
            "missing",
        )
        .unwrap();
        assert_eq!(
            picked,
            Files::from([
                (PathBuf::from("dir/x"), file(b"1", 0o600)),
                (PathBuf::from("y"), file(b"2", 0o400))
            ])
        );
        let missing = [item("c", "y", None)];
        assert_eq!(
            select(
                data.clone(),
                Some(&missing),
                false,
                None,
                "configmap references non-existent config key"
            ),
            Err("configmap references non-existent config key: c".into())
        );
        assert_eq!(
            select(data, Some(&missing), true, None, "m"),
            Ok(Files::new())
        );
    }

    #[test]
    fn downward_files_are_stale_once_labels_or_annotations_change() {
        let mut pod = Pod::default();
        pod.metadata.labels = Some(BTreeMap::from([("a".into(), "1".into())]));
        let volumes = Volumes {
            host_paths: HashMap::new(),
            downward_metadata: Some(metadata(&pod)),
        };
        assert!(!volumes.downward_stale(&pod));
        pod.metadata.annotations = Some(BTreeMap::from([("b".into(), "2".into())]));
        assert!(volumes.downward_stale(&pod));
        assert!(
            !Volumes::default().downward_stale(&pod),
            "no downward volume"
        );
    }

    #[tokio::test]
    async fn mounts_follow_volume_mounts() {
        let dir = tempfile::tempdir().unwrap();
        let host = |name: &str, read_only: bool| HostPath {
            path: dir.path().join(name),
            read_only,
            managed: true,
        };
        let volumes = Volumes {
            host_paths: HashMap::from([
                ("cfg".to_owned(), host("cfg", true)),
                ("data".to_owned(), host("data", false)),
            ]),
            downward_metadata: None,
        };
        let mount = |name: &str, path: &str| VolumeMount {
            name: name.into(),
            mount_path: path.into(),
            ..Default::default()
        };
        let container = Container {
            name: "c".into(),
            volume_mounts: Some(vec![
                mount("cfg", "/etc/cfg"),
                VolumeMount {
                    sub_path_expr: Some("$(POD)".into()),
                    ..mount("data", "/data")
                },
            ]),
            ..Default::default()
        };
        let env = [("POD".to_owned(), "p1".to_owned())];
        let mounts = volumes.mounts(&container, &env).await.unwrap();
        let at = |p: &str| dir.path().join(p).to_string_lossy().into_owned();
        assert_eq!(
            mounts
                .iter()
                .map(|m| (m.container_path.as_str(), m.host_path.clone(), m.readonly))
                .collect::<Vec<_>>(),
            [
                ("/etc/cfg", at("cfg"), true),
                ("/data", at("data/p1"), false)
            ]
        );
        assert!(
            dir.path().join("data/p1").is_dir(),
            "the subPath was created"
        );
        let unknown = Container {
            volume_mounts: Some(vec![mount("nope", "/x")]),
            ..container
        };
        assert!(volumes.mounts(&unknown, &env).await.is_err());
    }
}
