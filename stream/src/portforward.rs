//! Port forwarding on the serving side (`portforward.k8s.io` over SPDY, as
//! `k8s.io/kubelet/pkg/cri/streaming/portforward` serves it): each forwarded
//! connection is a pair of streams — `data` and `error` — with the same
//! `requestID` and a `port` header. Once both are open the server connects to
//! the port in the pod and copies bytes both ways; a failure is written as
//! text on the error stream. The session lasts until the client closes it.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::channel::Writer;
use crate::spdy::Stream;
use crate::upgrade::Upgrade;
use crate::websocket;

/// The protocol served.
pub const PROTOCOL: &str = "portforward.k8s.io";
/// The protocols served (`SupportedProtocols`).
pub const PROTOCOLS: [&str; 1] = [PROTOCOL];

/// How long one direction of a forwarded connection may go on once the
/// other has ended (containerd's `socat`-like timeout).
const LINGER: Duration = Duration::from_secs(1);

/// A forwarded connection's streams, waiting for their partner.
#[derive(Default)]
struct Pair {
    data: Option<Stream>,
    error: Option<Stream>,
}

/// Completes the upgrade and serves forwarded connections until the client
/// ends the session. `connect(port)` opens a connection to the port in the
/// pod (`pod` names it in errors, as the runtime names it: the sandbox);
/// its error's text goes to the client.
pub async fn serve<F, Fut, C>(upgrade: Upgrade, pod: String, connect: F) -> Result<(), hyper::Error>
where
    F: Fn(u16) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<C>> + Send + 'static,
    C: AsyncRead + AsyncWrite + Send + 'static,
{
    let (session, mut streams) = upgrade.session().await?;
    let connect = std::sync::Arc::new(connect);
    let mut pairs: HashMap<String, Pair> = HashMap::new();
    while let Some(stream) = streams.recv().await {
        let port = match check(&stream) {
            Ok(port) => port,
            Err(why) => {
                // Upstream's stream handler refuses the stream: a reset.
                tracing::debug!(stream = stream.id(), why, "port-forward stream refused");
                let _ = stream.writer().reset().await;
                continue;
            }
        };
        if stream.reply().await.is_err() {
            break;
        }
        let request = request_id(&stream);
        let pair = pairs.entry(request.clone()).or_default();
        let slot = if stream.header("streamtype") == Some("error") {
            &mut pair.error
        } else {
            &mut pair.data
        };
        if slot.is_some() {
            let kind = stream.header("streamtype").unwrap_or_default().to_owned();
            let message = format!(
                "error processing stream for request {request}: {kind} stream already assigned"
            );
            if let Some(error) = pair.error.as_ref() {
                let _ = error.writer().write(message).await;
            }
            continue;
        }
        *slot = Some(stream);
        if pair.data.is_some() && pair.error.is_some() {
            let Pair {
                data: Some(data),
                error: Some(error),
            } = pairs.remove(&request).unwrap_or_default()
            else {
                continue;
            };
            let (connect, pod) = (connect.clone(), pod.clone());
            tokio::spawn(async move {
                let target = connect(port).await;
                let (inbound, out) = data.split();
                let error = Writer::Spdy(error.writer());
                forward(inbound, Writer::Spdy(out), error, port, &pod, target).await;
            });
        }
    }
    session.close().await;
    Ok(())
}

/// Upstream's checks of a stream's headers: the port and the stream type.
fn check(stream: &Stream) -> Result<u16, String> {
    let port = stream
        .header("port")
        .filter(|p| !p.is_empty())
        .ok_or("\"port\" header is required")?;
    let port: u16 = port
        .parse()
        .map_err(|e| format!("unable to parse {port:?} as a port: {e}"))?;
    if port < 1 {
        return Err(format!("port \"{port}\" must be > 0"));
    }
    match stream.header("streamtype") {
        None | Some("") => Err("\"streamType\" header is required".into()),
        Some("error" | "data") => Ok(port),
        Some(other) => Err(format!("invalid stream type {other:?}")),
    }
}

