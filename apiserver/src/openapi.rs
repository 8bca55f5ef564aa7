//! A minimal OpenAPI surface: `/openapi/v3` (a root and one document per group-version) and
//! `/openapi/v2` (protobuf and JSON), each listing every resource's PATCH operation with its
//! `x-kubernetes-group-version-kind` and the `dryRun`, `fieldValidation` and `fieldManager`
//! query parameters.
//!
//! That is what kubectl reads to learn that the server validates fields and dry-runs writes
//! itself (`QueryParamVerifierV3` from 1.28, the v2 verifiers before); without it kubectl
//! falls back to client-side validation and fails. No schemas are served, and the PATCH
//! operations do not advertise strategic merge, so `kubectl apply` computes its patches
//! from its built-in types (its documented fallback) and `kubectl explain` has nothing to
//! explain.

use serde_json::{Value, json};

use crate::resources::{self, Resource};
use crate::version::Version;

/// Changes whenever the documents change, so kubectl's disk cache (keyed by it) refreshes.
const HASH: &str = "nodeconform-v2";

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `/openapi/v3`: where each group-version's document is.
pub fn root() -> Value {
    let mut paths = serde_json::Map::new();
    let mut gvs: Vec<(&str, &str)> = vec![("", "v1")];
    gvs.extend(resources::groups());
    for (g, v) in gvs {
        let p = gv_path(g, v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={HASH}")}),
        );
    }
    json!({"paths": paths})
}

fn patch_operation(r: &Resource) -> Value {
    json!({
        "operationId": format!("patch{}", r.kind),
        "x-kubernetes-action": "patch",
        "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
        "parameters": [
            {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
            {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}
        ],
        "requestBody": {"content": {
            "application/json-patch+json": {"schema": {"type": "object"}},
            "application/merge-patch+json": {"schema": {"type": "object"}},
            "application/apply-patch+yaml": {"schema": {"type": "object"}}
        }},
        "responses": {"200": {"description": "OK"}}
    })
}

/// `/openapi/v3/{api/v1 | apis/group/version}`, if served.
pub fn group_version(path: &str, release: Version) -> Option<Value> {
    let (group, version) = match path.split('/').collect::<Vec<_>>().as_slice() {
        ["api", v] => ("", *v),
        ["apis", g, v] => (*g, *v),
        _ => return None,
    };
    if !resources::serves_group_version(group, version) {
        return None;
    }
    let mut paths = serde_json::Map::new();
    for r in resources::ALL
        .iter()
        .filter(|r| r.group == group && r.version == version)
    {
        let p = object_path(r);
        paths.insert(p, json!({"patch": patch_operation(r)}));
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (nodeconform-apiserver)", "version": info_version(release)},
        "paths": paths,
        "components": {"schemas": {}}
    }))
}

/// The documents' `info.version`: the server's release without a suffix, as kube-apiserver
/// sets it from its version (`v1.36.2`).
fn info_version(release: Version) -> &'static str {
    let git = release.git_version();
    git.split('-').next().unwrap_or(git)
}

/// The media type of the protobuf OpenAPI v2 document.
pub const V2_PROTOBUF: &str = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// The query parameters every PATCH operation declares.
const PATCH_PARAMS: [&str; 3] = ["dryRun", "fieldValidation", "fieldManager"];

/// A minimal protobuf writer for the gnostic `openapi_v2` messages below.
#[derive(Default)]
struct Proto(Vec<u8>);

