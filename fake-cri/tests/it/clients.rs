//! gRPC clients that are not tonic: the `:authority` they send on a unix
//! socket (the socket path, its percent-encoded form, nothing) must not keep
//! them from calling fake-cri, as it kept the kubelet, crictl and critest.

use crate::common;

use std::process::Stdio;

use common::{Env, LIMIT};
use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::process::Command;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

type Headers = Vec<(Vec<u8>, Vec<u8>)>;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    out.extend([kind, flags]);
    out.extend(stream.to_be_bytes());
    out.extend(payload);
    out
}

/// What a `Version` call over hand-written HTTP/2 frames returned: the
/// response headers, the message bytes and the trailers.
#[derive(Debug, Default)]
struct Answer {
    headers: Headers,
    body: Vec<u8>,
    trailers: Headers,
}

/// Calls `RuntimeService/Version` the way a Go or C-core client does, with
/// `authority` as the request's `:authority`.
async fn version_call(socket: &std::path::Path, authority: &[u8]) -> Result<Answer, String> {
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|e| e.to_string())?;
    let request: Headers = vec![
        (b":method".to_vec(), b"POST".to_vec()),
        (b":scheme".to_vec(), b"http".to_vec()),
        (
            b":path".to_vec(),
            b"/runtime.v1.RuntimeService/Version".to_vec(),
        ),
        (b":authority".to_vec(), authority.to_vec()),
        (b"content-type".to_vec(), b"application/grpc".to_vec()),
        (b"te".to_vec(), b"trailers".to_vec()),
    ];
    let block = Encoder::new().encode(request.iter().map(|(n, v)| (&n[..], &v[..])));
    let mut out = PREFACE.to_vec();
    out.extend(frame(0x4, 0, 0, &[])); // SETTINGS
    out.extend(frame(0x1, 0x4, 1, &block)); // HEADERS, END_HEADERS
    out.extend(frame(0x0, 0x1, 1, &[0; 5])); // DATA: an empty VersionRequest, END_STREAM
    stream.write_all(&out).await.map_err(|e| e.to_string())?;

    let mut decoder = Decoder::new();
    let mut answer = Answer::default();
    loop {
        let mut head = [0u8; 9];
        stream
            .read_exact(&mut head)
            .await
            .map_err(|e| format!("connection ended: {e}"))?;
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let mut payload = vec![0; len];
        stream
            .read_exact(&mut payload)
            .await
            .map_err(|e| e.to_string())?;
        let (kind, flags) = (head[3], head[4]);
        match kind {
            0x0 => answer.body.extend(payload),
            0x1 => {
                let headers = decoder.decode(&payload).map_err(|e| e.to_string())?;
                if flags & 0x1 == 0 {
                    answer.headers = headers;
                } else {
                    answer.trailers = headers;
                    return Ok(answer);
                }
            }
            0x3 => return Err(format!("RST_STREAM with error code {:?}", &payload)),
            0x4 if flags & 0x1 == 0 => {
                stream
                    .write_all(&frame(0x4, 0x1, 0, &[]))
                    .await
                    .map_err(|e| e.to_string())?;
            }
            0x7 => return Err(format!("GOAWAY {:?}", &payload)),
            _ => {}
        }
    }
}

fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a [u8]> {
    headers
        .iter()
        .find(|(n, _)| n == name.as_bytes())
        .map(|(_, v)| &v[..])
}

#[tokio::test]
async fn any_authority_a_client_sends_is_served() {
    let env = Env::start().await;
    let socket = env.cri.socket_path();
    let path = socket.display().to_string();
    let encoded = path.trim_start_matches('/').replace('/', "%2F");
    for authority in [path.as_str(), encoded.as_str(), "", "localhost"] {
        let answer = tokio::time::timeout(LIMIT, version_call(socket, authority.as_bytes()))
            .await
            .expect("answered in time")
            .unwrap_or_else(|e| panic!(":authority {authority:?}: {e}"));
        assert_eq!(header(&answer.headers, ":status"), Some(&b"200"[..]));
        assert_eq!(
            header(&answer.trailers, "grpc-status"),
            Some(&b"0"[..]),
            ":authority {authority:?}: {answer:?}"
        );
        let name = b"fake-cri";
        assert!(
            answer.body.windows(name.len()).any(|w| w == name),
            "the VersionResponse names the runtime: {answer:?}"
        );
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn official_python_grpc_client() {
    let has_client = Command::new("python3")
        .args(["-c", "import grpc"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await
        .is_ok_and(|s| s.success());
    if !has_client {
        eprintln!(
            "SKIPPED official_python_grpc_client: python3 with the `grpcio` package not found (pip install grpcio)"
        );
        return;
    }
    let env = Env::start().await;
    let out = tokio::time::timeout(
        LIMIT * 4,
        Command::new("python3")
            .arg("-c")
            .arg(PYTHON)
            .arg(env.cri.socket_path())
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
