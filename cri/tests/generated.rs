//! The checked-in bindings, `src/generated/runtime.v1.rs`, are what protox and
//! tonic-prost-build make of `proto/api.proto` today. Generating them at build
//! time put a protobuf compiler and a code generator (and their dependencies)
//! in front of every build of every crate that speaks CRI; checked in, they cost
//! a build nothing, and this test fails as soon as the proto file or the
//! generator's version changes without them.
//!
//! To regenerate: `NODECONFORM_UPDATE_GENERATED=1 cargo test -p nodeconform-cri --test generated`.

use std::path::Path;

#[test]
fn checked_in_bindings_are_generated_from_the_proto() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = tempfile::tempdir().expect("a temporary directory");
    let fds =
        protox::compile(["api.proto"], [crate_dir.join("proto")]).expect("api.proto compiles");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .out_dir(out.path())
        .compile_fds(fds)
        .expect("bindings are generated");
    let fresh = std::fs::read_to_string(out.path().join("runtime.v1.rs")).expect("generated file");
    let checked_in = crate_dir.join("src/generated/runtime.v1.rs");
    if std::env::var_os("NODECONFORM_UPDATE_GENERATED").is_some() {
        std::fs::write(&checked_in, &fresh).expect("bindings written");
        return;
    }
    let current = std::fs::read_to_string(&checked_in).unwrap_or_default();
    assert!(
        current == fresh,
        "{} is not what proto/api.proto generates: run \
         NODECONFORM_UPDATE_GENERATED=1 cargo test -p nodeconform-cri --test generated",
        checked_in.display()
    );
}
