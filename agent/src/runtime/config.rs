//! The sandbox and container configs the kubelet sends, and the pod's directory
//! (logs, termination-message files, volumes).

use std::collections::HashMap;
use std::path::PathBuf;

use k8s_openapi::api::core::v1::{Container as ContainerSpec, Pod};
use nodeconform_cri::v1 as cri;

use super::labels::*;
use super::security::{self, ImageUser};
use super::{Result, Runtime};
use crate::pod_hostname;

impl Runtime {
    /// The sandbox config the kubelet would send for `pod` (also needed by
    /// `CreateContainer`) with the pod's DNS config `dns`
    /// ([`crate::dns::Configurer::pod_dns`]); fails, as
    /// `generatePodSandboxConfig`, when the pod's host name cannot be made.
    pub fn sandbox_config(
        &self,
        pod: &Pod,
        attempt: u32,
        dns: cri::DnsConfig,
    ) -> Result<cri::PodSandboxConfig> {
        let meta = &pod.metadata;
        let name = meta.name.clone().unwrap_or_default();
        let namespace = meta.namespace.clone().unwrap_or_default();
        let uid = meta.uid.clone().unwrap_or_default();
        let mut labels: HashMap<String, String> = meta
            .labels
            .clone()
            .map(|l| l.into_iter().collect())
            .unwrap_or_default();
        labels.insert(POD_NAME_LABEL.into(), name.clone());
        labels.insert(POD_NAMESPACE_LABEL.into(), namespace.clone());
        labels.insert(POD_UID_LABEL.into(), uid.clone());
        let annotations: HashMap<String, String> = meta
            .annotations
            .clone()
            .map(|a| a.into_iter().collect())
            .unwrap_or_default();
        let spec = pod.spec.as_ref();
        let host_network = spec.and_then(|s| s.host_network) == Some(true);
        // A host-network sandbox keeps the node's name (the runtime sets it).
        let hostname = if host_network {
            String::new()
        } else {
            pod_hostname::sandbox_hostname(pod, &self.dns.cluster_domain)?
        };
        let pid_mode = if spec.and_then(|s| s.share_process_namespace) == Some(true) {
            cri::NamespaceMode::Pod
        } else {
            cri::NamespaceMode::Container
        };
        Ok(cri::PodSandboxConfig {
            metadata: Some(cri::PodSandboxMetadata {
                name: name.clone(),
                uid: uid.clone(),
                namespace: namespace.clone(),
                attempt,
            }),
            hostname,
            dns_config: Some(dns),
            log_directory: self.pod_log_dir(pod).to_string_lossy().into_owned(),
            labels,
            annotations,
            linux: Some(cri::LinuxPodSandboxConfig {
                security_context: Some(security::sandbox_context(
                    pod,
                    cri::NamespaceOption {
                        network: if host_network {
                            cri::NamespaceMode::Node as i32
                        } else {
                            cri::NamespaceMode::Pod as i32
                        },
                        pid: pid_mode as i32,
                        ipc: cri::NamespaceMode::Pod as i32,
                        ..Default::default()
                    },
                )),
                cgroup_parent: self.pod_cgroup(pod),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// Makes or resizes the pod's cgroup to the pod's allocation
    /// ([`CgroupManager::ensure_pod`]); nothing when the agent keeps no cgroups.
    ///
    /// [`CgroupManager::ensure_pod`]: crate::cgroup_manager::CgroupManager::ensure_pod
    pub fn ensure_pod_cgroup(&self, pod: &Pod) -> Result<(), crate::cgroup_manager::Error> {
        if let Some(cgroups) = &self.cgroups {
            let qos = crate::pod_status::qos_class(pod);
            cgroups.ensure_pod(pod, &qos, &super::PodConfig::of(pod, &qos).cgroup())?;
        }
        Ok(())
    }

    /// The pod's cgroup ([`CgroupManager::pod_cgroup`]); empty when the agent keeps
    /// none.
    ///
    /// [`CgroupManager::pod_cgroup`]: crate::cgroup_manager::CgroupManager::pod_cgroup
    pub fn pod_cgroup(&self, pod: &Pod) -> String {
        self.cgroups.as_ref().map_or_else(String::new, |cgroups| {
            cgroups.pod_cgroup(
                pod.metadata.uid.as_deref().unwrap_or_default(),
                &crate::pod_status::qos_class(pod),
            )
        })
    }

    /// The container config the kubelet would send for `container` of `pod`,
    /// whose image runs as `image_user` ([`Runtime::image_user`]); fails as
    /// `generateContainerConfig` does when the security context cannot be
    /// made (the caller checks `runAsNonRoot` first).
    pub fn container_config(
        &self,
        pod: &Pod,
        container: &ContainerSpec,
        restart_count: i32,
        env: Vec<(String, String)>,
        volume_mounts: Vec<cri::Mount>,
        image_user: &ImageUser,
    ) -> Result<cri::ContainerConfig, security::Error> {
        let meta = &pod.metadata;
        let mut labels = HashMap::new();
        labels.insert(POD_NAME_LABEL.into(), meta.name.clone().unwrap_or_default());
        labels.insert(
            POD_NAMESPACE_LABEL.into(),
            meta.namespace.clone().unwrap_or_default(),
        );
        labels.insert(POD_UID_LABEL.into(), meta.uid.clone().unwrap_or_default());
        labels.insert(CONTAINER_NAME_LABEL.into(), container.name.clone());
        let mut annotations = HashMap::new();
        annotations.insert(
            CONTAINER_HASH_ANNOTATION.into(),
            format!("{:x}", container_hash(container)),
        );
        annotations.insert(RESTART_COUNT_ANNOTATION.into(), restart_count.to_string());
        annotations.insert(
            TERMINATION_MESSAGE_PATH_ANNOTATION.into(),
            container
                .termination_message_path
                .clone()
                .unwrap_or_else(|| "/dev/termination-log".into()),
        );
        annotations.insert(
            TERMINATION_MESSAGE_POLICY_ANNOTATION.into(),
            container
                .termination_message_policy
                .clone()
                .unwrap_or_else(|| "File".into()),
        );
        if let Some(grace) = pod
            .spec
            .as_ref()
            .and_then(|s| s.termination_grace_period_seconds)
        {
            annotations.insert(TERMINATION_GRACE_ANNOTATION.into(), grace.to_string());
        }
        // The kubelet mounts a host file at terminationMessagePath for the
        // container to write its message into (created by `create_container`).
        let termination_path = container
            .termination_message_path
            .clone()
            .unwrap_or_else(|| "/dev/termination-log".into());
        let mut mounts = volume_mounts;
        mounts.push(cri::Mount {
            container_path: termination_path,
            host_path: self
                .termination_file(pod, &container.name, restart_count)
                .to_string_lossy()
                .into_owned(),
            ..Default::default()
        });
        let expand_all = |list: &Option<Vec<String>>| -> Vec<String> {
            list.iter()
                .flatten()
                .map(|a| crate::env::expand(a, &env))
                .collect()
        };
        let command = expand_all(&container.command);
        let args = expand_all(&container.args);
        let envs = env
            .into_iter()
            .map(|(key, value)| cri::KeyValue {
                key,
                value: value.into_bytes(),
            })
            .collect();
        let pid_mode = if pod.spec.as_ref().and_then(|s| s.share_process_namespace) == Some(true) {
            cri::NamespaceMode::Pod
        } else {
            cri::NamespaceMode::Container
        };
        let security_context = security::container_context(
            pod,
            container,
            image_user,
            &self.seccomp_root,
            cri::NamespaceOption {
                network: cri::NamespaceMode::Pod as i32,
                pid: pid_mode as i32,
                ipc: cri::NamespaceMode::Pod as i32,
                ..Default::default()
            },
        )?;
        Ok(cri::ContainerConfig {
            metadata: Some(cri::ContainerMetadata {
                name: container.name.clone(),
                attempt: u32::try_from(restart_count).unwrap_or(0),
            }),
            image: Some(cri::ImageSpec {
                image: container.image.clone().unwrap_or_default(),
                user_specified_image: container.image.clone().unwrap_or_default(),
                ..Default::default()
            }),
            command,
            args,
            working_dir: container.working_dir.clone().unwrap_or_default(),
            envs,
            mounts,
            labels,
            annotations,
            log_path: format!("{}/{restart_count}.log", container.name),
            stdin: container.stdin.unwrap_or(false),
            stdin_once: container.stdin_once.unwrap_or(false),
            tty: container.tty.unwrap_or(false),
            linux: Some(cri::LinuxContainerConfig {
                resources: Some(cri::LinuxContainerResources {
                    oom_score_adj: crate::qos_policy::container_oom_score_adjust(pod, container),
                    ..super::linux_resources(Some(&super::effective(pod, container)))
                }),
                security_context: Some(security_context),
            }),
            ..Default::default()
        })
    }

    /// The pod's directory (`<namespace>_<name>_<uid>`): termination-message files
    /// and volumes (and the container logs, unless they have a directory of their own).
    pub fn pod_dir(&self, pod: &Pod) -> PathBuf {
        self.pods_dir.join(pod_dir_name(pod))
    }

    /// The pod's log directory, the sandbox's `log_directory`.
    pub fn pod_log_dir(&self, pod: &Pod) -> PathBuf {
        self.pod_logs_dir.join(pod_dir_name(pod))
    }

    /// The host file for a container's termination message, beside its log:
    /// `<pods>/<namespace>_<name>_<uid>/<container>/<restart>.termination-log`.
    fn termination_file(&self, pod: &Pod, container: &str, restart_count: i32) -> PathBuf {
        self.pod_dir(pod)
            .join(container)
            .join(format!("{restart_count}.termination-log"))
    }
}

/// `<namespace>_<name>_<uid>`, the name of a pod's directories.
fn pod_dir_name(pod: &Pod) -> String {
    let meta = &pod.metadata;
    format!(
        "{}_{}_{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.uid.as_deref().unwrap_or_default()
    )
}
