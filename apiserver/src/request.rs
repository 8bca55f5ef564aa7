//! Request paths and query parameters, parsed the way kube-apiserver's request-info
//! resolver reads them (`/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}`,
//! `/apis/{group}/{version}/...`, the legacy `/watch/` prefix).

use std::collections::HashMap;

use crate::resources::{self, Resource};
use crate::status::{Error, Result};

/// What a path addresses.
#[derive(Debug)]
pub enum Route {
    /// `/healthz`, `/livez`, `/readyz` (and their sub-checks).
    Health,
    /// `/version`.
    Version,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/{group}`.
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`.
    Resources {
        /// The group ("" for core).
        group: String,
        /// The version.
        version: String,
    },
    /// `/openapi/v2` (and the legacy `/swagger-2.0.0.pb-v1`).
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiRoot,
    /// `/openapi/v3/{api/v1 | apis/group/version}`.
    OpenApi(String),
    /// A resource collection, object or subresource.
    Object(Target),
}

/// A resource request's target.
#[derive(Debug)]
pub struct Target {
    /// The resource.
    pub resource: &'static Resource,
    /// The namespace from the path, if any.
    pub namespace: Option<String>,
    /// The object name, if any.
    pub name: Option<String>,
    /// The subresource (`status`, `eviction`, `token`, ...), if any.
    pub subresource: Option<String>,
    /// The path used the legacy `/watch/` prefix.
    pub watch: bool,
}

impl Target {
    /// The namespace or "" (cluster-scoped and all-namespaces requests).
    pub fn ns(&self) -> &str {
        self.namespace.as_deref().unwrap_or("")
    }
}

/// Resolves a request path.
pub fn route(path: &str) -> Result<Route> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segments.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Ok(Route::Health),
        ["version"] => Ok(Route::Version),
        ["api"] => Ok(Route::CoreVersions),
        ["apis"] => Ok(Route::Groups),
        ["apis", group] if resources::groups().iter().any(|(g, _)| g == group) => {
            Ok(Route::Group(group.to_string()))
        }
        ["openapi", "v2"] | ["swagger-2.0.0.pb-v1"] => Ok(Route::OpenApiV2),
        ["openapi", "v3"] => Ok(Route::OpenApiRoot),
        ["openapi", "v3", rest @ ..] => Ok(Route::OpenApi(rest.join("/"))),
        ["api", version, rest @ ..] => resource_route("", version, rest),
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest),
        _ => Err(Error::PageNotFound),
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str]) -> Result<Route> {
    if !resources::serves_group_version(group, version) {
        return Err(Error::PageNotFound);
    }
    let (watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    if rest.is_empty() {
        if watch {
            return Err(Error::NoResource);
        }
        return Ok(Route::Resources {
            group: group.to_string(),
            version: version.to_string(),
        });
    }
    let find = |plural: &str| resources::find(group, version, plural);
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|r| r.namespaced) => {
            (Some(ns.to_string()), [&[*plural], tail].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let resource = find(rest[0]).ok_or(Error::NoResource)?;
    if rest.len() > 3 || (namespace.is_some() && !resource.namespaced) {
        return Err(Error::NoResource);
    }
    let served = match rest.get(2).copied() {
        None => true,
        Some("status") => resource.status_subresource,
        Some("eviction" | "binding" | "log" | "resize" | "exec" | "attach" | "portforward") => {
            std::ptr::eq(resource, &resources::PODS)
        }
        Some("token") => std::ptr::eq(resource, &resources::SERVICEACCOUNTS),
        Some(_) => false,
    };
    if !served {
        return Err(Error::NoResource);
    }
    Ok(Route::Object(Target {
        resource,
        namespace,
        name: rest.get(1).map(|s| s.to_string()),
        subresource: rest.get(2).map(|s| s.to_string()),
        watch,
    }))
}

/// Decoded query parameters.
#[derive(Debug, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Self {
        Query(
            form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// A parameter, if present and non-empty.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// A boolean parameter (`1`, `true`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("1" | "true" | "True"))
    }

    /// An integer parameter; malformed is a 400.
    pub fn int(&self, key: &str) -> Result<Option<i64>> {
        self.get(key)
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    Error::bad_request(format!("invalid value {v:?} for query parameter {key}"))
                })
            })
            .transpose()
    }
}

/// The target of an object path, for tests.
#[cfg(test)]
pub(crate) fn target(path: &str) -> Target {
    match route(path).unwrap() {
        Route::Object(t) => t,
        other => panic!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_paths() {
        let t = target("/api/v1/namespaces/ns/pods/p/status");
        assert_eq!(t.resource.plural, "pods");
        assert_eq!(t.namespace.as_deref(), Some("ns"));
        assert_eq!(t.name.as_deref(), Some("p"));
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = target("/api/v1/namespaces/ns");
        assert_eq!(t.resource.plural, "namespaces");
        assert_eq!(t.name.as_deref(), Some("ns"));
        let t = target("/api/v1/namespaces/ns/status");
        assert_eq!(t.subresource.as_deref(), Some("status"));
        let t = target("/api/v1/pods");
        assert!(t.namespace.is_none() && t.name.is_none());
        assert!(target("/api/v1/watch/namespaces/ns/pods").watch);
    }

    #[test]
    fn group_paths_and_unknowns() {
        let t = target("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n1");
        assert_eq!(t.resource.kind, "Lease");
        assert!(matches!(
            route("/apis/coordination.k8s.io"),
            Ok(Route::Group(_))
        ));
        for bad in [
            "/api/v1/widgets",
            "/apis/x/v1/pods",
            "/api/v1/namespaces/a/nodes",
            "/nope",
            "/api/v1/pods/a/b/c",
        ] {
            assert_eq!(route(bad).unwrap_err().code(), 404, "{bad}");
        }
    }

    #[test]
    fn query() {
        let q = Query::parse(Some("watch=1&fieldSelector=spec.nodeName%3Dn1&limit=x"));
        assert!(q.flag("watch"));
        assert_eq!(q.get("fieldSelector"), Some("spec.nodeName=n1"));
        assert_eq!(q.int("limit").unwrap_err().code(), 400);
    }
}
