//! How kube-apiserver v1.36.2 encodes the objects the double serves: every field of
//! their Go types with its JSON name and `omitempty`/`omitzero`, read from the struct tags
//! of `k8s.io/api` and `k8s.io/apimachinery` at that version. Data, not logic: see
//! [`super`] for what is done with it. Do not edit by hand: `apiserver/tests/schema/`
//! generates it (`NODECONFORM_K8S_SOURCES=<kubernetes v1.36.2>/staging/src/k8s.io
//! NODECONFORM_UPDATE_GENERATED=1 cargo test -p nodeconform-apiserver --test schema`).

#![allow(missing_docs)]

use super::{Field, Ty};

/// `authentication.BoundObjectReference`
pub static AUTHENTICATION_BOUND_OBJECT_REFERENCE: &[Field] = &[
    Field::new("kind", Ty::Str).omitempty(),
    Field::new("apiVersion", Ty::Str).omitempty(),
    Field::new("name", Ty::Str).omitempty(),
    Field::new("uid", Ty::Str).omitempty(),
];

/// `authentication.TokenRequest`
pub static AUTHENTICATION_TOKEN_REQUEST: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(AUTHENTICATION_TOKEN_REQUEST_SPEC)),
    Field::new("status", Ty::Struct(AUTHENTICATION_TOKEN_REQUEST_STATUS)).omitempty(),
];

/// `authentication.TokenRequestSpec`
pub static AUTHENTICATION_TOKEN_REQUEST_SPEC: &[Field] = &[
    Field::new("audiences", Ty::Slice(&Ty::Str)),
    Field::new("expirationSeconds", Ty::Ptr(&Ty::Int)),
    Field::new(
        "boundObjectRef",
        Ty::Ptr(&Ty::Struct(AUTHENTICATION_BOUND_OBJECT_REFERENCE)),
    ),
];

/// `authentication.TokenRequestStatus`
pub static AUTHENTICATION_TOKEN_REQUEST_STATUS: &[Field] = &[
    Field::new("token", Ty::Str),
    Field::new("expirationTimestamp", Ty::Time),
];

/// `coordination.Lease`
pub static COORDINATION_LEASE: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(COORDINATION_LEASE_SPEC)).omitempty(),
];

