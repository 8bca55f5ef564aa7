//! The text of `src/wire/schema.rs`: the tables as Rust, formatted by rustfmt (so that
//! the checked-in file is `cargo fmt` clean and a diff of it reads like any other).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use super::walk::{Field, List, Table, Ty};

/// The file's header: what it is and how it is made.
const HEADER: &str = "\
//! How kube-apiserver v1.36.2 encodes the objects the double serves: every field of
//! their Go types with its JSON name and `omitempty`/`omitzero`, read from the struct tags
//! of `k8s.io/api` and `k8s.io/apimachinery` at that version. Data, not logic: see
//! [`super`] for what is done with it. Do not edit by hand: `apiserver/tests/schema/`
//! generates it (`NODECONFORM_K8S_SOURCES=<kubernetes v1.36.2>/staging/src/k8s.io
//! NODECONFORM_UPDATE_GENERATED=1 cargo test -p nodeconform-apiserver --test schema`).

#![allow(missing_docs)]

use super::{Field, Ty};
";

/// The file, unformatted.
pub fn source(tables: &[Table]) -> String {
    let mut out = String::from(HEADER);
    for table in tables {
        let fields: Vec<String> = table.fields.iter().map(field).collect();
        write!(
            out,
            "\n/// `{}`\npub static {}: &[Field] = &[{}];\n",
            table.id.display(),
            table.id.const_name(),
            fields.join(", ")
        )
        .expect("writing to a String");
    }
    out
}

/// `Field::new(..)` and its builder calls, always in this order.
fn field(f: &Field) -> String {
    let mut out = format!("Field::new({:?}, {})", f.name, ty(&f.ty));
    if f.omitempty {
        out.push_str(".omitempty()");
    }
    if f.omitzero {
        out.push_str(".omitzero()");
    }
    if f.inline {
        out.push_str(".inline()");
    }
    match &f.list {
        List::Atomic => {}
        List::Set => out.push_str(".list_set()"),
        List::Map(keys) => {
            let keys: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
            write!(out, ".list_map(&[{}])", keys.join(", ")).expect("writing to a String");
        }
    }
    if f.atomic {
        out.push_str(".atomic()");
    }
    out
}

fn ty(t: &Ty) -> String {
    match t {
        Ty::Str => "Ty::Str".into(),
        Ty::Int => "Ty::Int".into(),
        Ty::Float => "Ty::Float".into(),
        Ty::Bool => "Ty::Bool".into(),
        Ty::Bytes => "Ty::Bytes".into(),
        Ty::Time => "Ty::Time".into(),
        Ty::MicroTime => "Ty::MicroTime".into(),
        Ty::Quantity => "Ty::Quantity".into(),
        Ty::IntOrString => "Ty::IntOrString".into(),
        Ty::Raw => "Ty::Raw".into(),
        Ty::Ptr(inner) => format!("Ty::Ptr(&{})", ty(inner)),
        Ty::Slice(inner) => format!("Ty::Slice(&{})", ty(inner)),
        Ty::Map(inner) => format!("Ty::Map(&{})", ty(inner)),
        Ty::Struct(table) => format!("Ty::Struct({table})"),
    }
}

/// `source` through `rustfmt`, run in `crate_dir` so that it reads the workspace's
/// `rustfmt.toml` as `cargo fmt` does.
pub fn rustfmt(rustfmt: &Path, crate_dir: &Path, source: &str) -> String {
    let mut child = Command::new(rustfmt)
        .args(["--edition", "2024", "--emit", "stdout"])
        .current_dir(crate_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{} does not start: {e}", rustfmt.display()));
    child
        .stdin
        .take()
        .expect("rustfmt's stdin")
        .write_all(source.as_bytes())
        .expect("rustfmt reads the source");
    let out = child.wait_with_output().expect("rustfmt finishes");
    assert!(
        out.status.success(),
        "rustfmt failed on the generated source: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("rustfmt writes UTF-8")
}

/// Where `current` first differs from `fresh`: its line number, the table it is in, and
/// both lines. `None` when they are the same.
pub fn first_difference(current: &str, fresh: &str) -> Option<String> {
    let (mut old, mut new) = (current.lines(), fresh.lines());
    let mut table = "the header";
    for number in 1.. {
        let (a, b) = (old.next(), new.next());
        if a.is_none() && b.is_none() {
            return (current != fresh).then(|| "at the end of the file".to_owned());
        }
        if a != b {
            return Some(format!(
                "line {number} (in {table}):\n  checked in: {}\n  generated:  {}",
                a.unwrap_or("(end of file)"),
                b.unwrap_or("(end of file)")
            ));
        }
        if let Some(name) = a
            .and_then(|l| l.strip_prefix("pub static "))
            .and_then(|l| l.split(':').next())
        {
            table = name;
        }
    }
    unreachable!()
}
