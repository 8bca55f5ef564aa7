//! The resource table: every resource the double serves, described as data
//! (group, version, kind, scope, subresources, field selectors, strategic-merge keys).

/// How strategic merge patch treats a list, as the upstream `patchStrategy`/`patchMergeKey` tags say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMerge {
    /// `patchStrategy:"merge"` with `patchMergeKey`: items are merged by this key.
    Key(&'static str),
    /// `patchStrategy:"merge"` on a list of scalars: the list is a set.
    Set,
}

/// One served resource.
#[derive(Debug)]
pub struct Resource {
    /// Index in [`ALL`], used as the store key.
    pub id: usize,
    /// API group ("" for core).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name as used in paths.
    pub plural: &'static str,
    /// Singular name for discovery.
    pub singular: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Whether objects live in a namespace.
    pub namespaced: bool,
    /// kubectl short names.
    pub short_names: &'static [&'static str],
    /// Whether a `status` subresource exists, so that main writes keep the stored status.
    pub status_subresource: bool,
    /// Whether `PUT` of a missing object creates it (upstream `AllowCreateOnUpdate`).
    pub create_on_update: bool,
    /// Whether an update without a `resourceVersion` (or with `"0"`) overwrites whatever is
    /// stored (upstream `AllowUnconditionalUpdate`); otherwise it is a 422.
    pub unconditional_update: bool,
    /// Field selector labels served besides `metadata.name` / `metadata.namespace`.
    pub fields: &'static [&'static str],
    /// Lists that strategic merge patch merges by key, as dotted paths from the object root.
    pub merge: &'static [(&'static str, ListMerge)],
}

impl Resource {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `pods` or `leases.coordination.k8s.io`, as upstream names a resource in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_string()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The strategic-merge rule for the list at `path`, if upstream merges it.
    pub fn list_merge(&self, path: &str) -> Option<ListMerge> {
        COMMON_MERGE
            .iter()
            .chain(self.merge)
            .find(|(p, _)| *p == path)
            .map(|(_, m)| *m)
    }

    /// The resource whose store holds this one's objects: core/v1 events for
    /// events.k8s.io/v1 events (see [`crate::events`]), else itself.
    pub fn storage(&self) -> &'static Resource {
        if std::ptr::eq(self, &EVENTS_V1) {
            &EVENTS
        } else {
            ALL[self.id]
        }
    }

    /// Whether objects are converted between this resource's shape and its storage's.
    pub fn converted(&self) -> bool {
        !std::ptr::eq(self.storage(), ALL[self.id])
    }

    /// Whether `label` is a field selector this resource serves.
    pub fn supports_field(&self, label: &str) -> bool {
        label == "metadata.name"
            || (label == "metadata.namespace" && self.namespaced)
            || self.fields.contains(&label)
    }
}

/// Where kube-apiserver keeps an object in etcd (`/registry/<prefix>/[<namespace>/]<name>`),
/// as its storage errors name it.
pub fn storage_key(resource: &Resource, namespace: &str, name: &str) -> String {
    let prefix = match (resource.group, resource.plural) {
        ("", "nodes") => "minions",
        ("", "services") => "services/specs",
        (_, plural) => plural,
    };
    if namespace.is_empty() {
        format!("/registry/{prefix}/{name}")
    } else {
        format!("/registry/{prefix}/{namespace}/{name}")
    }
}

/// Whether a DELETE answers with the deleted object (upstream's `ReturnDeletedObject`)
/// rather than a `Success` Status.
pub fn returns_deleted_object(resource: &Resource) -> bool {
    matches!(
        (resource.group, resource.plural),
        ("", "pods" | "namespaces" | "serviceaccounts" | "services")
            | ("storage.k8s.io", "csinodes" | "csidrivers")
    )
}

const COMMON_MERGE: &[(&str, ListMerge)] = &[
    ("metadata.finalizers", ListMerge::Set),
    ("metadata.ownerReferences", ListMerge::Key("uid")),
];