/// The pair a stream belongs to: its `requestID`, or for old clients one made
/// from the stream ids (error streams come first).
fn request_id(stream: &Stream) -> String {
    match stream.header("requestid").filter(|r| !r.is_empty()) {
        Some(id) => id.to_owned(),
        None if stream.header("streamtype") == Some("error") => stream.id().to_string(),
        None => stream.id().saturating_sub(2).to_string(),
    }
}

/// Copies between a forwarded connection's data channel and the
/// connection in the pod; a failure to connect is written to the error
/// channel (`error forwarding port P to pod POD, uid : …`). Both finish when
/// done.
async fn forward<C>(
    mut inbound: mpsc::UnboundedReceiver<Bytes>,
    out: Writer,
    error: Writer,
    port: u16,
    pod: &str,
    target: io::Result<C>,
) where
    C: AsyncRead + AsyncWrite + Send + 'static,
{
    match target {
        Err(e) => {
            let _ = error
                .write(format!(
                    "error forwarding port {port} to pod {pod}, uid : {e}"
                ))
                .await;
        }
        Ok(conn) => {
            let (mut read, mut write) = tokio::io::split(conn);
            let upload = async {
                while let Some(chunk) = inbound.recv().await {
                    if write.write_all(&chunk).await.is_err() {
                        return;
                    }
                }
            };
            let download = download(&mut read, &out);
            // As containerd: once one direction ends, the other has a second
            // to finish; the connection is not half-closed.
            tokio::pin!(upload, download);
            tokio::select! {
                _ = &mut upload => {
                    let _ = tokio::time::timeout(LINGER, download).await;
                }
                _ = &mut download => {
                    let _ = tokio::time::timeout(LINGER, upload).await;
                }
            }
        }
    }
    let _ = out.close().await;
    let _ = error.close().await;
}

/// Serves port forwarding over WebSocket for `ports` (the runtime takes
/// them from its `PortForward` request): two channels per port, data and
/// error, each opened by the port number (two bytes, little-endian); the
/// connection ends when every port's forwarding has.
pub async fn serve_websocket<F, Fut, C>(
    upgrade: websocket::Upgrade,
    ports: Vec<u16>,
    pod: String,
    connect: F,
) -> Result<(), hyper::Error>
where
    F: Fn(u16) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = io::Result<C>> + Send + 'static,
    C: AsyncRead + AsyncWrite + Send + 'static,
{
    let mut conn = upgrade.connect(ports.len() * 2).await?;
    let mut forwards = Vec::new();
    for (i, port) in ports.into_iter().enumerate() {
        let (data, error) = ((i * 2) as u8, (i * 2 + 1) as u8);
        let (out, error) = (conn.writer(data), conn.writer(error));
        let header = Bytes::copy_from_slice(&port.to_le_bytes());
        let _ = out.write(header.clone()).await;
        let _ = error.write(header).await;
        let inbound = conn
            .take_inbound(usize::from(data))
            .unwrap_or_else(|| mpsc::unbounded_channel().1);
        let target = connect(port);
        let pod = pod.clone();
        forwards.push(tokio::spawn(async move {
            let target = target.await;
            forward(
                inbound,
                Writer::WebSocket(out),
                Writer::WebSocket(error),
                port,
                &pod,
                target,
            )
            .await;
        }));
    }
    for f in forwards {
        let _ = f.await;
    }
    conn.close().await;
    Ok(())
}

async fn download<R: AsyncRead + Unpin>(read: &mut R, out: &Writer) {
    let mut buf = BytesMut::with_capacity(32 * 1024);
    loop {
        buf.clear();
        match read.read_buf(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if out.write(Bytes::copy_from_slice(&buf)).await.is_err() {
                    return;
                }
            }
        }
    }
}
