//! gRPC clients that are not tonic: the `:authority` they send on a unix
//! socket (the socket path, its percent-encoded form, nothing) must not keep
//! them from calling fake-cri, as it kept the kubelet, crictl and critest (the official Python
//! client is `tests/grpcio.rs`).

use crate::common;

use common::{Env, LIMIT};
use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

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