/// The pod's merged lists, from the `patchStrategy:"merge"` tags of `k8s.io/api/core/v1`.
/// The container status lists carry no tag: they are atomic, replaced whole by a patch.
const CONTAINER_MERGE: &[(&str, ListMerge)] = &[
    ("spec.containers", ListMerge::Key("name")),
    ("spec.containers.env", ListMerge::Key("name")),
    ("spec.containers.ports", ListMerge::Key("containerPort")),
    ("spec.containers.volumeMounts", ListMerge::Key("mountPath")),
    (
        "spec.containers.volumeDevices",
        ListMerge::Key("devicePath"),
    ),
    ("spec.initContainers", ListMerge::Key("name")),
    ("spec.initContainers.env", ListMerge::Key("name")),
    ("spec.initContainers.ports", ListMerge::Key("containerPort")),
    (
        "spec.initContainers.volumeMounts",
        ListMerge::Key("mountPath"),
    ),
    (
        "spec.initContainers.volumeDevices",
        ListMerge::Key("devicePath"),
    ),
    ("spec.ephemeralContainers", ListMerge::Key("name")),
    ("spec.ephemeralContainers.env", ListMerge::Key("name")),
    (
        "spec.ephemeralContainers.ports",
        ListMerge::Key("containerPort"),
    ),
    (
        "spec.ephemeralContainers.volumeMounts",
        ListMerge::Key("mountPath"),
    ),
    (
        "spec.ephemeralContainers.volumeDevices",
        ListMerge::Key("devicePath"),
    ),
    ("spec.volumes", ListMerge::Key("name")),
    ("spec.imagePullSecrets", ListMerge::Key("name")),
    ("spec.hostAliases", ListMerge::Key("ip")),
    (
        "spec.topologySpreadConstraints",
        ListMerge::Key("topologyKey"),
    ),
    ("spec.schedulingGates", ListMerge::Key("name")),
    ("spec.resourceClaims", ListMerge::Key("name")),
    ("status.conditions", ListMerge::Key("type")),
    ("status.podIPs", ListMerge::Key("ip")),
    ("status.hostIPs", ListMerge::Key("ip")),
    ("status.resourceClaimStatuses", ListMerge::Key("name")),
];

const NODE_MERGE: &[(&str, ListMerge)] = &[
    ("spec.podCIDRs", ListMerge::Set),
    ("status.conditions", ListMerge::Key("type")),
    ("status.addresses", ListMerge::Key("type")),
];

const CONDITIONS_MERGE: &[(&str, ListMerge)] = &[("status.conditions", ListMerge::Key("type"))];

/// core/v1 namespaces.
pub static NAMESPACES: Resource = Resource {
    id: 0,
    group: "",
    version: "v1",
    plural: "namespaces",
    singular: "namespace",
    kind: "Namespace",
    namespaced: false,
    short_names: &["ns"],
    status_subresource: true,
    create_on_update: false,
    unconditional_update: true,
    fields: &["status.phase"],
    merge: CONDITIONS_MERGE,
};

/// core/v1 pods.
pub static PODS: Resource = Resource {
    id: 1,
    group: "",
    version: "v1",
    plural: "pods",
    singular: "pod",
    kind: "Pod",
    namespaced: true,
    short_names: &["po"],
    status_subresource: true,
    create_on_update: false,
    unconditional_update: true,
    fields: &[
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ],
    merge: CONTAINER_MERGE,
};

/// core/v1 nodes.
pub static NODES: Resource = Resource {
    id: 2,
    group: "",
    version: "v1",
    plural: "nodes",
    singular: "node",
    kind: "Node",
    namespaced: false,
    short_names: &["no"],
    status_subresource: true,
    create_on_update: false,
    unconditional_update: true,
    fields: &["spec.unschedulable"],
    merge: NODE_MERGE,
};

/// core/v1 events.
pub static EVENTS: Resource = Resource {
    id: 3,
    group: "",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    short_names: &["ev"],
    status_subresource: false,
    create_on_update: true,
    unconditional_update: true,
    fields: &[
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ],
    merge: &[],
};

/// core/v1 configmaps.
pub static CONFIGMAPS: Resource = Resource {
    id: 4,
    group: "",
    version: "v1",
    plural: "configmaps",
    singular: "configmap",
    kind: "ConfigMap",
    namespaced: true,
    short_names: &["cm"],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: true,
    fields: &[],
    merge: &[],
};

/// core/v1 secrets.
pub static SECRETS: Resource = Resource {
    id: 5,
    group: "",
    version: "v1",
    plural: "secrets",
    singular: "secret",
    kind: "Secret",
    namespaced: true,
    short_names: &[],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: true,
    fields: &["type"],
    merge: &[],
};

