//! A volume of a protobuf Pod: the sources a node's pods use (emptyDir,
//! hostPath, ConfigMap, Secret, downward API, projected, PVC); the in-tree
//! network and cloud volumes, CSI, ephemeral and image volumes are refused.

use k8s_pb::api::core::v1 as core;
use serde_json::Value;

use super::{Obj, field_selector, list, name_of, none, quantity, resource_selector};
use crate::status::Result;

fn key_to_paths(items: Vec<core::KeyToPath>) -> Value {
    items
        .into_iter()
        .map(|k| {
            Obj::default()
                .string("key", k.key)
                .string("path", k.path)
                .int("mode", k.mode.map(i64::from))
                .done()
        })
        .collect::<Vec<_>>()
        .into()
}

fn downward_files(items: Vec<core::DownwardAPIVolumeFile>) -> Value {
    items
        .into_iter()
        .map(|f| {
            Obj::default()
                .string("path", f.path)
                .value("fieldRef", field_selector(f.field_ref))
                .value("resourceFieldRef", resource_selector(f.resource_field_ref))
                .int("mode", f.mode.map(i64::from))
                .done()
        })
        .collect::<Vec<_>>()
        .into()
}

pub(super) fn volume(v: core::Volume) -> Result<Value> {
    let source = v.volume_source.unwrap_or_default();
    let core::VolumeSource {
        host_path,
        empty_dir,
        gce_persistent_disk,
        aws_elastic_block_store,
        git_repo,
        secret,
        nfs,
        iscsi,
        glusterfs,
        persistent_volume_claim,
        rbd,
        flex_volume,
        cinder,
        cephfs,
        flocker,
        downward_api,
        fc,
        azure_file,
        config_map,
        vsphere_volume,
        quobyte,
        azure_disk,
        photon_persistent_disk,
        projected,
        portworx_volume,
        scale_io,
        storageos,
        csi,
        ephemeral,
        image,
    } = source;
    for (set, field) in [
        (gce_persistent_disk.is_some(), "gcePersistentDisk"),
        (aws_elastic_block_store.is_some(), "awsElasticBlockStore"),
        (git_repo.is_some(), "gitRepo"),
        (nfs.is_some(), "nfs"),
        (iscsi.is_some(), "iscsi"),
        (glusterfs.is_some(), "glusterfs"),
        (rbd.is_some(), "rbd"),
        (flex_volume.is_some(), "flexVolume"),
        (cinder.is_some(), "cinder"),
        (cephfs.is_some(), "cephfs"),
        (flocker.is_some(), "flocker"),
        (fc.is_some(), "fc"),
        (azure_file.is_some(), "azureFile"),
        (vsphere_volume.is_some(), "vsphereVolume"),
        (quobyte.is_some(), "quobyte"),
        (azure_disk.is_some(), "azureDisk"),
        (photon_persistent_disk.is_some(), "photonPersistentDisk"),
        (portworx_volume.is_some(), "portworxVolume"),
        (scale_io.is_some(), "scaleIO"),
        (storageos.is_some(), "storageos"),
        (csi.is_some(), "csi"),
        (ephemeral.is_some(), "ephemeral"),
        (image.is_some(), "image"),
    ] {
        none(set, &format!("spec.volumes[].{field}"))?;
    }
    let projected = match projected {
        None => Value::Null,
        Some(p) => {
            let sources = list(p.sources, |s| {
                let core::VolumeProjection {
                    secret,
                    downward_api,
                    config_map,
                    service_account_token,
                    cluster_trust_bundle,
                    pod_certificate,
                } = s;
                none(
                    cluster_trust_bundle.is_some(),
                    "spec.volumes[].projected.sources[].clusterTrustBundle",
                )?;
                none(
                    pod_certificate.is_some(),
                    "spec.volumes[].projected.sources[].podCertificate",
                )?;
                let reference = |name: Option<String>, items, optional| {
                    Obj::default()
                        .string("name", name)
                        .value("items", key_to_paths(items))
                        .bool("optional", optional)
                        .done()
                };
                Ok(Obj::default()
                    .value(
                        "secret",
                        secret.map_or(Value::Null, |s| {
                            reference(name_of(s.local_object_reference), s.items, s.optional)
                        }),
                    )
                    .value(
                        "downwardAPI",
                        downward_api.map_or(Value::Null, |d| {
                            Obj::default()
                                .value("items", downward_files(d.items))
                                .done()
                        }),
                    )
                    .value(
                        "configMap",
                        config_map.map_or(Value::Null, |c| {
                            reference(name_of(c.local_object_reference), c.items, c.optional)
                        }),
                    )
                    .value(
                        "serviceAccountToken",
                        service_account_token.map_or(Value::Null, |t| {
                            Obj::default()
                                .string("audience", t.audience)
                                .int("expirationSeconds", t.expiration_seconds)
                                .string("path", t.path)
                                .done()
                        }),
                    )
                    .done())
            })?;
            Obj::default()
                .value("sources", sources)
                .int("defaultMode", p.default_mode.map(i64::from))
                .done()
        }
    };
    let mut out = Obj::default().string("name", v.name);
    // `emptyDir: {}` is a source even when it has nothing to say.
    if let Some(e) = empty_dir {
        let dir = Obj::default()
            .string("medium", e.medium)
            .value("sizeLimit", quantity(e.size_limit))
            .done();
        out.0.insert("emptyDir".into(), dir);
    }
    Ok(out
        .value(
            "hostPath",
            host_path.map_or(Value::Null, |h| {
                Obj::default()
                    .string("path", h.path)
                    .string("type", h.r#type)
                    .done()
            }),
        )
        .value(
            "secret",
            secret.map_or(Value::Null, |s| {
                Obj::default()
                    .string("secretName", s.secret_name)
                    .value("items", key_to_paths(s.items))
                    .int("defaultMode", s.default_mode.map(i64::from))
                    .bool("optional", s.optional)
                    .done()
            }),
        )
        .value(
            "persistentVolumeClaim",
            persistent_volume_claim.map_or(Value::Null, |c| {
                Obj::default()
                    .string("claimName", c.claim_name)
                    .bool_omitempty("readOnly", c.read_only)
                    .done()
            }),
        )
        .value(
            "downwardAPI",
            downward_api.map_or(Value::Null, |d| {
                Obj::default()
                    .value("items", downward_files(d.items))
                    .int("defaultMode", d.default_mode.map(i64::from))
                    .done()
            }),
        )
        .value(
            "configMap",
            config_map.map_or(Value::Null, |c| {
                Obj::default()
                    .string("name", name_of(c.local_object_reference))
                    .value("items", key_to_paths(c.items))
                    .int("defaultMode", c.default_mode.map(i64::from))
                    .bool("optional", c.optional)
                    .done()
            }),
        )
        .value("projected", projected)
        .done())
}
