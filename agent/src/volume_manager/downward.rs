//! The files of a downward-API volume (`pkg/volume/downwardapi`): pod fields by
//! `fieldRef`, and a container's resources by `resourceFieldRef` as
//! `pkg/api/v1/resource/helpers.go` computes them (divided by the `divisor`, default
//! `1`, rounded up; an unset limit is the node's allocatable).

use k8s_openapi::api::core::v1::{DownwardAPIVolumeFile, Pod};

use super::atomic_writer::{File, Payload};
use super::{file_mode, relative};
use crate::env::{self, Downward};
use crate::resource;

/// The payload of a downward-API volume (or projection) with `default_mode`.
pub(super) fn files(
    pod: &Pod,
    items: &[DownwardAPIVolumeFile],
    downward: Downward<'_>,
    default_mode: Option<i32>,
) -> Result<Payload, String> {
    let mut files = Payload::new();
    for item in items {
        let value = if let Some(field) = &item.field_ref {
            let map = match field.field_path.as_str() {
                "metadata.labels" => Some(pod.metadata.labels.clone().unwrap_or_default()),
                "metadata.annotations" => {
                    Some(pod.metadata.annotations.clone().unwrap_or_default())
                }
                _ => None,
            };
            match map {
                // `fieldpath.FormatMap`: sorted `key="value"` lines, values quoted like Go's %q.
                Some(map) => map
                    .iter()
                    .map(|(k, v)| format!("{k}={v:?}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                None => env::field_value(pod, &field.field_path, downward)
                    .ok_or_else(|| format!("unsupported fieldPath: {}", field.field_path))?,
            }
        } else if let Some(selector) = &item.resource_field_ref {
            // `ExtractResourceValueByContainerNameAndNodeAllocatable` (the API server
            // requires `containerName` here); limits default to the Node's allocatable.
            let allocatable = downward
                .allocatable
                .ok_or("failed to find node object, expected a node")?;
            let first = pod.spec.as_ref().and_then(|s| s.containers.first());
            let fallback = first.cloned().unwrap_or_default();
            resource::runtime_value(selector, pod, &fallback, allocatable)?
        } else {
            return Err(format!(
                "downward API volume file {:?}: neither fieldRef nor resourceFieldRef",
                item.path
            ));
        };
        files.insert(
            relative(&item.path)?,
            File {
                content: value.into_bytes(),
                mode: file_mode(item.mode, default_mode),
            },
        );
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        Container, ObjectFieldSelector, PodSpec, ResourceFieldSelector, ResourceRequirements,
    };
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    fn quantities(kv: &[(&str, &str)]) -> resource::List {
        kv.iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect()
    }

    fn item(
        path: &str,
        resource: &str,
        divisor: Option<&str>,
        mode: Option<i32>,
    ) -> DownwardAPIVolumeFile {
        DownwardAPIVolumeFile {
            path: path.into(),
            mode,
            resource_field_ref: Some(ResourceFieldSelector {
                container_name: Some("c".into()),
                resource: resource.into(),
                divisor: divisor.map(|d| Quantity(d.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn resource_files_round_up_with_limits_from_the_node_and_take_their_modes() {
        // The upstream pod: requests 250m/32Mi, limits 1250m/64Mi; one without limits.
        let pod = |limits: &[(&str, &str)]| Pod {
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    resources: Some(ResourceRequirements {
                        limits: Some(quantities(limits)),
                        requests: Some(quantities(&[("cpu", "250m"), ("memory", "32Mi")])),
                        ..Default::default()
                    }),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let allocatable = quantities(&[("cpu", "4"), ("memory", "8Gi")]);
        let downward = Downward {
            host_ip: None,
            pod_ip: None,
            allocatable: Some(&allocatable),
        };
        let items = [
            item("cpu_limit", "limits.cpu", Some("0"), Some(0o400)),
            item("cpu_request", "requests.cpu", Some("1m"), None),
            item("memory_limit", "limits.memory", Some("1Mi"), None),
        ];
        let text = |payload: &Payload, path: &str| {
            String::from_utf8(payload[std::path::Path::new(path)].content.clone()).unwrap()
        };
        let set = files(
            &pod(&[("cpu", "1250m"), ("memory", "64Mi")]),
            &items,
            downward,
            Some(0o644),
        )
        .unwrap();
        assert_eq!(text(&set, "cpu_limit"), "2");
        assert_eq!(set[std::path::Path::new("cpu_limit")].mode, 0o400);
        assert_eq!(text(&set, "cpu_request"), "250");
        assert_eq!(text(&set, "memory_limit"), "64");
        assert_eq!(set[std::path::Path::new("memory_limit")].mode, 0o644);
        let defaulted = files(&pod(&[]), &items, downward, None).unwrap();
        assert_eq!(text(&defaulted, "cpu_limit"), "4");
        assert_eq!(text(&defaulted, "memory_limit"), "8192");
        let no_node = Downward {
            allocatable: None,
            ..downward
        };
        assert_eq!(
            files(&pod(&[]), &items, no_node, None).unwrap_err(),
            "failed to find node object, expected a node"
        );
        let label = DownwardAPIVolumeFile {
            path: "labels".into(),
            field_ref: Some(ObjectFieldSelector {
                field_path: "metadata.labels".into(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let mut labelled = pod(&[]);
        labelled.metadata.labels = Some(
            [
                ("b".to_string(), "2".to_string()),
                ("a".to_string(), "1".to_string()),
            ]
            .into(),
        );
        let set = files(&labelled, &[label], downward, None).unwrap();
        assert_eq!(text(&set, "labels"), "a=\"1\"\nb=\"2\"");
    }
}
