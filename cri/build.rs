//! Generates the CRI v1 bindings from `proto/api.proto` with a pure-Rust
//! protobuf compiler (protox), so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(["api.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    println!("cargo:rerun-if-changed=proto/api.proto");
    Ok(())
}