impl Proto {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn bytes(mut self, field: u64, b: &[u8]) -> Self {
        self.varint((field << 3) | 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn string(self, field: u64, s: &str) -> Self {
        self.bytes(field, s.as_bytes())
    }

    fn message(self, field: u64, m: Proto) -> Self {
        self.bytes(field, &m.0)
    }
}

/// `PathItem { patch: Operation { operation_id, parameters, vendor_extension } }` for one
/// resource, as gnostic's `OpenAPIv2.proto` numbers the fields.
fn v2_path_item(r: &Resource) -> Proto {
    let mut op = Proto::default().string(5, &format!("patch{}", r.kind));
    for name in PATCH_PARAMS {
        // ParametersItem.parameter(1) → Parameter.non_body_parameter(2) →
        // NonBodyParameter.query_parameter_sub_schema(3) → { in(2), name(4), type(6) }
        let query = Proto::default()
            .string(2, "query")
            .string(4, name)
            .string(6, "string");
        let item = Proto::default().message(
            1,
            Proto::default().message(2, Proto::default().message(3, query)),
        );
        op = op.message(8, item);
    }
    let gvk = format!(
        "group: \"{}\"\nkind: {}\nversion: {}\n",
        r.group, r.kind, r.version
    );
    // NamedAny { name(1), value(2): Any { yaml(2) } }
    let ext = Proto::default()
        .string(1, "x-kubernetes-group-version-kind")
        .message(2, Proto::default().string(2, &gvk));
    op = op.message(13, ext);
    Proto::default().message(8, op)
}

fn object_path(r: &Resource) -> String {
    let base = format!("/{}", gv_path(r.group, r.version));
    if r.namespaced {
        format!("{base}/namespaces/{{namespace}}/{}/{{name}}", r.plural)
    } else {
        format!("{base}/{}/{{name}}", r.plural)
    }
}

/// `/openapi/v2` as protobuf (gnostic `openapi_v2.Document`): each resource's PATCH
/// operation with its group-version-kind and the `dryRun`/`fieldValidation` parameters,
/// which is what kubectl before 1.28 reads to decide on server-side dry run and validation.
/// Without schemas (`definitions`) kubectl skips client-side validation of every kind.
pub fn v2_protobuf(release: Version) -> Vec<u8> {
    let info = Proto::default()
        .string(1, "Kubernetes")
        .string(2, info_version(release));
    let mut paths = Proto::default();
    for r in resources::ALL.iter() {
        let named = Proto::default()
            .string(1, &object_path(r))
            .message(2, v2_path_item(r));
        paths = paths.message(2, named);
    }
    Proto::default()
        .string(1, "2.0")
        .message(2, info)
        .message(8, paths)
        .0
}

/// `/openapi/v2` as JSON: the same document.
pub fn v2_json(release: Version) -> Value {
    let mut paths = serde_json::Map::new();
    for r in resources::ALL.iter() {
        let params: Vec<Value> = PATCH_PARAMS
            .iter()
            .map(|n| json!({"name": n, "in": "query", "type": "string", "uniqueItems": true}))
            .collect();
        paths.insert(
            object_path(r),
            json!({"patch": {
                "operationId": format!("patch{}", r.kind),
                "parameters": params,
                "x-kubernetes-group-version-kind": {"group": r.group, "version": r.version, "kind": r.kind},
            }}),
        );
    }
    json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": info_version(release)}, "paths": paths})
}

#[cfg(test)]
mod tests {
    #[test]
    fn v2_protobuf_is_well_formed() {
        let doc = super::v2_protobuf(super::Version::NEWEST);
        assert_eq!(&doc[..5], b"\x0a\x032.0");
        assert_eq!(doc[5], 0x12);
        let text = String::from_utf8_lossy(&doc);
        assert!(text.contains("/api/v1/namespaces/{namespace}/pods/{name}"));
        assert!(text.contains("x-kubernetes-group-version-kind"));
        assert!(text.contains("dryRun"));
        assert_eq!(
            super::v2_json(super::Version::NEWEST)["paths"]
                .as_object()
                .unwrap()
                .len(),
            13
        );
    }

    use super::*;

    #[test]
    fn root_points_at_served_documents() {
        let r = root();
        let url = r["paths"]["api/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/api/v1?hash="));
        let doc = group_version("apis/coordination.k8s.io/v1", Version::NEWEST).unwrap();
        assert_eq!(
            doc["info"]["version"], "v1.36.2",
            "the release, as /version's"
        );
        let op = &doc["paths"]["/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{name}"]
            ["patch"];
        assert_eq!(op["x-kubernetes-group-version-kind"]["kind"], "Lease");
        assert!(group_version("apis/nope/v1", Version::NEWEST).is_none());
        assert_eq!(v2_json(Version::V1_28)["info"]["version"], "v1.28.7");
    }
}
