//! A real gRPC client no one here wrote: the official Python client (grpcio, C-core), which
//! sends the socket path percent-encoded as `:authority`. Ignored with the reason without it.

use std::process::ExitCode;
use std::time::Duration;

use nodeconform_fake_cri::FakeCri;
use nodeconform_testkit::{Suite, python_module};
use tokio::process::Command;

fn main() -> ExitCode {
    Suite::new()
        .async_test(
            "official_python_grpc_client",
            python_module("grpc", "grpcio"),
            |()| official_python_grpc_client(),
        )
        .run()
}

/// The official Python gRPC client (C-core), which sends the socket path
/// percent-encoded as `:authority`.
const PYTHON: &str = r#"
import sys, grpc
for target in ("unix://" + sys.argv[1], "unix:" + sys.argv[1]):
    with grpc.insecure_channel(target) as channel:
        version = channel.unary_unary("/runtime.v1.RuntimeService/Version")
        reply = version(b"", timeout=5)
        assert b"fake-cri" in reply, reply
        try:
            channel.unary_unary("/runtime.v1.RuntimeService/ContainerStatus")(b"\n\x07missing", timeout=5)
            raise SystemExit("ContainerStatus of a missing container succeeded")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND, error
print("grpcio-ok")
"#;

async fn official_python_grpc_client() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cri = FakeCri::builder()
        .socket(dir.path().join("cri.sock"))
        .control_socket(dir.path().join("control.sock"))
        .start()
        .await
        .expect("fake-cri starts");
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        Command::new("python3")
            .arg("-c")
            .arg(PYTHON)
            .arg(cri.socket_path())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("python finished in time")
    .expect("python runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains("grpcio-ok"),
        "{stdout}\n{stderr}"
    );
}
