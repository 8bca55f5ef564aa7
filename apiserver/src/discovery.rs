//! Legacy (unaggregated) discovery: `/version`, `/api`, `/apis`, `/apis/{group}` and the
//! resource lists, built from the resource table with k8s-openapi's discovery types. Clients
//! that ask for aggregated discovery get these and fall back, as against an older server.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    APIGroup, APIGroupList, APIResource, APIResourceList, APIVersions, GroupVersionForDiscovery,
    ServerAddressByClientCIDR,
};
use k8s_openapi::apimachinery::pkg::version::Info;
use serde_json::Value;

use crate::resources::{self, Resource};
use crate::version::Version;

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `/version`: the Kubernetes release the double emulates.
pub fn version(emulated: Version) -> Value {
    to_value(&Info {
        major: "1".into(),
        minor: emulated.minor().to_string(),
        git_version: emulated.git_version().into(),
        git_commit: "0000000000000000000000000000000000000000".into(),
        git_tree_state: "clean".into(),
        build_date: "2025-04-23T00:00:00Z".into(),
        go_version: "none (nodeconform-apiserver, Rust)".into(),
        compiler: "rustc".into(),
        platform: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
        ..Info::default()
    })
}

fn addresses(server: &str) -> Vec<ServerAddressByClientCIDR> {
    vec![ServerAddressByClientCIDR {
        client_cidr: "0.0.0.0/0".into(),
        server_address: server.into(),
    }]
}

/// `/api`.
pub fn core_versions(server: &str) -> Value {
    to_value(&APIVersions {
        versions: vec!["v1".into()],
        server_address_by_client_cidrs: addresses(server),
    })
}

fn group(name: &str, version: &str) -> APIGroup {
    let gv = GroupVersionForDiscovery {
        group_version: format!("{name}/{version}"),
        version: version.into(),
    };
    APIGroup {
        name: name.into(),
        preferred_version: Some(gv.clone()),
        versions: vec![gv],
        server_address_by_client_cidrs: None,
    }
}

/// `/apis`.
pub fn groups() -> Value {
    to_value(&APIGroupList {
        groups: resources::groups()
            .into_iter()
            .map(|(g, v)| group(g, v))
            .collect(),
    })
}

/// `/apis/{group}`, if served.
pub fn api_group(name: &str) -> Option<Value> {
    resources::groups()
        .into_iter()
        .find(|(g, _)| *g == name)
        .map(|(g, v)| to_value(&group(g, v)))
}

fn entry(r: &Resource, name: String, kind: &str, verbs: &[&str]) -> APIResource {
    APIResource {
        name: name.clone(),
        singular_name: if name.contains('/') {
            String::new()
        } else {
            r.singular.into()
        },
        namespaced: r.namespaced,
        kind: kind.into(),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        short_names: Some(r.short_names.iter().map(|s| s.to_string()).collect())
            .filter(|s: &Vec<String>| !s.is_empty() && !name.contains('/')),
        ..APIResource::default()
    }
}

/// `/api/v1` or `/apis/{group}/{version}`: the resources and subresources served by
/// `release`.
pub fn resource_list(group: &str, version: &str, release: Version) -> Value {
    let mut list = Vec::new();
    for r in resources::ALL
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let mut main = entry(r, r.plural.into(), r.kind, &VERBS);
        if std::ptr::eq(*r, &resources::PODS) || std::ptr::eq(*r, &resources::SERVICES) {
            main.categories = Some(vec!["all".into()]);
        }
        list.push(main);
        if r.status_subresource {
            list.push(entry(
                r,
                format!("{}/status", r.plural),
                r.kind,
                &["get", "patch", "update"],
            ));
        }
        if std::ptr::eq(*r, &resources::PODS) {
            let mut eviction = entry(r, "pods/eviction".into(), "Eviction", &["create"]);
            eviction.group = Some("policy".into());
            eviction.version = Some("v1".into());
            list.push(eviction);
            list.push(entry(r, "pods/binding".into(), "Binding", &["create"]));
            list.push(entry(r, "pods/log".into(), "Pod", &["get"]));
            for (sub, kind) in [
                ("attach", "PodAttachOptions"),
                ("exec", "PodExecOptions"),
                ("portforward", "PodPortForwardOptions"),
            ] {
                list.push(entry(r, format!("pods/{sub}"), kind, &["create", "get"]));
            }
            if release.pods_resize() {
                list.push(entry(
                    r,
                    "pods/resize".into(),
                    "Pod",
                    &["get", "patch", "update"],
                ));
            }
        }
        if std::ptr::eq(*r, &resources::NODES) {
            list.push(entry(
                r,
                "nodes/proxy".into(),
                "NodeProxyOptions",
                &["create", "delete", "get", "patch", "update"],
            ));
        }
        if std::ptr::eq(*r, &resources::SERVICEACCOUNTS) {
            let mut token = entry(
                r,
                "serviceaccounts/token".into(),
                "TokenRequest",
                &["create"],
            );
            token.group = Some("authentication.k8s.io".into());
            token.version = Some("v1".into());
            list.push(token);
        }
    }
    let group_version = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    to_value(&APIResourceList {
        group_version,
        resources: list,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_pods_and_subresources() {
        let v = resource_list("", "v1", Version::NEWEST);
        assert_eq!(v["kind"], "APIResourceList");
        let names: Vec<&str> = v["resources"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["name"].as_str())
            .collect();
        for n in [
            "pods",
            "pods/status",
            "pods/eviction",
            "pods/binding",
            "pods/log",
            "pods/exec",
            "pods/attach",
            "pods/portforward",
            "pods/resize",
            "nodes/status",
            "nodes/proxy",
            "serviceaccounts/token",
        ] {
            assert!(names.contains(&n), "{n}");
        }
    }

    #[test]
    fn resize_is_served_from_1_33() {
        let old = resource_list("", "v1", Version::V1_28).to_string();
        assert!(!old.contains("pods/resize"));
    }

    #[test]
    fn groups_include_coordination() {
        let v = groups();
        assert!(v.to_string().contains("coordination.k8s.io/v1"));
        assert!(api_group("coordination.k8s.io").is_some());
        assert_eq!(version(Version::V1_28)["minor"], "28");
    }
}