/// core/v1 serviceaccounts (+`token`).
pub static SERVICEACCOUNTS: Resource = Resource {
    id: 6,
    group: "",
    version: "v1",
    plural: "serviceaccounts",
    singular: "serviceaccount",
    kind: "ServiceAccount",
    namespaced: true,
    short_names: &["sa"],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: true,
    fields: &[],
    merge: &[("secrets", ListMerge::Key("name"))],
};

/// core/v1 services: stored and listed, nothing routes to them (the kubelet lists them for env vars).
pub static SERVICES: Resource = Resource {
    id: 7,
    group: "",
    version: "v1",
    plural: "services",
    singular: "service",
    kind: "Service",
    namespaced: true,
    short_names: &["svc"],
    status_subresource: true,
    create_on_update: false,
    unconditional_update: true,
    fields: &["spec.clusterIP", "spec.type"],
    merge: &[("spec.ports", ListMerge::Key("port"))],
};

/// events.k8s.io/v1 events.
pub static EVENTS_V1: Resource = Resource {
    id: 8,
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    singular: "event",
    kind: "Event",
    namespaced: true,
    short_names: &["ev"],
    status_subresource: false,
    create_on_update: true,
    unconditional_update: true,
    fields: &[
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "reason",
        "reportingController",
        "type",
    ],
    merge: &[],
};

/// coordination.k8s.io/v1 leases.
pub static LEASES: Resource = Resource {
    id: 9,
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    singular: "lease",
    kind: "Lease",
    namespaced: true,
    short_names: &[],
    status_subresource: false,
    create_on_update: true,
    unconditional_update: false,
    fields: &[],
    merge: &[],
};

/// node.k8s.io/v1 runtimeclasses.
pub static RUNTIMECLASSES: Resource = Resource {
    id: 10,
    group: "node.k8s.io",
    version: "v1",
    plural: "runtimeclasses",
    singular: "runtimeclass",
    kind: "RuntimeClass",
    namespaced: false,
    short_names: &[],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: false,
    fields: &[],
    merge: &[],
};

/// storage.k8s.io/v1 csidrivers.
pub static CSIDRIVERS: Resource = Resource {
    id: 11,
    group: "storage.k8s.io",
    version: "v1",
    plural: "csidrivers",
    singular: "csidriver",
    kind: "CSIDriver",
    namespaced: false,
    short_names: &[],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: false,
    fields: &[],
    merge: &[],
};

/// storage.k8s.io/v1 csinodes.
pub static CSINODES: Resource = Resource {
    id: 12,
    group: "storage.k8s.io",
    version: "v1",
    plural: "csinodes",
    singular: "csinode",
    kind: "CSINode",
    namespaced: false,
    short_names: &[],
    status_subresource: false,
    create_on_update: false,
    unconditional_update: false,
    fields: &[],
    merge: &[("spec.drivers", ListMerge::Key("name"))],
};

/// Every served resource, indexed by [`Resource::id`].
pub static ALL: [&Resource; 13] = [
    &NAMESPACES,
    &PODS,
    &NODES,
    &EVENTS,
    &CONFIGMAPS,
    &SECRETS,
    &SERVICEACCOUNTS,
    &SERVICES,
    &EVENTS_V1,
    &LEASES,
    &RUNTIMECLASSES,
    &CSIDRIVERS,
    &CSINODES,
];

/// The API groups served besides core, with their one version each.
pub fn groups() -> Vec<(&'static str, &'static str)> {
    let mut groups: Vec<(&str, &str)> = Vec::new();
    for r in ALL.iter().filter(|r| !r.group.is_empty()) {
        if !groups.iter().any(|(g, _)| *g == r.group) {
            groups.push((r.group, r.version));
        }
    }
    groups
}

/// The resource served as `plural` in `group/version`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static Resource> {
    ALL.iter()
        .copied()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// Whether `group/version` is served at all.
pub fn serves_group_version(group: &str, version: &str) -> bool {
    ALL.iter().any(|r| r.group == group && r.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_positions() {
        for (i, r) in ALL.iter().enumerate() {
            assert_eq!(r.id, i, "{}", r.plural);
        }
    }

    #[test]
    fn pod_conditions_merge_by_type() {
        assert_eq!(
            PODS.list_merge("status.conditions"),
            Some(ListMerge::Key("type"))
        );
        assert_eq!(PODS.list_merge("metadata.finalizers"), Some(ListMerge::Set));
        assert_eq!(PODS.list_merge("spec.tolerations"), None);
        assert_eq!(PODS.list_merge("status.containerStatuses"), None);
    }
}
