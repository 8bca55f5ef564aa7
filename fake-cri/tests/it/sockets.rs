//! The CRI and control sockets: permissions, sockets in use, stale and
//! foreign files, and a clean shutdown.

use crate::common;

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::time::Duration;

use common::{Env, LIMIT};
use nodeconform_cri::{RuntimeServiceClient, v1};
use nodeconform_fake_cri::{FakeCri, StartError};

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

async fn version(endpoint: &str) -> Result<v1::VersionResponse, String> {
    let channel = nodeconform_cri::connect(endpoint)
        .await
        .map_err(|e| e.to_string())?;
    RuntimeServiceClient::new(channel)
        .version(v1::VersionRequest::default())
        .await
        .map(tonic::Response::into_inner)
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn sockets_are_private() {
    let env = Env::start().await;
    for path in [
        env.cri.socket_path(),
        env.cri.control_socket_path().unwrap(),
    ] {
        assert!(std::fs::metadata(path).unwrap().file_type().is_socket());
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }
}

#[tokio::test]
async fn a_socket_in_use_is_refused_and_its_server_keeps_serving() {
    let env = Env::start().await;
    let second = FakeCri::builder()
        .socket(env.cri.socket_path())
        .start()
        .await;
    assert!(
        matches!(second, Err(StartError::SocketInUse { .. })),
        "{second:?}"
    );
    version(&env.cri.endpoint())
        .await
        .expect("the first server still serves");

    // Control socket in use: refused, and the new CRI socket is not left behind.
    let fresh = env.dir.path().join("second.sock");
    let second = FakeCri::builder()
        .socket(&fresh)
        .control_socket(env.control_socket())
        .start()
        .await;
    assert!(
        matches!(second, Err(StartError::SocketInUse { .. })),
        "{second:?}"
    );
    assert!(
        !fresh.exists(),
        "a failed start leaves no socket at {}",
        fresh.display()
    );
    let (code, _) = env.http("GET", "/healthz", "").await;
    assert_eq!(code, 200, "the first control server still serves");
}

#[tokio::test]
async fn a_stale_socket_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cri.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(
        path.exists(),
        "the stale socket file stays after its listener is gone"
    );
    let cri = FakeCri::builder()
        .socket(&path)
        .start()
        .await
        .expect("replaces a stale socket");
    version(&cri.endpoint())
        .await
        .expect("serves on the replaced socket");
    assert_eq!(mode(&path), 0o600);
    cri.shutdown().await;
}

#[tokio::test]
async fn a_regular_file_is_not_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cri.sock");
    std::fs::write(&path, "precious").unwrap();
    let result = FakeCri::builder().socket(&path).start().await;
    assert!(
        matches!(result, Err(StartError::NotASocket { .. })),
        "{result:?}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "precious");

    let result = FakeCri::builder().start().await;
    assert!(matches!(result, Err(StartError::NoSocket)), "{result:?}");
}

#[tokio::test]
async fn socket_directories_are_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/fake-cri/cri.sock");
    let cri = FakeCri::builder().socket(&path).start().await.unwrap();
    version(&cri.endpoint()).await.unwrap();
    cri.shutdown().await;
}

#[tokio::test]
async fn shutdown_removes_the_sockets() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    env.run(&sandbox, "c", "sleep 600").await;
    let Env {
        cri,
        runtime,
        images,
        dir,
    } = env;
    drop((runtime, images));
    let (socket, control) = (
        cri.socket_path().to_owned(),
        dir.path().join("control.sock"),
    );
    tokio::time::timeout(LIMIT, cri.shutdown())
        .await
        .expect("shutdown finishes");
    assert!(!socket.exists() && !control.exists());
    // The path is free for a new server.
    let again = FakeCri::builder()
        .socket(&socket)
        .start()
        .await
        .expect("restart on the same path");
    again.shutdown().await;
}

#[tokio::test]
async fn shutdown_does_not_wait_for_a_stop_in_flight() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    // The trap records the TERM but does not exit: the stop waits its whole timeout.
    let script = "trap 'touch /tmp/term' TERM; while true; do sleep 0.01; done";
    let id = env.run(&sandbox, "c", script).await;
    let mut runtime = env.runtime.clone();
    let stop_id = id.clone();
    let stop = tokio::spawn(async move {
        runtime
            .stop_container(v1::StopContainerRequest {
                container_id: stop_id,
                timeout: 600,
            })
            .await
    });
    tokio::time::timeout(LIMIT, async {
        while env
            .exec(&id, &["test", "-e", "/tmp/term"], 5)
            .await
            .unwrap()
            .exit_code
            != 0
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the stop sends TERM");
    assert!(!stop.is_finished());
    let Env { cri, .. } = env;
    tokio::time::timeout(LIMIT, cri.shutdown())
        .await
        .expect("shutdown does not hang on an in-flight StopContainer");
    let _ = tokio::time::timeout(LIMIT, stop)
        .await
        .expect("the stop call ends");
}

#[tokio::test]
async fn shutdown_does_not_wait_for_an_exec_in_flight() {
    let mut env = Env::start().await;
    let sandbox = env.sandbox("pod").await;
    let id = env.run(&sandbox, "c", "sleep 600").await;
    let exec = env.start_blocking_exec(&id).await;
    let Env { cri, .. } = env;
    tokio::time::timeout(LIMIT, cri.shutdown())
        .await
        .expect("shutdown does not hang on an in-flight ExecSync");
    let _ = tokio::time::timeout(LIMIT, exec)
        .await
        .expect("the exec call ends");
}
