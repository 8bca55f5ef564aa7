//! kube-apiserver's translation of WebSocket requests to SPDY for the
//! kubelet (1.30+ `StreamTranslatorHandler` for `exec`/`attach` with
//! `v5.channel.k8s.io`; 1.31+ `TunnelingHandler` for port forwarding with
//! `SPDY/3.1+portforward.k8s.io`): the client speaks WebSocket to the API
//! server, the node agent SPDY.

use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::channel::Writer;
use crate::remotecommand::{Channels, Options, Outcome};
use crate::spdy::Session;
use crate::websocket::{self, normal_close};

/// The WebSocket protocol a translated remote command speaks.
pub const V5: &str = "v5.channel.k8s.io";
/// The WebSocket protocol that tunnels SPDY port forwarding.
pub const PORT_FORWARD_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";

/// Whether the client asks for a remote command kube-apiserver translates:
/// a WebSocket upgrade offering `v5.channel.k8s.io`.
pub fn wants_v5<B>(req: &http::Request<B>) -> bool {
    offers(req, V5)
}

/// Whether the client asks for tunnelled port forwarding.
pub fn wants_tunnel<B>(req: &http::Request<B>) -> bool {
    offers(req, PORT_FORWARD_TUNNEL)
}

fn offers<B>(req: &http::Request<B>, protocol: &str) -> bool {
    crate::upgrade::is_websocket(req)
        && req
            .headers()
            .get_all(http::header::SEC_WEBSOCKET_PROTOCOL)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|p| p.trim() == protocol)
}

/// Bridges a WebSocket remote command (`channels`, accepted with
/// [`V5`]) to the kubelet's SPDY session: the client's input and terminal
/// sizes go to the kubelet, its output comes back, and its status becomes
/// the client's as kube-apiserver rewrites it.
///
/// The command's end is the kubelet's error stream ending; stdout and
/// stderr are read to their end first.
pub async fn remote_command(
    mut channels: Channels,
    kubelet: Session,
    protocol: String,
    options: Options,
) {
    let open = |kind: &'static str| {
        let mut h = http::HeaderMap::new();
        h.insert("streamtype", http::HeaderValue::from_static(kind));
        kubelet.open(h)
    };
    let Ok(error) = open("error").await else {
        return channels
            .finish(Outcome::Failed(
                "error creating the SPDY error stream".into(),
            ))
            .await;
    };
    let stdin = if options.stdin {
        open("stdin").await.ok()
    } else {
        None
    };
    let stdout = if options.stdout {
        open("stdout").await.ok()
    } else {
        None
    };
    let stderr = if options.stderr {
        open("stderr").await.ok()
    } else {
        None
    };
    let resize = if options.tty && protocol == crate::remotecommand::V4 {
        open("resize").await.ok()
    } else {
        None
    };
    if let (Some(mut from_client), Some(to_kubelet)) =
        (channels.stdin.take(), stdin.as_ref().map(|s| s.writer()))
    {
        tokio::spawn(async move {
            while let Some(chunk) = from_client.recv().await {
                if to_kubelet.write(chunk).await.is_err() {
                    return;
                }
            }
            // v5's close signal, or the client gone: the kubelet's stdin ends.
            let _ = to_kubelet.close().await;
        });
    }
    if let (Some(mut sizes), Some(to_kubelet)) =
        (channels.resize.take(), resize.as_ref().map(|s| s.writer()))
    {
        tokio::spawn(async move {
            while let Some(size) = sizes.recv().await {
                let Ok(json) = serde_json::to_vec(&size) else {
                    continue;
                };
                if to_kubelet.write(json).await.is_err() {
                    return;
                }
            }
        });
    }
    let pump = |stream: Option<crate::spdy::Stream>, to: Option<Writer>| async move {
        let (Some(stream), Some(to)) = (stream, to) else {
            return;
        };
        let (mut inbound, _) = stream.split();
        while let Some(chunk) = inbound.recv().await {
            if to.write(chunk).await.is_err() {
                return;
            }
        }
    };
    let (status, (), ()) = tokio::join!(
        async {
            let (mut inbound, _) = error.split();
            let mut text = Vec::new();
            while let Some(chunk) = inbound.recv().await {
                text.extend_from_slice(&chunk);
            }
            text
        },
        pump(stdout, channels.stdout.clone()),
        pump(stderr, channels.stderr.clone()),
    );
    kubelet.close().await;
    channels.finish(translated(&status, &protocol)).await;
}

/// The client's status from the kubelet's error stream (`protocol` the one
/// negotiated with the kubelet), as client-go decodes it and the translator
/// re-encodes it: a non-zero exit keeps its code, its message gains the
/// executor's prefix.
fn translated(error: &[u8], protocol: &str) -> Outcome {
    if error.is_empty() {
        return Outcome::Exited {
            command: Vec::new(),
            code: 0,
        };
    }
    let text = String::from_utf8_lossy(error).into_owned();
    if protocol != crate::remotecommand::V4 {
        return Outcome::Failed(text);
    }
    let Ok(status) = serde_json::from_slice::<Value>(error) else {
        return Outcome::Failed(format!("error stream protocol error: {text}"));
    };
    if status["status"] == "Success" {
        return Outcome::Exited {
            command: Vec::new(),
            code: 0,
        };
    }
    if status["status"] != "Failure" {
        return Outcome::Failed("error stream protocol error: unknown error".into());
    }
    let code = status["details"]["causes"]
        .as_array()
        .and_then(|causes| causes.iter().find(|c| c["reason"] == "ExitCode"))
        .and_then(|c| c["message"].as_str())
        .and_then(|m| m.parse::<u8>().ok());
    match (status["reason"].as_str(), code) {
        // client-go's CodeExitError, then the translator's codeExitToStatusError.
        (Some("NonZeroExitCode"), Some(code)) => Outcome::Status(json!({
            "metadata": {},
            "status": "Failure",
            "message": format!(
                "command terminated with non-zero exit code: command terminated with exit code {code}"
            ),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })),
        // Any other failure is client-go's plain error, an InternalError here.
        _ => Outcome::Failed(status["message"].as_str().unwrap_or_default().to_owned()),
    }
}

/// Tunnels port forwarding: the client's WebSocket messages carry the SPDY
/// bytes of a port-forward session, which go to and from the kubelet's
/// upgraded connection unchanged.
pub async fn port_forward_tunnel<K>(upgrade: websocket::Upgrade, kubelet: K)
where
    K: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let Ok(upgraded) = upgrade.into_upgraded().await else {
        return;
    };
    let socket = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
    let (mut sink, mut source) = socket.split();
    let (mut read, mut write) = tokio::io::split(kubelet);
    let up = async {
        while let Some(Ok(message)) = source.next().await {
            match message {
                Message::Binary(data) if write.write_all(&data).await.is_err() => return,
                Message::Close(_) => return,
                _ => {}
            }
        }
    };
    let down = async {
        let mut buf = vec![0u8; 32 * 1024];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    let _ = sink.send(normal_close()).await;
                    return;
                }
                Ok(n) => {
                    if sink
                        .send(Message::binary(Bytes::copy_from_slice(&buf[..n])))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    };
    tokio::select! {
        () = up => {}
        () = down => {}
    }
}
