//! `src/wire/schema.rs` is generated: the Go types kube-apiserver encodes the served kinds
//! with, read from the sources of `k8s.io/api` and `k8s.io/apimachinery` by a small Go
//! parser of our own (no Go toolchain), walked from the root types and rendered as Rust
//! through rustfmt. The trial fails when the checked-in file is not what the sources
//! generate; it is ignored, with the reason, when no sources are given.
//!
//! To check: `NODECONFORM_K8S_SOURCES=<kubernetes v1.36.2>/staging/src/k8s.io cargo test
//! -p nodeconform-apiserver --test schema`; to regenerate, add
//! `NODECONFORM_UPDATE_GENERATED=1`.

mod go;
mod lex;
mod render;
mod walk;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use nodeconform_testkit::{Suite, nothing, program};

use walk::TypeId;

/// The variable naming the sources: a directory like `staging/src/k8s.io` of a Kubernetes
/// checkout, with `api/` and `apimachinery/`.
const SOURCES: &str = "NODECONFORM_K8S_SOURCES";

/// The types objects are encoded as: each served kind's (`wire::root`) and the
/// subresources' bodies (`TokenRequest` of `serviceaccounts/token`). Every other table
/// is there because one of these reaches it.
const ROOTS: &[(&str, &str)] = &[
    ("k8s.io/api/core/v1", "Pod"),
    ("k8s.io/api/core/v1", "Node"),
    ("k8s.io/api/core/v1", "Namespace"),
    ("k8s.io/api/core/v1", "ConfigMap"),
    ("k8s.io/api/core/v1", "Secret"),
    ("k8s.io/api/core/v1", "ServiceAccount"),
    ("k8s.io/api/core/v1", "Service"),
    ("k8s.io/api/core/v1", "Event"),
    ("k8s.io/api/coordination/v1", "Lease"),
    ("k8s.io/api/node/v1", "RuntimeClass"),
    ("k8s.io/api/storage/v1", "CSIDriver"),
    ("k8s.io/api/storage/v1", "CSINode"),
    ("k8s.io/api/events/v1", "Event"),
    ("k8s.io/api/authentication/v1", "TokenRequest"),
];

fn main() -> ExitCode {
    Suite::new()
        .test(
            "schema_rs_is_generated_from_the_go_types",
            sources().and_then(|dir| {
                let rustfmt = program("rustfmt", "rustup component add rustfmt")?;
                Ok((dir, rustfmt))
            }),
            |(dir, rustfmt)| schema_rs_is_generated_from_the_go_types(&dir, &rustfmt),
        )
        .test("go_parser_reads_fields_tags_and_markers", nothing(), |()| {
            go_parser_reads_fields_tags_and_markers()
        })
        .test("table_names_split_acronyms", nothing(), |()| {
            table_names_split_acronyms()
        })
        .run()
}

/// The sources' directory, from the environment; a directory that is not one is an error
/// of the trial (it was asked for), not a reason to ignore it.
fn sources() -> Result<PathBuf, String> {
    std::env::var_os(SOURCES).map(PathBuf::from).ok_or_else(|| {
        format!(
            "{SOURCES} is not set: set it to the staging/src/k8s.io directory of a \
             Kubernetes v1.36.2 checkout (git clone --depth 1 --branch v1.36.2 \
             https://github.com/kubernetes/kubernetes)"
        )
    })
}