/// `coordination.LeaseSpec`
pub static COORDINATION_LEASE_SPEC: &[Field] = &[
    Field::new("holderIdentity", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("leaseDurationSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("acquireTime", Ty::Ptr(&Ty::MicroTime)).omitempty(),
    Field::new("renewTime", Ty::Ptr(&Ty::MicroTime)).omitempty(),
    Field::new("leaseTransitions", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("strategy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("preferredHolder", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.AWSElasticBlockStoreVolumeSource`
pub static CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE: &[Field] = &[
    Field::new("volumeID", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("partition", Ty::Int).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.Affinity`
pub static CORE_AFFINITY: &[Field] = &[
    Field::new("nodeAffinity", Ty::Ptr(&Ty::Struct(CORE_NODE_AFFINITY))).omitempty(),
    Field::new("podAffinity", Ty::Ptr(&Ty::Struct(CORE_POD_AFFINITY))).omitempty(),
    Field::new(
        "podAntiAffinity",
        Ty::Ptr(&Ty::Struct(CORE_POD_ANTI_AFFINITY)),
    )
    .omitempty(),
];

/// `core.AppArmorProfile`
pub static CORE_APP_ARMOR_PROFILE: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("localhostProfile", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.AttachedVolume`
pub static CORE_ATTACHED_VOLUME: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("devicePath", Ty::Str),
];

/// `core.AzureDiskVolumeSource`
pub static CORE_AZURE_DISK_VOLUME_SOURCE: &[Field] = &[
    Field::new("diskName", Ty::Str),
    Field::new("diskURI", Ty::Str),
    Field::new("cachingMode", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("fsType", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("readOnly", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("kind", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.AzureFileVolumeSource`
pub static CORE_AZURE_FILE_VOLUME_SOURCE: &[Field] = &[
    Field::new("secretName", Ty::Str),
    Field::new("shareName", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.CSIVolumeSource`
pub static CORE_CSI_VOLUME_SOURCE: &[Field] = &[
    Field::new("driver", Ty::Str),
    Field::new("readOnly", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("fsType", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("volumeAttributes", Ty::Map(&Ty::Str)).omitempty(),
    Field::new(
        "nodePublishSecretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
];

/// `core.Capabilities`
pub static CORE_CAPABILITIES: &[Field] = &[
    Field::new("add", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("drop", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.CephFSVolumeSource`
pub static CORE_CEPH_FS_VOLUME_SOURCE: &[Field] = &[
    Field::new("monitors", Ty::Slice(&Ty::Str)),
    Field::new("path", Ty::Str).omitempty(),
    Field::new("user", Ty::Str).omitempty(),
    Field::new("secretFile", Ty::Str).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.CinderVolumeSource`
pub static CORE_CINDER_VOLUME_SOURCE: &[Field] = &[
    Field::new("volumeID", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
];

/// `core.ClientIPConfig`
pub static CORE_CLIENT_IP_CONFIG: &[Field] =
    &[Field::new("timeoutSeconds", Ty::Ptr(&Ty::Int)).omitempty()];

/// `core.ClusterTrustBundleProjection`
pub static CORE_CLUSTER_TRUST_BUNDLE_PROJECTION: &[Field] = &[
    Field::new("name", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("signerName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("labelSelector", Ty::Ptr(&Ty::Struct(META_LABEL_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("path", Ty::Str),
];

/// `core.ConfigMap`
pub static CORE_CONFIG_MAP: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("immutable", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("data", Ty::Map(&Ty::Str)).omitempty(),
    Field::new("binaryData", Ty::Map(&Ty::Bytes)).omitempty(),
];

/// `core.ConfigMapEnvSource`
pub static CORE_CONFIG_MAP_ENV_SOURCE: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.ConfigMapKeySelector`
pub static CORE_CONFIG_MAP_KEY_SELECTOR: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("key", Ty::Str),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.ConfigMapNodeConfigSource`
pub static CORE_CONFIG_MAP_NODE_CONFIG_SOURCE: &[Field] = &[
    Field::new("namespace", Ty::Str),
    Field::new("name", Ty::Str),
    Field::new("uid", Ty::Str).omitempty(),
    Field::new("resourceVersion", Ty::Str).omitempty(),
    Field::new("kubeletConfigKey", Ty::Str),
];

/// `core.ConfigMapProjection`
pub static CORE_CONFIG_MAP_PROJECTION: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("items", Ty::Slice(&Ty::Struct(CORE_KEY_TO_PATH))).omitempty(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.ConfigMapVolumeSource`
pub static CORE_CONFIG_MAP_VOLUME_SOURCE: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("items", Ty::Slice(&Ty::Struct(CORE_KEY_TO_PATH))).omitempty(),
    Field::new("defaultMode", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.Container`
pub static CORE_CONTAINER: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("image", Ty::Str).omitempty(),
    Field::new("command", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("args", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("workingDir", Ty::Str).omitempty(),
    Field::new("ports", Ty::Slice(&Ty::Struct(CORE_CONTAINER_PORT)))
        .omitempty()
        .list_map(&["containerPort", "protocol"]),
    Field::new("envFrom", Ty::Slice(&Ty::Struct(CORE_ENV_FROM_SOURCE))).omitempty(),
    Field::new("env", Ty::Slice(&Ty::Struct(CORE_ENV_VAR)))
        .omitempty()
        .list_map(&["name"]),
    Field::new("resources", Ty::Struct(CORE_RESOURCE_REQUIREMENTS)).omitempty(),
    Field::new(
        "resizePolicy",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_RESIZE_POLICY)),
    )
    .omitempty(),
    Field::new("restartPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new(
        "restartPolicyRules",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_RESTART_RULE)),
    )
    .omitempty(),
    Field::new("volumeMounts", Ty::Slice(&Ty::Struct(CORE_VOLUME_MOUNT)))
        .omitempty()
        .list_map(&["mountPath"]),
    Field::new("volumeDevices", Ty::Slice(&Ty::Struct(CORE_VOLUME_DEVICE)))
        .omitempty()
        .list_map(&["devicePath"]),
    Field::new("livenessProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("readinessProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("startupProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("lifecycle", Ty::Ptr(&Ty::Struct(CORE_LIFECYCLE))).omitempty(),
    Field::new("terminationMessagePath", Ty::Str).omitempty(),
    Field::new("terminationMessagePolicy", Ty::Str).omitempty(),
    Field::new("imagePullPolicy", Ty::Str).omitempty(),
    Field::new(
        "securityContext",
        Ty::Ptr(&Ty::Struct(CORE_SECURITY_CONTEXT)),
    )
    .omitempty(),
    Field::new("stdin", Ty::Bool).omitempty(),
    Field::new("stdinOnce", Ty::Bool).omitempty(),
    Field::new("tty", Ty::Bool).omitempty(),
];

/// `core.ContainerExtendedResourceRequest`
pub static CORE_CONTAINER_EXTENDED_RESOURCE_REQUEST: &[Field] = &[
    Field::new("containerName", Ty::Str),
    Field::new("resourceName", Ty::Str),
    Field::new("requestName", Ty::Str),
];

/// `core.ContainerImage`
pub static CORE_CONTAINER_IMAGE: &[Field] = &[
    Field::new("names", Ty::Slice(&Ty::Str)),
    Field::new("sizeBytes", Ty::Int).omitempty(),
];

/// `core.ContainerPort`
pub static CORE_CONTAINER_PORT: &[Field] = &[
    Field::new("name", Ty::Str).omitempty(),
    Field::new("hostPort", Ty::Int).omitempty(),
    Field::new("containerPort", Ty::Int),
    Field::new("protocol", Ty::Str).omitempty(),
    Field::new("hostIP", Ty::Str).omitempty(),
];

/// `core.ContainerResizePolicy`
pub static CORE_CONTAINER_RESIZE_POLICY: &[Field] = &[
    Field::new("resourceName", Ty::Str),
    Field::new("restartPolicy", Ty::Str),
];

/// `core.ContainerRestartRule`
pub static CORE_CONTAINER_RESTART_RULE: &[Field] = &[
    Field::new("action", Ty::Str).omitempty(),
    Field::new(
        "exitCodes",
        Ty::Ptr(&Ty::Struct(CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES)),
    )
    .omitempty(),
];

/// `core.ContainerRestartRuleOnExitCodes`
pub static CORE_CONTAINER_RESTART_RULE_ON_EXIT_CODES: &[Field] = &[
    Field::new("operator", Ty::Str).omitempty(),
    Field::new("values", Ty::Slice(&Ty::Int))
        .omitempty()
        .list_set(),
];

/// `core.ContainerState`
pub static CORE_CONTAINER_STATE: &[Field] = &[
    Field::new(
        "waiting",
        Ty::Ptr(&Ty::Struct(CORE_CONTAINER_STATE_WAITING)),
    )
    .omitempty(),
    Field::new(
        "running",
        Ty::Ptr(&Ty::Struct(CORE_CONTAINER_STATE_RUNNING)),
    )
    .omitempty(),
    Field::new(
        "terminated",
        Ty::Ptr(&Ty::Struct(CORE_CONTAINER_STATE_TERMINATED)),
    )
    .omitempty(),
];

/// `core.ContainerStateRunning`
pub static CORE_CONTAINER_STATE_RUNNING: &[Field] =
    &[Field::new("startedAt", Ty::Time).omitempty()];

/// `core.ContainerStateTerminated`
pub static CORE_CONTAINER_STATE_TERMINATED: &[Field] = &[
    Field::new("exitCode", Ty::Int),
    Field::new("signal", Ty::Int).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
    Field::new("startedAt", Ty::Time).omitempty(),
    Field::new("finishedAt", Ty::Time).omitempty(),
    Field::new("containerID", Ty::Str).omitempty(),
];

/// `core.ContainerStateWaiting`
pub static CORE_CONTAINER_STATE_WAITING: &[Field] = &[
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
];

/// `core.ContainerStatus`
pub static CORE_CONTAINER_STATUS: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("state", Ty::Struct(CORE_CONTAINER_STATE)).omitempty(),
    Field::new("lastState", Ty::Struct(CORE_CONTAINER_STATE)).omitempty(),
    Field::new("ready", Ty::Bool),
    Field::new("restartCount", Ty::Int),
    Field::new("image", Ty::Str),
    Field::new("imageID", Ty::Str),
    Field::new("containerID", Ty::Str).omitempty(),
    Field::new("started", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("allocatedResources", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new(
        "resources",
        Ty::Ptr(&Ty::Struct(CORE_RESOURCE_REQUIREMENTS)),
    )
    .omitempty(),
    Field::new(
        "volumeMounts",
        Ty::Slice(&Ty::Struct(CORE_VOLUME_MOUNT_STATUS)),
    )
    .omitempty()
    .list_map(&["mountPath"]),
    Field::new("user", Ty::Ptr(&Ty::Struct(CORE_CONTAINER_USER))).omitempty(),
    Field::new(
        "allocatedResourcesStatus",
        Ty::Slice(&Ty::Struct(CORE_RESOURCE_STATUS)),
    )
    .omitempty()
    .list_map(&["name"]),
    Field::new("stopSignal", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.ContainerUser`
pub static CORE_CONTAINER_USER: &[Field] =
    &[Field::new("linux", Ty::Ptr(&Ty::Struct(CORE_LINUX_CONTAINER_USER))).omitempty()];

/// `core.DaemonEndpoint`
pub static CORE_DAEMON_ENDPOINT: &[Field] = &[Field::new("Port", Ty::Int)];

/// `core.DownwardAPIProjection`
pub static CORE_DOWNWARD_API_PROJECTION: &[Field] = &[Field::new(
    "items",
    Ty::Slice(&Ty::Struct(CORE_DOWNWARD_API_VOLUME_FILE)),
)
.omitempty()];

/// `core.DownwardAPIVolumeFile`
pub static CORE_DOWNWARD_API_VOLUME_FILE: &[Field] = &[
    Field::new("path", Ty::Str),
    Field::new("fieldRef", Ty::Ptr(&Ty::Struct(CORE_OBJECT_FIELD_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new(
        "resourceFieldRef",
        Ty::Ptr(&Ty::Struct(CORE_RESOURCE_FIELD_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new("mode", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.DownwardAPIVolumeSource`
pub static CORE_DOWNWARD_API_VOLUME_SOURCE: &[Field] = &[
    Field::new(
        "items",
        Ty::Slice(&Ty::Struct(CORE_DOWNWARD_API_VOLUME_FILE)),
    )
    .omitempty(),
    Field::new("defaultMode", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.EmptyDirVolumeSource`
pub static CORE_EMPTY_DIR_VOLUME_SOURCE: &[Field] = &[
    Field::new("medium", Ty::Str).omitempty(),
    Field::new("sizeLimit", Ty::Ptr(&Ty::Quantity)).omitempty(),
];

/// `core.EnvFromSource`
pub static CORE_ENV_FROM_SOURCE: &[Field] = &[
    Field::new("prefix", Ty::Str).omitempty(),
    Field::new(
        "configMapRef",
        Ty::Ptr(&Ty::Struct(CORE_CONFIG_MAP_ENV_SOURCE)),
    )
    .omitempty(),
    Field::new("secretRef", Ty::Ptr(&Ty::Struct(CORE_SECRET_ENV_SOURCE))).omitempty(),
];

/// `core.EnvVar`
pub static CORE_ENV_VAR: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("value", Ty::Str).omitempty(),
    Field::new("valueFrom", Ty::Ptr(&Ty::Struct(CORE_ENV_VAR_SOURCE))).omitempty(),
];

/// `core.EnvVarSource`
pub static CORE_ENV_VAR_SOURCE: &[Field] = &[
    Field::new("fieldRef", Ty::Ptr(&Ty::Struct(CORE_OBJECT_FIELD_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new(
        "resourceFieldRef",
        Ty::Ptr(&Ty::Struct(CORE_RESOURCE_FIELD_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new(
        "configMapKeyRef",
        Ty::Ptr(&Ty::Struct(CORE_CONFIG_MAP_KEY_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new(
        "secretKeyRef",
        Ty::Ptr(&Ty::Struct(CORE_SECRET_KEY_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new("fileKeyRef", Ty::Ptr(&Ty::Struct(CORE_FILE_KEY_SELECTOR)))
        .omitempty()
        .atomic(),
];

/// `core.EphemeralContainer`
pub static CORE_EPHEMERAL_CONTAINER: &[Field] = &[
    Field::new("", Ty::Struct(CORE_EPHEMERAL_CONTAINER_COMMON)).inline(),
    Field::new("targetContainerName", Ty::Str).omitempty(),
];

/// `core.EphemeralContainerCommon`
pub static CORE_EPHEMERAL_CONTAINER_COMMON: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("image", Ty::Str).omitempty(),
    Field::new("command", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("args", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("workingDir", Ty::Str).omitempty(),
    Field::new("ports", Ty::Slice(&Ty::Struct(CORE_CONTAINER_PORT)))
        .omitempty()
        .list_map(&["containerPort", "protocol"]),
    Field::new("envFrom", Ty::Slice(&Ty::Struct(CORE_ENV_FROM_SOURCE))).omitempty(),
    Field::new("env", Ty::Slice(&Ty::Struct(CORE_ENV_VAR)))
        .omitempty()
        .list_map(&["name"]),
    Field::new("resources", Ty::Struct(CORE_RESOURCE_REQUIREMENTS)).omitempty(),
    Field::new(
        "resizePolicy",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_RESIZE_POLICY)),
    )
    .omitempty(),
    Field::new("restartPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new(
        "restartPolicyRules",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_RESTART_RULE)),
    )
    .omitempty(),
    Field::new("volumeMounts", Ty::Slice(&Ty::Struct(CORE_VOLUME_MOUNT)))
        .omitempty()
        .list_map(&["mountPath"]),
    Field::new("volumeDevices", Ty::Slice(&Ty::Struct(CORE_VOLUME_DEVICE)))
        .omitempty()
        .list_map(&["devicePath"]),
    Field::new("livenessProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("readinessProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("startupProbe", Ty::Ptr(&Ty::Struct(CORE_PROBE))).omitempty(),
    Field::new("lifecycle", Ty::Ptr(&Ty::Struct(CORE_LIFECYCLE))).omitempty(),
    Field::new("terminationMessagePath", Ty::Str).omitempty(),
    Field::new("terminationMessagePolicy", Ty::Str).omitempty(),
    Field::new("imagePullPolicy", Ty::Str).omitempty(),
    Field::new(
        "securityContext",
        Ty::Ptr(&Ty::Struct(CORE_SECURITY_CONTEXT)),
    )
    .omitempty(),
    Field::new("stdin", Ty::Bool).omitempty(),
    Field::new("stdinOnce", Ty::Bool).omitempty(),
    Field::new("tty", Ty::Bool).omitempty(),
];

/// `core.EphemeralVolumeSource`
pub static CORE_EPHEMERAL_VOLUME_SOURCE: &[Field] = &[Field::new(
    "volumeClaimTemplate",
    Ty::Ptr(&Ty::Struct(CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE)),
)
.omitempty()];

/// `core.Event`
pub static CORE_EVENT: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)),
    Field::new("involvedObject", Ty::Struct(CORE_OBJECT_REFERENCE)).atomic(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
    Field::new("source", Ty::Struct(CORE_EVENT_SOURCE)).omitempty(),
    Field::new("firstTimestamp", Ty::Time).omitempty(),
    Field::new("lastTimestamp", Ty::Time).omitempty(),
    Field::new("count", Ty::Int).omitempty(),
    Field::new("type", Ty::Str).omitempty(),
    Field::new("eventTime", Ty::MicroTime).omitempty(),
    Field::new("series", Ty::Ptr(&Ty::Struct(CORE_EVENT_SERIES))).omitempty(),
    Field::new("action", Ty::Str).omitempty(),
    Field::new("related", Ty::Ptr(&Ty::Struct(CORE_OBJECT_REFERENCE)))
        .omitempty()
        .atomic(),
    Field::new("reportingComponent", Ty::Str),
    Field::new("reportingInstance", Ty::Str),
];

/// `core.EventSeries`
pub static CORE_EVENT_SERIES: &[Field] = &[
    Field::new("count", Ty::Int).omitempty(),
    Field::new("lastObservedTime", Ty::MicroTime).omitempty(),
];

/// `core.EventSource`
pub static CORE_EVENT_SOURCE: &[Field] = &[
    Field::new("component", Ty::Str).omitempty(),
    Field::new("host", Ty::Str).omitempty(),
];

/// `core.ExecAction`
pub static CORE_EXEC_ACTION: &[Field] = &[Field::new("command", Ty::Slice(&Ty::Str)).omitempty()];

/// `core.FCVolumeSource`
pub static CORE_FC_VOLUME_SOURCE: &[Field] = &[
    Field::new("targetWWNs", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("lun", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("wwids", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.FileKeySelector`
pub static CORE_FILE_KEY_SELECTOR: &[Field] = &[
    Field::new("volumeName", Ty::Str),
    Field::new("path", Ty::Str),
    Field::new("key", Ty::Str),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.FlexVolumeSource`
pub static CORE_FLEX_VOLUME_SOURCE: &[Field] = &[
    Field::new("driver", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("options", Ty::Map(&Ty::Str)).omitempty(),
];

/// `core.FlockerVolumeSource`
pub static CORE_FLOCKER_VOLUME_SOURCE: &[Field] = &[
    Field::new("datasetName", Ty::Str).omitempty(),
    Field::new("datasetUUID", Ty::Str).omitempty(),
];

/// `core.GCEPersistentDiskVolumeSource`
pub static CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] = &[
    Field::new("pdName", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("partition", Ty::Int).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.GRPCAction`
pub static CORE_GRPC_ACTION: &[Field] = &[
    Field::new("port", Ty::Int),
    Field::new("service", Ty::Ptr(&Ty::Str)),
];

/// `core.GitRepoVolumeSource`
pub static CORE_GIT_REPO_VOLUME_SOURCE: &[Field] = &[
    Field::new("repository", Ty::Str),
    Field::new("revision", Ty::Str).omitempty(),
    Field::new("directory", Ty::Str).omitempty(),
];

/// `core.GlusterfsVolumeSource`
pub static CORE_GLUSTERFS_VOLUME_SOURCE: &[Field] = &[
    Field::new("endpoints", Ty::Str),
    Field::new("path", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.HTTPGetAction`
pub static CORE_HTTP_GET_ACTION: &[Field] = &[
    Field::new("path", Ty::Str).omitempty(),
    Field::new("port", Ty::IntOrString),
    Field::new("host", Ty::Str).omitempty(),
    Field::new("scheme", Ty::Str).omitempty(),
    Field::new("httpHeaders", Ty::Slice(&Ty::Struct(CORE_HTTP_HEADER))).omitempty(),
];

/// `core.HTTPHeader`
pub static CORE_HTTP_HEADER: &[Field] =
    &[Field::new("name", Ty::Str), Field::new("value", Ty::Str)];

/// `core.HostAlias`
pub static CORE_HOST_ALIAS: &[Field] = &[
    Field::new("ip", Ty::Str),
    Field::new("hostnames", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.HostIP`
pub static CORE_HOST_IP: &[Field] = &[Field::new("ip", Ty::Str)];

/// `core.HostPathVolumeSource`
pub static CORE_HOST_PATH_VOLUME_SOURCE: &[Field] = &[
    Field::new("path", Ty::Str),
    Field::new("type", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.ISCSIVolumeSource`
pub static CORE_ISCSI_VOLUME_SOURCE: &[Field] = &[
    Field::new("targetPortal", Ty::Str),
    Field::new("iqn", Ty::Str),
    Field::new("lun", Ty::Int),
    Field::new("iscsiInterface", Ty::Str).omitempty(),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("portals", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("chapAuthDiscovery", Ty::Bool).omitempty(),
    Field::new("chapAuthSession", Ty::Bool).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
    Field::new("initiatorName", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.ImageVolumeSource`
pub static CORE_IMAGE_VOLUME_SOURCE: &[Field] = &[
    Field::new("reference", Ty::Str).omitempty(),
    Field::new("pullPolicy", Ty::Str).omitempty(),
];

/// `core.ImageVolumeStatus`
pub static CORE_IMAGE_VOLUME_STATUS: &[Field] = &[Field::new("imageRef", Ty::Str).omitempty()];

/// `core.KeyToPath`
pub static CORE_KEY_TO_PATH: &[Field] = &[
    Field::new("key", Ty::Str),
    Field::new("path", Ty::Str),
    Field::new("mode", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.Lifecycle`
pub static CORE_LIFECYCLE: &[Field] = &[
    Field::new("postStart", Ty::Ptr(&Ty::Struct(CORE_LIFECYCLE_HANDLER))).omitempty(),
    Field::new("preStop", Ty::Ptr(&Ty::Struct(CORE_LIFECYCLE_HANDLER))).omitempty(),
    Field::new("stopSignal", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.LifecycleHandler`
pub static CORE_LIFECYCLE_HANDLER: &[Field] = &[
    Field::new("exec", Ty::Ptr(&Ty::Struct(CORE_EXEC_ACTION))).omitempty(),
    Field::new("httpGet", Ty::Ptr(&Ty::Struct(CORE_HTTP_GET_ACTION))).omitempty(),
    Field::new("tcpSocket", Ty::Ptr(&Ty::Struct(CORE_TCP_SOCKET_ACTION))).omitempty(),
    Field::new("sleep", Ty::Ptr(&Ty::Struct(CORE_SLEEP_ACTION))).omitempty(),
];

/// `core.LinuxContainerUser`
pub static CORE_LINUX_CONTAINER_USER: &[Field] = &[
    Field::new("uid", Ty::Int),
    Field::new("gid", Ty::Int),
    Field::new("supplementalGroups", Ty::Slice(&Ty::Int)).omitempty(),
];

/// `core.LoadBalancerIngress`
pub static CORE_LOAD_BALANCER_INGRESS: &[Field] = &[
    Field::new("ip", Ty::Str).omitempty(),
    Field::new("hostname", Ty::Str).omitempty(),
    Field::new("ipMode", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("ports", Ty::Slice(&Ty::Struct(CORE_PORT_STATUS))).omitempty(),
];

/// `core.LoadBalancerStatus`
pub static CORE_LOAD_BALANCER_STATUS: &[Field] = &[Field::new(
    "ingress",
    Ty::Slice(&Ty::Struct(CORE_LOAD_BALANCER_INGRESS)),
)
.omitempty()];

/// `core.LocalObjectReference`
pub static CORE_LOCAL_OBJECT_REFERENCE: &[Field] = &[Field::new("name", Ty::Str).omitempty()];

/// `core.NFSVolumeSource`
pub static CORE_NFS_VOLUME_SOURCE: &[Field] = &[
    Field::new("server", Ty::Str),
    Field::new("path", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.Namespace`
pub static CORE_NAMESPACE: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(CORE_NAMESPACE_SPEC)).omitempty(),
    Field::new("status", Ty::Struct(CORE_NAMESPACE_STATUS)).omitempty(),
];

/// `core.NamespaceCondition`
pub static CORE_NAMESPACE_CONDITION: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("status", Ty::Str),
    Field::new("lastTransitionTime", Ty::Time).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
];

/// `core.NamespaceSpec`
pub static CORE_NAMESPACE_SPEC: &[Field] =
    &[Field::new("finalizers", Ty::Slice(&Ty::Str)).omitempty()];

/// `core.NamespaceStatus`
pub static CORE_NAMESPACE_STATUS: &[Field] = &[
    Field::new("phase", Ty::Str).omitempty(),
    Field::new(
        "conditions",
        Ty::Slice(&Ty::Struct(CORE_NAMESPACE_CONDITION)),
    )
    .omitempty()
    .list_map(&["type"]),
];

/// `core.Node`
pub static CORE_NODE: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(CORE_NODE_SPEC)).omitempty(),
    Field::new("status", Ty::Struct(CORE_NODE_STATUS)).omitempty(),
];

/// `core.NodeAddress`
pub static CORE_NODE_ADDRESS: &[Field] =
    &[Field::new("type", Ty::Str), Field::new("address", Ty::Str)];

/// `core.NodeAffinity`
pub static CORE_NODE_AFFINITY: &[Field] = &[
    Field::new(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Ptr(&Ty::Struct(CORE_NODE_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Slice(&Ty::Struct(CORE_PREFERRED_SCHEDULING_TERM)),
    )
    .omitempty(),
];

/// `core.NodeAllocatableResourceClaimStatus`
pub static CORE_NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS: &[Field] = &[
    Field::new("resourceClaimName", Ty::Str),
    Field::new("containers", Ty::Slice(&Ty::Str))
        .omitempty()
        .list_set(),
    Field::new("resources", Ty::Map(&Ty::Quantity)),
];

/// `core.NodeCondition`
pub static CORE_NODE_CONDITION: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("status", Ty::Str),
    Field::new("lastHeartbeatTime", Ty::Time).omitempty(),
    Field::new("lastTransitionTime", Ty::Time).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
];

/// `core.NodeConfigSource`
pub static CORE_NODE_CONFIG_SOURCE: &[Field] = &[Field::new(
    "configMap",
    Ty::Ptr(&Ty::Struct(CORE_CONFIG_MAP_NODE_CONFIG_SOURCE)),
)
.omitempty()];

/// `core.NodeConfigStatus`
pub static CORE_NODE_CONFIG_STATUS: &[Field] = &[
    Field::new("assigned", Ty::Ptr(&Ty::Struct(CORE_NODE_CONFIG_SOURCE))).omitempty(),
    Field::new("active", Ty::Ptr(&Ty::Struct(CORE_NODE_CONFIG_SOURCE))).omitempty(),
    Field::new(
        "lastKnownGood",
        Ty::Ptr(&Ty::Struct(CORE_NODE_CONFIG_SOURCE)),
    )
    .omitempty(),
    Field::new("error", Ty::Str).omitempty(),
];

/// `core.NodeDaemonEndpoints`
pub static CORE_NODE_DAEMON_ENDPOINTS: &[Field] =
    &[Field::new("kubeletEndpoint", Ty::Struct(CORE_DAEMON_ENDPOINT)).omitempty()];

/// `core.NodeFeatures`
pub static CORE_NODE_FEATURES: &[Field] =
    &[Field::new("supplementalGroupsPolicy", Ty::Ptr(&Ty::Bool)).omitempty()];

/// `core.NodeRuntimeHandler`
pub static CORE_NODE_RUNTIME_HANDLER: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new(
        "features",
        Ty::Ptr(&Ty::Struct(CORE_NODE_RUNTIME_HANDLER_FEATURES)),
    )
    .omitempty(),
];

/// `core.NodeRuntimeHandlerFeatures`
pub static CORE_NODE_RUNTIME_HANDLER_FEATURES: &[Field] = &[
    Field::new("recursiveReadOnlyMounts", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("userNamespaces", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.NodeSelector`
pub static CORE_NODE_SELECTOR: &[Field] = &[Field::new(
    "nodeSelectorTerms",
    Ty::Slice(&Ty::Struct(CORE_NODE_SELECTOR_TERM)),
)];

/// `core.NodeSelectorRequirement`
pub static CORE_NODE_SELECTOR_REQUIREMENT: &[Field] = &[
    Field::new("key", Ty::Str),
    Field::new("operator", Ty::Str),
    Field::new("values", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.NodeSelectorTerm`
pub static CORE_NODE_SELECTOR_TERM: &[Field] = &[
    Field::new(
        "matchExpressions",
        Ty::Slice(&Ty::Struct(CORE_NODE_SELECTOR_REQUIREMENT)),
    )
    .omitempty(),
    Field::new(
        "matchFields",
        Ty::Slice(&Ty::Struct(CORE_NODE_SELECTOR_REQUIREMENT)),
    )
    .omitempty(),
];

/// `core.NodeSpec`
pub static CORE_NODE_SPEC: &[Field] = &[
    Field::new("podCIDR", Ty::Str).omitempty(),
    Field::new("podCIDRs", Ty::Slice(&Ty::Str))
        .omitempty()
        .list_set(),
    Field::new("providerID", Ty::Str).omitempty(),
    Field::new("unschedulable", Ty::Bool).omitempty(),
    Field::new("taints", Ty::Slice(&Ty::Struct(CORE_TAINT))).omitempty(),
    Field::new(
        "configSource",
        Ty::Ptr(&Ty::Struct(CORE_NODE_CONFIG_SOURCE)),
    )
    .omitempty(),
    Field::new("externalID", Ty::Str).omitempty(),
];

/// `core.NodeStatus`
pub static CORE_NODE_STATUS: &[Field] = &[
    Field::new("capacity", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new("allocatable", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new("phase", Ty::Str).omitempty(),
    Field::new("conditions", Ty::Slice(&Ty::Struct(CORE_NODE_CONDITION)))
        .omitempty()
        .list_map(&["type"]),
    Field::new("addresses", Ty::Slice(&Ty::Struct(CORE_NODE_ADDRESS)))
        .omitempty()
        .list_map(&["type"]),
    Field::new("daemonEndpoints", Ty::Struct(CORE_NODE_DAEMON_ENDPOINTS)).omitempty(),
    Field::new("nodeInfo", Ty::Struct(CORE_NODE_SYSTEM_INFO)).omitempty(),
    Field::new("images", Ty::Slice(&Ty::Struct(CORE_CONTAINER_IMAGE))).omitempty(),
    Field::new("volumesInUse", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new(
        "volumesAttached",
        Ty::Slice(&Ty::Struct(CORE_ATTACHED_VOLUME)),
    )
    .omitempty(),
    Field::new("config", Ty::Ptr(&Ty::Struct(CORE_NODE_CONFIG_STATUS))).omitempty(),
    Field::new(
        "runtimeHandlers",
        Ty::Slice(&Ty::Struct(CORE_NODE_RUNTIME_HANDLER)),
    )
    .omitempty(),
    Field::new("features", Ty::Ptr(&Ty::Struct(CORE_NODE_FEATURES))).omitempty(),
    Field::new("declaredFeatures", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.NodeSwapStatus`
pub static CORE_NODE_SWAP_STATUS: &[Field] =
    &[Field::new("capacity", Ty::Ptr(&Ty::Int)).omitempty()];

/// `core.NodeSystemInfo`
pub static CORE_NODE_SYSTEM_INFO: &[Field] = &[
    Field::new("machineID", Ty::Str),
    Field::new("systemUUID", Ty::Str),
    Field::new("bootID", Ty::Str),
    Field::new("kernelVersion", Ty::Str),
    Field::new("osImage", Ty::Str),
    Field::new("containerRuntimeVersion", Ty::Str),
    Field::new("kubeletVersion", Ty::Str),
    Field::new("kubeProxyVersion", Ty::Str),
    Field::new("operatingSystem", Ty::Str),
    Field::new("architecture", Ty::Str),
    Field::new("swap", Ty::Ptr(&Ty::Struct(CORE_NODE_SWAP_STATUS))).omitempty(),
];

/// `core.ObjectFieldSelector`
pub static CORE_OBJECT_FIELD_SELECTOR: &[Field] = &[
    Field::new("apiVersion", Ty::Str).omitempty(),
    Field::new("fieldPath", Ty::Str),
];

/// `core.ObjectReference`
pub static CORE_OBJECT_REFERENCE: &[Field] = &[
    Field::new("kind", Ty::Str).omitempty(),
    Field::new("namespace", Ty::Str).omitempty(),
    Field::new("name", Ty::Str).omitempty(),
    Field::new("uid", Ty::Str).omitempty(),
    Field::new("apiVersion", Ty::Str).omitempty(),
    Field::new("resourceVersion", Ty::Str).omitempty(),
    Field::new("fieldPath", Ty::Str).omitempty(),
];

/// `core.PersistentVolumeClaimSpec`
pub static CORE_PERSISTENT_VOLUME_CLAIM_SPEC: &[Field] = &[
    Field::new("accessModes", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("selector", Ty::Ptr(&Ty::Struct(META_LABEL_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new("resources", Ty::Struct(CORE_VOLUME_RESOURCE_REQUIREMENTS)).omitempty(),
    Field::new("volumeName", Ty::Str).omitempty(),
    Field::new("storageClassName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("volumeMode", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new(
        "dataSource",
        Ty::Ptr(&Ty::Struct(CORE_TYPED_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
    Field::new(
        "dataSourceRef",
        Ty::Ptr(&Ty::Struct(CORE_TYPED_OBJECT_REFERENCE)),
    )
    .omitempty(),
    Field::new("volumeAttributesClassName", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PersistentVolumeClaimTemplate`
pub static CORE_PERSISTENT_VOLUME_CLAIM_TEMPLATE: &[Field] = &[
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(CORE_PERSISTENT_VOLUME_CLAIM_SPEC)),
];

/// `core.PersistentVolumeClaimVolumeSource`
pub static CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE: &[Field] = &[
    Field::new("claimName", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.PhotonPersistentDiskVolumeSource`
pub static CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE: &[Field] = &[
    Field::new("pdID", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
];

/// `core.Pod`
pub static CORE_POD: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(CORE_POD_SPEC)).omitempty(),
    Field::new("status", Ty::Struct(CORE_POD_STATUS)).omitempty(),
];

/// `core.PodAffinity`
pub static CORE_POD_AFFINITY: &[Field] = &[
    Field::new(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Slice(&Ty::Struct(CORE_POD_AFFINITY_TERM)),
    )
    .omitempty(),
    Field::new(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Slice(&Ty::Struct(CORE_WEIGHTED_POD_AFFINITY_TERM)),
    )
    .omitempty(),
];

/// `core.PodAffinityTerm`
pub static CORE_POD_AFFINITY_TERM: &[Field] = &[
    Field::new("labelSelector", Ty::Ptr(&Ty::Struct(META_LABEL_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new("namespaces", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("topologyKey", Ty::Str),
    Field::new(
        "namespaceSelector",
        Ty::Ptr(&Ty::Struct(META_LABEL_SELECTOR)),
    )
    .omitempty()
    .atomic(),
    Field::new("matchLabelKeys", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("mismatchLabelKeys", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.PodAntiAffinity`
pub static CORE_POD_ANTI_AFFINITY: &[Field] = &[
    Field::new(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Ty::Slice(&Ty::Struct(CORE_POD_AFFINITY_TERM)),
    )
    .omitempty(),
    Field::new(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Ty::Slice(&Ty::Struct(CORE_WEIGHTED_POD_AFFINITY_TERM)),
    )
    .omitempty(),
];

/// `core.PodCertificateProjection`
pub static CORE_POD_CERTIFICATE_PROJECTION: &[Field] = &[
    Field::new("signerName", Ty::Str).omitempty(),
    Field::new("keyType", Ty::Str).omitempty(),
    Field::new("maxExpirationSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("credentialBundlePath", Ty::Str).omitempty(),
    Field::new("keyPath", Ty::Str).omitempty(),
    Field::new("certificateChainPath", Ty::Str).omitempty(),
    Field::new("userAnnotations", Ty::Map(&Ty::Str)).omitempty(),
];

/// `core.PodCondition`
pub static CORE_POD_CONDITION: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("observedGeneration", Ty::Int).omitempty(),
    Field::new("status", Ty::Str),
    Field::new("lastProbeTime", Ty::Time).omitempty(),
    Field::new("lastTransitionTime", Ty::Time).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("message", Ty::Str).omitempty(),
];

/// `core.PodDNSConfig`
pub static CORE_POD_DNS_CONFIG: &[Field] = &[
    Field::new("nameservers", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("searches", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new(
        "options",
        Ty::Slice(&Ty::Struct(CORE_POD_DNS_CONFIG_OPTION)),
    )
    .omitempty(),
];

/// `core.PodDNSConfigOption`
pub static CORE_POD_DNS_CONFIG_OPTION: &[Field] = &[
    Field::new("name", Ty::Str).omitempty(),
    Field::new("value", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PodExtendedResourceClaimStatus`
pub static CORE_POD_EXTENDED_RESOURCE_CLAIM_STATUS: &[Field] = &[
    Field::new(
        "requestMappings",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_EXTENDED_RESOURCE_REQUEST)),
    ),
    Field::new("resourceClaimName", Ty::Str),
];

/// `core.PodIP`
pub static CORE_POD_IP: &[Field] = &[Field::new("ip", Ty::Str)];

/// `core.PodOS`
pub static CORE_POD_OS: &[Field] = &[Field::new("name", Ty::Str)];

/// `core.PodReadinessGate`
pub static CORE_POD_READINESS_GATE: &[Field] = &[Field::new("conditionType", Ty::Str)];

/// `core.PodResourceClaim`
pub static CORE_POD_RESOURCE_CLAIM: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("resourceClaimName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("resourceClaimTemplateName", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PodResourceClaimStatus`
pub static CORE_POD_RESOURCE_CLAIM_STATUS: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("resourceClaimName", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PodSchedulingGate`
pub static CORE_POD_SCHEDULING_GATE: &[Field] = &[Field::new("name", Ty::Str)];

/// `core.PodSchedulingGroup`
pub static CORE_POD_SCHEDULING_GROUP: &[Field] =
    &[Field::new("podGroupName", Ty::Ptr(&Ty::Str)).omitempty()];

/// `core.PodSecurityContext`
pub static CORE_POD_SECURITY_CONTEXT: &[Field] = &[
    Field::new(
        "seLinuxOptions",
        Ty::Ptr(&Ty::Struct(CORE_SE_LINUX_OPTIONS)),
    )
    .omitempty(),
    Field::new(
        "windowsOptions",
        Ty::Ptr(&Ty::Struct(CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    )
    .omitempty(),
    Field::new("runAsUser", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("runAsGroup", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("runAsNonRoot", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("supplementalGroups", Ty::Slice(&Ty::Int)).omitempty(),
    Field::new("supplementalGroupsPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("fsGroup", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("sysctls", Ty::Slice(&Ty::Struct(CORE_SYSCTL))).omitempty(),
    Field::new("fsGroupChangePolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("seccompProfile", Ty::Ptr(&Ty::Struct(CORE_SECCOMP_PROFILE))).omitempty(),
    Field::new(
        "appArmorProfile",
        Ty::Ptr(&Ty::Struct(CORE_APP_ARMOR_PROFILE)),
    )
    .omitempty(),
    Field::new("seLinuxChangePolicy", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PodSpec`
pub static CORE_POD_SPEC: &[Field] = &[
    Field::new("volumes", Ty::Slice(&Ty::Struct(CORE_VOLUME)))
        .omitempty()
        .list_map(&["name"]),
    Field::new("initContainers", Ty::Slice(&Ty::Struct(CORE_CONTAINER)))
        .omitempty()
        .list_map(&["name"]),
    Field::new("containers", Ty::Slice(&Ty::Struct(CORE_CONTAINER))).list_map(&["name"]),
    Field::new(
        "ephemeralContainers",
        Ty::Slice(&Ty::Struct(CORE_EPHEMERAL_CONTAINER)),
    )
    .omitempty()
    .list_map(&["name"]),
    Field::new("restartPolicy", Ty::Str).omitempty(),
    Field::new("terminationGracePeriodSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("activeDeadlineSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("dnsPolicy", Ty::Str).omitempty(),
    Field::new("nodeSelector", Ty::Map(&Ty::Str))
        .omitempty()
        .atomic(),
    Field::new("serviceAccountName", Ty::Str).omitempty(),
    Field::new("serviceAccount", Ty::Str).omitempty(),
    Field::new("automountServiceAccountToken", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("nodeName", Ty::Str).omitempty(),
    Field::new("hostNetwork", Ty::Bool).omitempty(),
    Field::new("hostPID", Ty::Bool).omitempty(),
    Field::new("hostIPC", Ty::Bool).omitempty(),
    Field::new("shareProcessNamespace", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new(
        "securityContext",
        Ty::Ptr(&Ty::Struct(CORE_POD_SECURITY_CONTEXT)),
    )
    .omitempty(),
    Field::new(
        "imagePullSecrets",
        Ty::Slice(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .list_map(&["name"])
    .atomic(),
    Field::new("hostname", Ty::Str).omitempty(),
    Field::new("subdomain", Ty::Str).omitempty(),
    Field::new("affinity", Ty::Ptr(&Ty::Struct(CORE_AFFINITY))).omitempty(),
    Field::new("schedulerName", Ty::Str).omitempty(),
    Field::new("tolerations", Ty::Slice(&Ty::Struct(CORE_TOLERATION))).omitempty(),
    Field::new("hostAliases", Ty::Slice(&Ty::Struct(CORE_HOST_ALIAS)))
        .omitempty()
        .list_map(&["ip"]),
    Field::new("priorityClassName", Ty::Str).omitempty(),
    Field::new("priority", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("dnsConfig", Ty::Ptr(&Ty::Struct(CORE_POD_DNS_CONFIG))).omitempty(),
    Field::new(
        "readinessGates",
        Ty::Slice(&Ty::Struct(CORE_POD_READINESS_GATE)),
    )
    .omitempty(),
    Field::new("runtimeClassName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("enableServiceLinks", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("preemptionPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("overhead", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new(
        "topologySpreadConstraints",
        Ty::Slice(&Ty::Struct(CORE_TOPOLOGY_SPREAD_CONSTRAINT)),
    )
    .omitempty()
    .list_map(&["topologyKey", "whenUnsatisfiable"]),
    Field::new("setHostnameAsFQDN", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("os", Ty::Ptr(&Ty::Struct(CORE_POD_OS))).omitempty(),
    Field::new("hostUsers", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new(
        "schedulingGates",
        Ty::Slice(&Ty::Struct(CORE_POD_SCHEDULING_GATE)),
    )
    .omitempty()
    .list_map(&["name"]),
    Field::new(
        "resourceClaims",
        Ty::Slice(&Ty::Struct(CORE_POD_RESOURCE_CLAIM)),
    )
    .omitempty()
    .list_map(&["name"]),
    Field::new(
        "resources",
        Ty::Ptr(&Ty::Struct(CORE_RESOURCE_REQUIREMENTS)),
    )
    .omitempty(),
    Field::new("hostnameOverride", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new(
        "schedulingGroup",
        Ty::Ptr(&Ty::Struct(CORE_POD_SCHEDULING_GROUP)),
    )
    .omitempty(),
];

/// `core.PodStatus`
pub static CORE_POD_STATUS: &[Field] = &[
    Field::new("observedGeneration", Ty::Int).omitempty(),
    Field::new("phase", Ty::Str).omitempty(),
    Field::new("conditions", Ty::Slice(&Ty::Struct(CORE_POD_CONDITION)))
        .omitempty()
        .list_map(&["type"]),
    Field::new("message", Ty::Str).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("nominatedNodeName", Ty::Str).omitempty(),
    Field::new("hostIP", Ty::Str).omitempty(),
    Field::new("hostIPs", Ty::Slice(&Ty::Struct(CORE_HOST_IP))).omitempty(),
    Field::new("podIP", Ty::Str).omitempty(),
    Field::new("podIPs", Ty::Slice(&Ty::Struct(CORE_POD_IP)))
        .omitempty()
        .list_map(&["ip"]),
    Field::new("startTime", Ty::Ptr(&Ty::Time)).omitempty(),
    Field::new(
        "initContainerStatuses",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_STATUS)),
    )
    .omitempty(),
    Field::new(
        "containerStatuses",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_STATUS)),
    )
    .omitempty(),
    Field::new("qosClass", Ty::Str).omitempty(),
    Field::new(
        "ephemeralContainerStatuses",
        Ty::Slice(&Ty::Struct(CORE_CONTAINER_STATUS)),
    )
    .omitempty(),
    Field::new("resize", Ty::Str).omitempty(),
    Field::new(
        "resourceClaimStatuses",
        Ty::Slice(&Ty::Struct(CORE_POD_RESOURCE_CLAIM_STATUS)),
    )
    .omitempty()
    .list_map(&["name"]),
    Field::new(
        "extendedResourceClaimStatus",
        Ty::Ptr(&Ty::Struct(CORE_POD_EXTENDED_RESOURCE_CLAIM_STATUS)),
    )
    .omitempty(),
    Field::new("allocatedResources", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new(
        "resources",
        Ty::Ptr(&Ty::Struct(CORE_RESOURCE_REQUIREMENTS)),
    )
    .omitempty(),
    Field::new(
        "nodeAllocatableResourceClaimStatuses",
        Ty::Slice(&Ty::Struct(CORE_NODE_ALLOCATABLE_RESOURCE_CLAIM_STATUS)),
    )
    .omitempty(),
];

/// `core.PortStatus`
pub static CORE_PORT_STATUS: &[Field] = &[
    Field::new("port", Ty::Int),
    Field::new("protocol", Ty::Str),
    Field::new("error", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.PortworxVolumeSource`
pub static CORE_PORTWORX_VOLUME_SOURCE: &[Field] = &[
    Field::new("volumeID", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.PreferredSchedulingTerm`
pub static CORE_PREFERRED_SCHEDULING_TERM: &[Field] = &[
    Field::new("weight", Ty::Int),
    Field::new("preference", Ty::Struct(CORE_NODE_SELECTOR_TERM)).atomic(),
];

/// `core.Probe`
pub static CORE_PROBE: &[Field] = &[
    Field::new("", Ty::Struct(CORE_PROBE_HANDLER)).inline(),
    Field::new("initialDelaySeconds", Ty::Int).omitempty(),
    Field::new("timeoutSeconds", Ty::Int).omitempty(),
    Field::new("periodSeconds", Ty::Int).omitempty(),
    Field::new("successThreshold", Ty::Int).omitempty(),
    Field::new("failureThreshold", Ty::Int).omitempty(),
    Field::new("terminationGracePeriodSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.ProbeHandler`
pub static CORE_PROBE_HANDLER: &[Field] = &[
    Field::new("exec", Ty::Ptr(&Ty::Struct(CORE_EXEC_ACTION))).omitempty(),
    Field::new("httpGet", Ty::Ptr(&Ty::Struct(CORE_HTTP_GET_ACTION))).omitempty(),
    Field::new("tcpSocket", Ty::Ptr(&Ty::Struct(CORE_TCP_SOCKET_ACTION))).omitempty(),
    Field::new("grpc", Ty::Ptr(&Ty::Struct(CORE_GRPC_ACTION))).omitempty(),
];

/// `core.ProjectedVolumeSource`
pub static CORE_PROJECTED_VOLUME_SOURCE: &[Field] = &[
    Field::new("sources", Ty::Slice(&Ty::Struct(CORE_VOLUME_PROJECTION))),
    Field::new("defaultMode", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.QuobyteVolumeSource`
pub static CORE_QUOBYTE_VOLUME_SOURCE: &[Field] = &[
    Field::new("registry", Ty::Str),
    Field::new("volume", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("user", Ty::Str).omitempty(),
    Field::new("group", Ty::Str).omitempty(),
    Field::new("tenant", Ty::Str).omitempty(),
];

/// `core.RBDVolumeSource`
pub static CORE_RBD_VOLUME_SOURCE: &[Field] = &[
    Field::new("monitors", Ty::Slice(&Ty::Str)),
    Field::new("image", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("pool", Ty::Str).omitempty(),
    Field::new("user", Ty::Str).omitempty(),
    Field::new("keyring", Ty::Str).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.ResourceClaim`
pub static CORE_RESOURCE_CLAIM: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("request", Ty::Str).omitempty(),
];

/// `core.ResourceFieldSelector`
pub static CORE_RESOURCE_FIELD_SELECTOR: &[Field] = &[
    Field::new("containerName", Ty::Str).omitempty(),
    Field::new("resource", Ty::Str),
    Field::new("divisor", Ty::Quantity).omitempty(),
];

/// `core.ResourceHealth`
pub static CORE_RESOURCE_HEALTH: &[Field] = &[
    Field::new("resourceID", Ty::Str),
    Field::new("health", Ty::Str).omitempty(),
    Field::new("message", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.ResourceRequirements`
pub static CORE_RESOURCE_REQUIREMENTS: &[Field] = &[
    Field::new("limits", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new("requests", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new("claims", Ty::Slice(&Ty::Struct(CORE_RESOURCE_CLAIM)))
        .omitempty()
        .list_map(&["name"]),
];

/// `core.ResourceStatus`
pub static CORE_RESOURCE_STATUS: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("resources", Ty::Slice(&Ty::Struct(CORE_RESOURCE_HEALTH)))
        .omitempty()
        .list_map(&["resourceID"]),
];

/// `core.SELinuxOptions`
pub static CORE_SE_LINUX_OPTIONS: &[Field] = &[
    Field::new("user", Ty::Str).omitempty(),
    Field::new("role", Ty::Str).omitempty(),
    Field::new("type", Ty::Str).omitempty(),
    Field::new("level", Ty::Str).omitempty(),
];

/// `core.ScaleIOVolumeSource`
pub static CORE_SCALE_IO_VOLUME_SOURCE: &[Field] = &[
    Field::new("gateway", Ty::Str),
    Field::new("system", Ty::Str),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .atomic(),
    Field::new("sslEnabled", Ty::Bool).omitempty(),
    Field::new("protectionDomain", Ty::Str).omitempty(),
    Field::new("storagePool", Ty::Str).omitempty(),
    Field::new("storageMode", Ty::Str).omitempty(),
    Field::new("volumeName", Ty::Str).omitempty(),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
];

/// `core.SeccompProfile`
pub static CORE_SECCOMP_PROFILE: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("localhostProfile", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.Secret`
pub static CORE_SECRET: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("immutable", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("data", Ty::Map(&Ty::Bytes)).omitempty(),
    Field::new("stringData", Ty::Map(&Ty::Str)).omitempty(),
    Field::new("type", Ty::Str).omitempty(),
];

/// `core.SecretEnvSource`
pub static CORE_SECRET_ENV_SOURCE: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.SecretKeySelector`
pub static CORE_SECRET_KEY_SELECTOR: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("key", Ty::Str),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.SecretProjection`
pub static CORE_SECRET_PROJECTION: &[Field] = &[
    Field::new("", Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE))
        .inline()
        .atomic(),
    Field::new("items", Ty::Slice(&Ty::Struct(CORE_KEY_TO_PATH))).omitempty(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.SecretVolumeSource`
pub static CORE_SECRET_VOLUME_SOURCE: &[Field] = &[
    Field::new("secretName", Ty::Str).omitempty(),
    Field::new("items", Ty::Slice(&Ty::Struct(CORE_KEY_TO_PATH))).omitempty(),
    Field::new("defaultMode", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("optional", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.SecurityContext`
pub static CORE_SECURITY_CONTEXT: &[Field] = &[
    Field::new("capabilities", Ty::Ptr(&Ty::Struct(CORE_CAPABILITIES))).omitempty(),
    Field::new("privileged", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new(
        "seLinuxOptions",
        Ty::Ptr(&Ty::Struct(CORE_SE_LINUX_OPTIONS)),
    )
    .omitempty(),
    Field::new(
        "windowsOptions",
        Ty::Ptr(&Ty::Struct(CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS)),
    )
    .omitempty(),
    Field::new("runAsUser", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("runAsGroup", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("runAsNonRoot", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("readOnlyRootFilesystem", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("allowPrivilegeEscalation", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("procMount", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("seccompProfile", Ty::Ptr(&Ty::Struct(CORE_SECCOMP_PROFILE))).omitempty(),
    Field::new(
        "appArmorProfile",
        Ty::Ptr(&Ty::Struct(CORE_APP_ARMOR_PROFILE)),
    )
    .omitempty(),
];

/// `core.Service`
pub static CORE_SERVICE: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(CORE_SERVICE_SPEC)).omitempty(),
    Field::new("status", Ty::Struct(CORE_SERVICE_STATUS)).omitempty(),
];

/// `core.ServiceAccount`
pub static CORE_SERVICE_ACCOUNT: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("secrets", Ty::Slice(&Ty::Struct(CORE_OBJECT_REFERENCE)))
        .omitempty()
        .list_map(&["name"])
        .atomic(),
    Field::new(
        "imagePullSecrets",
        Ty::Slice(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty(),
    Field::new("automountServiceAccountToken", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `core.ServiceAccountTokenProjection`
pub static CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION: &[Field] = &[
    Field::new("audience", Ty::Str).omitempty(),
    Field::new("expirationSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("path", Ty::Str),
];

/// `core.ServicePort`
pub static CORE_SERVICE_PORT: &[Field] = &[
    Field::new("name", Ty::Str).omitempty(),
    Field::new("protocol", Ty::Str).omitempty(),
    Field::new("appProtocol", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("port", Ty::Int),
    Field::new("targetPort", Ty::IntOrString).omitempty(),
    Field::new("nodePort", Ty::Int).omitempty(),
];

/// `core.ServiceSpec`
pub static CORE_SERVICE_SPEC: &[Field] = &[
    Field::new("ports", Ty::Slice(&Ty::Struct(CORE_SERVICE_PORT)))
        .omitempty()
        .list_map(&["port", "protocol"]),
    Field::new("selector", Ty::Map(&Ty::Str))
        .omitempty()
        .atomic(),
    Field::new("clusterIP", Ty::Str).omitempty(),
    Field::new("clusterIPs", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("type", Ty::Str).omitempty(),
    Field::new("externalIPs", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("sessionAffinity", Ty::Str).omitempty(),
    Field::new("loadBalancerIP", Ty::Str).omitempty(),
    Field::new("loadBalancerSourceRanges", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("externalName", Ty::Str).omitempty(),
    Field::new("externalTrafficPolicy", Ty::Str).omitempty(),
    Field::new("healthCheckNodePort", Ty::Int).omitempty(),
    Field::new("publishNotReadyAddresses", Ty::Bool).omitempty(),
    Field::new(
        "sessionAffinityConfig",
        Ty::Ptr(&Ty::Struct(CORE_SESSION_AFFINITY_CONFIG)),
    )
    .omitempty(),
    Field::new("ipFamilies", Ty::Slice(&Ty::Str)).omitempty(),
    Field::new("ipFamilyPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("allocateLoadBalancerNodePorts", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("loadBalancerClass", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("internalTrafficPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("trafficDistribution", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.ServiceStatus`
pub static CORE_SERVICE_STATUS: &[Field] = &[
    Field::new("loadBalancer", Ty::Struct(CORE_LOAD_BALANCER_STATUS)).omitempty(),
    Field::new("conditions", Ty::Slice(&Ty::Struct(META_CONDITION)))
        .omitempty()
        .list_map(&["type"]),
];

/// `core.SessionAffinityConfig`
pub static CORE_SESSION_AFFINITY_CONFIG: &[Field] =
    &[Field::new("clientIP", Ty::Ptr(&Ty::Struct(CORE_CLIENT_IP_CONFIG))).omitempty()];

/// `core.SleepAction`
pub static CORE_SLEEP_ACTION: &[Field] = &[Field::new("seconds", Ty::Int)];

/// `core.StorageOSVolumeSource`
pub static CORE_STORAGE_OS_VOLUME_SOURCE: &[Field] = &[
    Field::new("volumeName", Ty::Str).omitempty(),
    Field::new("volumeNamespace", Ty::Str).omitempty(),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new(
        "secretRef",
        Ty::Ptr(&Ty::Struct(CORE_LOCAL_OBJECT_REFERENCE)),
    )
    .omitempty()
    .atomic(),
];

/// `core.Sysctl`
pub static CORE_SYSCTL: &[Field] = &[Field::new("name", Ty::Str), Field::new("value", Ty::Str)];

/// `core.TCPSocketAction`
pub static CORE_TCP_SOCKET_ACTION: &[Field] = &[
    Field::new("port", Ty::IntOrString),
    Field::new("host", Ty::Str).omitempty(),
];

/// `core.Taint`
pub static CORE_TAINT: &[Field] = &[
    Field::new("key", Ty::Str),
    Field::new("value", Ty::Str).omitempty(),
    Field::new("effect", Ty::Str),
    Field::new("timeAdded", Ty::Ptr(&Ty::Time)).omitempty(),
];

/// `core.Toleration`
pub static CORE_TOLERATION: &[Field] = &[
    Field::new("key", Ty::Str).omitempty(),
    Field::new("operator", Ty::Str).omitempty(),
    Field::new("value", Ty::Str).omitempty(),
    Field::new("effect", Ty::Str).omitempty(),
    Field::new("tolerationSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `core.TopologySpreadConstraint`
pub static CORE_TOPOLOGY_SPREAD_CONSTRAINT: &[Field] = &[
    Field::new("maxSkew", Ty::Int),
    Field::new("topologyKey", Ty::Str),
    Field::new("whenUnsatisfiable", Ty::Str),
    Field::new("labelSelector", Ty::Ptr(&Ty::Struct(META_LABEL_SELECTOR)))
        .omitempty()
        .atomic(),
    Field::new("minDomains", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("nodeAffinityPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("nodeTaintsPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("matchLabelKeys", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `core.TypedLocalObjectReference`
pub static CORE_TYPED_LOCAL_OBJECT_REFERENCE: &[Field] = &[
    Field::new("apiGroup", Ty::Ptr(&Ty::Str)),
    Field::new("kind", Ty::Str),
    Field::new("name", Ty::Str),
];

/// `core.TypedObjectReference`
pub static CORE_TYPED_OBJECT_REFERENCE: &[Field] = &[
    Field::new("apiGroup", Ty::Ptr(&Ty::Str)),
    Field::new("kind", Ty::Str),
    Field::new("name", Ty::Str),
    Field::new("namespace", Ty::Ptr(&Ty::Str)).omitempty(),
];

/// `core.Volume`
pub static CORE_VOLUME: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("", Ty::Struct(CORE_VOLUME_SOURCE)).inline(),
];

/// `core.VolumeDevice`
pub static CORE_VOLUME_DEVICE: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("devicePath", Ty::Str),
];

/// `core.VolumeMount`
pub static CORE_VOLUME_MOUNT: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("recursiveReadOnly", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("mountPath", Ty::Str),
    Field::new("subPath", Ty::Str).omitempty(),
    Field::new("mountPropagation", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("subPathExpr", Ty::Str).omitempty(),
];

/// `core.VolumeMountStatus`
pub static CORE_VOLUME_MOUNT_STATUS: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("mountPath", Ty::Str),
    Field::new("readOnly", Ty::Bool).omitempty(),
    Field::new("recursiveReadOnly", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("volumeStatus", Ty::Ptr(&Ty::Struct(CORE_VOLUME_STATUS))).omitempty(),
];

/// `core.VolumeProjection`
pub static CORE_VOLUME_PROJECTION: &[Field] = &[
    Field::new("secret", Ty::Ptr(&Ty::Struct(CORE_SECRET_PROJECTION))).omitempty(),
    Field::new(
        "downwardAPI",
        Ty::Ptr(&Ty::Struct(CORE_DOWNWARD_API_PROJECTION)),
    )
    .omitempty(),
    Field::new(
        "configMap",
        Ty::Ptr(&Ty::Struct(CORE_CONFIG_MAP_PROJECTION)),
    )
    .omitempty(),
    Field::new(
        "serviceAccountToken",
        Ty::Ptr(&Ty::Struct(CORE_SERVICE_ACCOUNT_TOKEN_PROJECTION)),
    )
    .omitempty(),
    Field::new(
        "clusterTrustBundle",
        Ty::Ptr(&Ty::Struct(CORE_CLUSTER_TRUST_BUNDLE_PROJECTION)),
    )
    .omitempty(),
    Field::new(
        "podCertificate",
        Ty::Ptr(&Ty::Struct(CORE_POD_CERTIFICATE_PROJECTION)),
    )
    .omitempty(),
];

/// `core.VolumeResourceRequirements`
pub static CORE_VOLUME_RESOURCE_REQUIREMENTS: &[Field] = &[
    Field::new("limits", Ty::Map(&Ty::Quantity)).omitempty(),
    Field::new("requests", Ty::Map(&Ty::Quantity)).omitempty(),
];

/// `core.VolumeSource`
pub static CORE_VOLUME_SOURCE: &[Field] = &[
    Field::new(
        "hostPath",
        Ty::Ptr(&Ty::Struct(CORE_HOST_PATH_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "emptyDir",
        Ty::Ptr(&Ty::Struct(CORE_EMPTY_DIR_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "gcePersistentDisk",
        Ty::Ptr(&Ty::Struct(CORE_GCE_PERSISTENT_DISK_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "awsElasticBlockStore",
        Ty::Ptr(&Ty::Struct(CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("gitRepo", Ty::Ptr(&Ty::Struct(CORE_GIT_REPO_VOLUME_SOURCE))).omitempty(),
    Field::new("secret", Ty::Ptr(&Ty::Struct(CORE_SECRET_VOLUME_SOURCE))).omitempty(),
    Field::new("nfs", Ty::Ptr(&Ty::Struct(CORE_NFS_VOLUME_SOURCE))).omitempty(),
    Field::new("iscsi", Ty::Ptr(&Ty::Struct(CORE_ISCSI_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "glusterfs",
        Ty::Ptr(&Ty::Struct(CORE_GLUSTERFS_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "persistentVolumeClaim",
        Ty::Ptr(&Ty::Struct(CORE_PERSISTENT_VOLUME_CLAIM_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("rbd", Ty::Ptr(&Ty::Struct(CORE_RBD_VOLUME_SOURCE))).omitempty(),
    Field::new("flexVolume", Ty::Ptr(&Ty::Struct(CORE_FLEX_VOLUME_SOURCE))).omitempty(),
    Field::new("cinder", Ty::Ptr(&Ty::Struct(CORE_CINDER_VOLUME_SOURCE))).omitempty(),
    Field::new("cephfs", Ty::Ptr(&Ty::Struct(CORE_CEPH_FS_VOLUME_SOURCE))).omitempty(),
    Field::new("flocker", Ty::Ptr(&Ty::Struct(CORE_FLOCKER_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "downwardAPI",
        Ty::Ptr(&Ty::Struct(CORE_DOWNWARD_API_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("fc", Ty::Ptr(&Ty::Struct(CORE_FC_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "azureFile",
        Ty::Ptr(&Ty::Struct(CORE_AZURE_FILE_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "configMap",
        Ty::Ptr(&Ty::Struct(CORE_CONFIG_MAP_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "vsphereVolume",
        Ty::Ptr(&Ty::Struct(CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("quobyte", Ty::Ptr(&Ty::Struct(CORE_QUOBYTE_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "azureDisk",
        Ty::Ptr(&Ty::Struct(CORE_AZURE_DISK_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "photonPersistentDisk",
        Ty::Ptr(&Ty::Struct(CORE_PHOTON_PERSISTENT_DISK_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "projected",
        Ty::Ptr(&Ty::Struct(CORE_PROJECTED_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new(
        "portworxVolume",
        Ty::Ptr(&Ty::Struct(CORE_PORTWORX_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("scaleIO", Ty::Ptr(&Ty::Struct(CORE_SCALE_IO_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "storageos",
        Ty::Ptr(&Ty::Struct(CORE_STORAGE_OS_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("csi", Ty::Ptr(&Ty::Struct(CORE_CSI_VOLUME_SOURCE))).omitempty(),
    Field::new(
        "ephemeral",
        Ty::Ptr(&Ty::Struct(CORE_EPHEMERAL_VOLUME_SOURCE)),
    )
    .omitempty(),
    Field::new("image", Ty::Ptr(&Ty::Struct(CORE_IMAGE_VOLUME_SOURCE))).omitempty(),
];

/// `core.VolumeStatus`
pub static CORE_VOLUME_STATUS: &[Field] =
    &[Field::new("image", Ty::Ptr(&Ty::Struct(CORE_IMAGE_VOLUME_STATUS))).omitempty()];

/// `core.VsphereVirtualDiskVolumeSource`
pub static CORE_VSPHERE_VIRTUAL_DISK_VOLUME_SOURCE: &[Field] = &[
    Field::new("volumePath", Ty::Str),
    Field::new("fsType", Ty::Str).omitempty(),
    Field::new("storagePolicyName", Ty::Str).omitempty(),
    Field::new("storagePolicyID", Ty::Str).omitempty(),
];

/// `core.WeightedPodAffinityTerm`
pub static CORE_WEIGHTED_POD_AFFINITY_TERM: &[Field] = &[
    Field::new("weight", Ty::Int),
    Field::new("podAffinityTerm", Ty::Struct(CORE_POD_AFFINITY_TERM)),
];

/// `core.WindowsSecurityContextOptions`
pub static CORE_WINDOWS_SECURITY_CONTEXT_OPTIONS: &[Field] = &[
    Field::new("gmsaCredentialSpecName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("gmsaCredentialSpec", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("runAsUserName", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new("hostProcess", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `events.Event`
pub static EVENTS_EVENT: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)),
    Field::new("eventTime", Ty::MicroTime),
    Field::new("series", Ty::Ptr(&Ty::Struct(EVENTS_EVENT_SERIES))).omitempty(),
    Field::new("reportingController", Ty::Str).omitempty(),
    Field::new("reportingInstance", Ty::Str).omitempty(),
    Field::new("action", Ty::Str).omitempty(),
    Field::new("reason", Ty::Str).omitempty(),
    Field::new("regarding", Ty::Struct(CORE_OBJECT_REFERENCE))
        .omitempty()
        .atomic(),
    Field::new("related", Ty::Ptr(&Ty::Struct(CORE_OBJECT_REFERENCE)))
        .omitempty()
        .atomic(),
    Field::new("note", Ty::Str).omitempty(),
    Field::new("type", Ty::Str).omitempty(),
    Field::new("deprecatedSource", Ty::Struct(CORE_EVENT_SOURCE)).omitempty(),
    Field::new("deprecatedFirstTimestamp", Ty::Time).omitempty(),
    Field::new("deprecatedLastTimestamp", Ty::Time).omitempty(),
    Field::new("deprecatedCount", Ty::Int).omitempty(),
];

/// `events.EventSeries`
pub static EVENTS_EVENT_SERIES: &[Field] = &[
    Field::new("count", Ty::Int),
    Field::new("lastObservedTime", Ty::MicroTime),
];

/// `meta.Condition`
pub static META_CONDITION: &[Field] = &[
    Field::new("type", Ty::Str),
    Field::new("status", Ty::Str),
    Field::new("observedGeneration", Ty::Int).omitempty(),
    Field::new("lastTransitionTime", Ty::Time),
    Field::new("reason", Ty::Str),
    Field::new("message", Ty::Str),
];

/// `meta.LabelSelector`
pub static META_LABEL_SELECTOR: &[Field] = &[
    Field::new("matchLabels", Ty::Map(&Ty::Str)).omitempty(),
    Field::new(
        "matchExpressions",
        Ty::Slice(&Ty::Struct(META_LABEL_SELECTOR_REQUIREMENT)),
    )
    .omitempty(),
];

/// `meta.LabelSelectorRequirement`
pub static META_LABEL_SELECTOR_REQUIREMENT: &[Field] = &[
    Field::new("key", Ty::Str),
    Field::new("operator", Ty::Str),
    Field::new("values", Ty::Slice(&Ty::Str)).omitempty(),
];

/// `meta.ManagedFieldsEntry`
pub static META_MANAGED_FIELDS_ENTRY: &[Field] = &[
    Field::new("manager", Ty::Str).omitempty(),
    Field::new("operation", Ty::Str).omitempty(),
    Field::new("apiVersion", Ty::Str).omitempty(),
    Field::new("time", Ty::Ptr(&Ty::Time)).omitempty(),
    Field::new("fieldsType", Ty::Str).omitempty(),
    Field::new("fieldsV1", Ty::Ptr(&Ty::Raw)).omitempty(),
    Field::new("subresource", Ty::Str).omitempty(),
];

/// `meta.ObjectMeta`
pub static META_OBJECT_META: &[Field] = &[
    Field::new("name", Ty::Str).omitempty(),
    Field::new("generateName", Ty::Str).omitempty(),
    Field::new("namespace", Ty::Str).omitempty(),
    Field::new("selfLink", Ty::Str).omitempty(),
    Field::new("uid", Ty::Str).omitempty(),
    Field::new("resourceVersion", Ty::Str).omitempty(),
    Field::new("generation", Ty::Int).omitempty(),
    Field::new("creationTimestamp", Ty::Time)
        .omitempty()
        .omitzero(),
    Field::new("deletionTimestamp", Ty::Ptr(&Ty::Time)).omitempty(),
    Field::new("deletionGracePeriodSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("labels", Ty::Map(&Ty::Str)).omitempty(),
    Field::new("annotations", Ty::Map(&Ty::Str)).omitempty(),
    Field::new(
        "ownerReferences",
        Ty::Slice(&Ty::Struct(META_OWNER_REFERENCE)),
    )
    .omitempty()
    .list_map(&["uid"])
    .atomic(),
    Field::new("finalizers", Ty::Slice(&Ty::Str))
        .omitempty()
        .list_set(),
    Field::new(
        "managedFields",
        Ty::Slice(&Ty::Struct(META_MANAGED_FIELDS_ENTRY)),
    )
    .omitempty(),
];

/// `meta.OwnerReference`
pub static META_OWNER_REFERENCE: &[Field] = &[
    Field::new("apiVersion", Ty::Str),
    Field::new("kind", Ty::Str),
    Field::new("name", Ty::Str),
    Field::new("uid", Ty::Str),
    Field::new("controller", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("blockOwnerDeletion", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `meta.TypeMeta`
pub static META_TYPE_META: &[Field] = &[
    Field::new("kind", Ty::Str).omitempty(),
    Field::new("apiVersion", Ty::Str).omitempty(),
];

/// `node.Overhead`
pub static NODE_OVERHEAD: &[Field] = &[Field::new("podFixed", Ty::Map(&Ty::Quantity)).omitempty()];

/// `node.RuntimeClass`
pub static NODE_RUNTIME_CLASS: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("handler", Ty::Str),
    Field::new("overhead", Ty::Ptr(&Ty::Struct(NODE_OVERHEAD))).omitempty(),
    Field::new("scheduling", Ty::Ptr(&Ty::Struct(NODE_SCHEDULING))).omitempty(),
];

/// `node.Scheduling`
pub static NODE_SCHEDULING: &[Field] = &[
    Field::new("nodeSelector", Ty::Map(&Ty::Str))
        .omitempty()
        .atomic(),
    Field::new("tolerations", Ty::Slice(&Ty::Struct(CORE_TOLERATION))).omitempty(),
];

/// `storage.CSIDriver`
pub static STORAGE_CSI_DRIVER: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(STORAGE_CSI_DRIVER_SPEC)),
];

/// `storage.CSIDriverSpec`
pub static STORAGE_CSI_DRIVER_SPEC: &[Field] = &[
    Field::new("attachRequired", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("podInfoOnMount", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("volumeLifecycleModes", Ty::Slice(&Ty::Str))
        .omitempty()
        .list_set(),
    Field::new("storageCapacity", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("fsGroupPolicy", Ty::Ptr(&Ty::Str)).omitempty(),
    Field::new(
        "tokenRequests",
        Ty::Slice(&Ty::Struct(STORAGE_TOKEN_REQUEST)),
    )
    .omitempty(),
    Field::new("requiresRepublish", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("seLinuxMount", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("nodeAllocatableUpdatePeriodSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
    Field::new("serviceAccountTokenInSecrets", Ty::Ptr(&Ty::Bool)).omitempty(),
    Field::new("preventPodSchedulingIfMissing", Ty::Ptr(&Ty::Bool)).omitempty(),
];

/// `storage.CSINode`
pub static STORAGE_CSI_NODE: &[Field] = &[
    Field::new("", Ty::Struct(META_TYPE_META)).inline(),
    Field::new("metadata", Ty::Struct(META_OBJECT_META)).omitempty(),
    Field::new("spec", Ty::Struct(STORAGE_CSI_NODE_SPEC)),
];

/// `storage.CSINodeDriver`
pub static STORAGE_CSI_NODE_DRIVER: &[Field] = &[
    Field::new("name", Ty::Str),
    Field::new("nodeID", Ty::Str),
    Field::new("topologyKeys", Ty::Slice(&Ty::Str)),
    Field::new(
        "allocatable",
        Ty::Ptr(&Ty::Struct(STORAGE_VOLUME_NODE_RESOURCES)),
    )
    .omitempty(),
];

/// `storage.CSINodeSpec`
pub static STORAGE_CSI_NODE_SPEC: &[Field] =
    &[Field::new("drivers", Ty::Slice(&Ty::Struct(STORAGE_CSI_NODE_DRIVER))).list_map(&["name"])];

/// `storage.TokenRequest`
pub static STORAGE_TOKEN_REQUEST: &[Field] = &[
    Field::new("audience", Ty::Str),
    Field::new("expirationSeconds", Ty::Ptr(&Ty::Int)).omitempty(),
];

/// `storage.VolumeNodeResources`
pub static STORAGE_VOLUME_NODE_RESOURCES: &[Field] =
    &[Field::new("count", Ty::Ptr(&Ty::Int)).omitempty()];