fn schema_rs_is_generated_from_the_go_types(dir: &Path, rustfmt: &Path) {
    for sub in [
        "api/core/v1/types.go",
        "apimachinery/pkg/apis/meta/v1/types.go",
    ] {
        assert!(
            dir.join(sub).is_file(),
            "{SOURCES}={} has no {sub}: it should be the staging/src/k8s.io directory of a \
             Kubernetes checkout",
            dir.display()
        );
    }
    let roots: Vec<TypeId> = ROOTS.iter().map(|(p, n)| TypeId::new(p, n)).collect();
    let mut sources = walk::Sources::new(dir.to_owned());
    let tables = walk::tables(&mut sources, &roots).unwrap_or_else(|e| panic!("{e}"));
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let fresh = render::rustfmt(rustfmt, crate_dir, &render::source(&tables));
    let checked_in = crate_dir.join("src/wire/schema.rs");
    if std::env::var_os("NODECONFORM_UPDATE_GENERATED").is_some() {
        std::fs::write(&checked_in, &fresh).expect("schema.rs written");
        return;
    }
    let current = std::fs::read_to_string(&checked_in).unwrap_or_default();
    if let Some(difference) = render::first_difference(&current, &fresh) {
        panic!(
            "{} is not what the Go types at {} generate ({} tables); first difference at \
             {difference}\nregenerate it with: NODECONFORM_UPDATE_GENERATED=1 {SOURCES}={} \
             cargo test -p nodeconform-apiserver --test schema",
            checked_in.display(),
            dir.display(),
            tables.len(),
            dir.display(),
        );
    }
}

/// The parser on a made-up declaration: names, tags, markers, embedded fields, comments
/// that belong elsewhere.
fn go_parser_reads_fields_tags_and_markers() {
    let src = r#"
package v1

import (
	"fmt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const x = 1 // not a doc comment

// +structType=atomic
type Thing struct {
	metav1.TypeMeta `json:",inline"`
	// Items are keyed.
	// +listType=map
	// +listMapKey=name
	Items []*Item `json:"items,omitempty" patchStrategy:"merge" patchMergeKey:"name"`

	A, B int32 // trailing, not B's
	Other  map[string]Item
}

func (t *Thing) MarshalJSON() ([]byte, error) { return fmt.Appendf(nil, "{}"), nil }
"#;
    let file = go::parse_file(src).expect("parses");
    assert_eq!(file.package, "v1");
    assert_eq!(
        file.imports.get("metav1").map(String::as_str),
        Some("k8s.io/apimachinery/pkg/apis/meta/v1")
    );
    assert_eq!(file.imports.get("fmt").map(String::as_str), Some("fmt"));
    assert!(
        file.methods
            .contains(&("Thing".to_owned(), "MarshalJSON".to_owned()))
    );
    let [thing] = &file.types[..] else {
        panic!("one type: {:?}", file.types)
    };
    assert_eq!(go::markers(&thing.doc), [("structType", "atomic")]);
    let go::Expr::Struct(fields) = &thing.ty else {
        panic!("a struct: {:?}", thing.ty)
    };
    let names: Vec<_> = fields.iter().map(|f| f.name.as_deref()).collect();
    assert_eq!(
        names,
        [None, Some("Items"), Some("A"), Some("B"), Some("Other")]
    );
    assert_eq!(go::tag_value(&fields[0].tag, "json"), Some(",inline"));
    assert_eq!(
        go::markers(&fields[1].doc),
        [("listType", "map"), ("listMapKey", "name")]
    );
    assert_eq!(go::tag_value(&fields[1].tag, "patchMergeKey"), Some("name"));
    assert!(fields[2].doc.is_empty() && fields[3].doc.is_empty());
    assert!(fields[4].doc.is_empty(), "{:?}", fields[4].doc);
    assert!(matches!(&fields[4].ty, go::Expr::Map(..)));
}

fn table_names_split_acronyms() {
    for (go, table) in [
        (
            "AWSElasticBlockStoreVolumeSource",
            "CORE_AWS_ELASTIC_BLOCK_STORE_VOLUME_SOURCE",
        ),
        ("SELinuxOptions", "CORE_SE_LINUX_OPTIONS"),
        ("CephFSVolumeSource", "CORE_CEPH_FS_VOLUME_SOURCE"),
        ("PodOS", "CORE_POD_OS"),
        ("HTTPGetAction", "CORE_HTTP_GET_ACTION"),
    ] {
        assert_eq!(TypeId::new("k8s.io/api/core/v1", go).const_name(), table);
    }
    assert_eq!(
        TypeId::new("k8s.io/apimachinery/pkg/apis/meta/v1", "ObjectMeta").const_name(),
        "META_OBJECT_META"
    );
}
