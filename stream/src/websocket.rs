//! The WebSocket channel protocols (apimachinery's `wsstream`, which the
//! CRI streaming server also serves): one connection carries numbered
//! channels; each binary message starts with its channel's number (the
//! `base64.` protocols send text: the number as an ASCII digit, then the
//! data in base64). `v5.channel.k8s.io` adds a close signal, channel 255,
//! whose one byte names a channel the client will send no more on.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use futures::{SinkExt, StreamExt};
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tracing::Instrument;

use crate::Closed;
use crate::upgrade::{Refusal, switching_protocols};

/// The protocols of a byte stream sent as messages (`NewDefaultReaderProtocols`).
pub const READER_PROTOCOLS: [&str; 3] = ["", "binary.k8s.io", "base64.binary.k8s.io"];

/// The channel of `v5.channel.k8s.io`'s close signal.
const CLOSE_SIGNAL: u8 = 255;

/// An accepted WebSocket upgrade.
#[derive(Debug)]
pub struct Upgrade {
    protocol: String,
    accept: String,
    on: OnUpgrade,
}

/// Checks a WebSocket upgrade request and negotiates one of `supported`
/// (`""` accepts a client that names none), as `wsstream.Conn.Open` does
/// through `x/net/websocket`: GET only, version 13, a key; no shared
/// protocol is a 403.
pub fn accept<B>(req: &mut Request<B>, supported: &[&str]) -> Result<Upgrade, Refusal> {
    let refuse = |status, message: &str| Refusal {
        status,
        message: message.to_owned(),
        accepted: Vec::new(),
    };
    if req.method() != Method::GET {
        return Err(refuse(StatusCode::METHOD_NOT_ALLOWED, "bad method"));
    }
    let headers = req.headers();
    if headers
        .get(header::SEC_WEBSOCKET_VERSION)
        .and_then(|v| v.to_str().ok())
        != Some("13")
    {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "missing or bad WebSocket Version",
        ));
    }
    let Some(key) = headers.get(header::SEC_WEBSOCKET_KEY) else {
        return Err(refuse(
            StatusCode::BAD_REQUEST,
            "mismatch challenge/response",
        ));
    };
    let accept = derive_accept_key(key.as_bytes());
    let mut offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        offered.push(String::new());
    }
    let Some(protocol) = offered.iter().find(|p| supported.contains(&p.as_str())) else {
        let quoted = |list: Vec<&str>| list.join(" ");
        return Err(refuse(
            StatusCode::FORBIDDEN,
            &format!(
                "requested protocol(s) are not supported: [{}]; supports [{}]",
                quoted(offered.iter().map(String::as_str).collect()),
                quoted(supported.to_vec())
            ),
        ));
    };
    Ok(Upgrade {
        protocol: protocol.clone(),
        accept,
        on: hyper::upgrade::on(req),
    })
}

impl Upgrade {
    /// The negotiated protocol (`""` when the client named none).
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// The `101 Switching Protocols` answer.
    pub fn response<B: Default>(&self) -> Response<B> {
        let mut resp = switching_protocols("websocket");
        let h = resp.headers_mut();
        if let Ok(v) = HeaderValue::from_str(&self.accept) {
            h.insert(header::SEC_WEBSOCKET_ACCEPT, v);
        }
        if !self.protocol.is_empty()
            && let Ok(v) = HeaderValue::from_str(&self.protocol)
        {
            h.insert(header::SEC_WEBSOCKET_PROTOCOL, v);
        }
        resp
    }

    /// The raw upgraded connection, once the answer has gone out.
    pub async fn into_upgraded(self) -> Result<hyper::upgrade::Upgraded, hyper::Error> {
        self.on.await
    }

    /// The connection with `channels` channels, once the answer has gone out.
    pub async fn connect(self, channels: usize) -> Result<Connection, hyper::Error> {
        let upgraded = self.on.await?;
        let socket =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        Ok(Connection::start(socket, &self.protocol, channels))
    }
}

/// What the connection task is asked to send.
#[derive(Debug)]
enum Out {
    Data { channel: u8, data: Bytes },
    Close,
}

/// A WebSocket connection split into channels.
#[derive(Debug)]
pub struct Connection {
    inbound: Vec<Option<mpsc::UnboundedReceiver<Bytes>>>,
    out: mpsc::Sender<Out>,
    done: tokio::sync::oneshot::Receiver<()>,
}

/// The sending side of one channel.
#[derive(Debug, Clone)]
pub struct ChannelWriter {
    channel: u8,
    out: mpsc::Sender<Out>,
}

impl ChannelWriter {
    /// Sends `data` on the channel (an empty message still carries the channel).
    pub async fn write(&self, data: Bytes) -> Result<(), Closed> {
        self.out
            .send(Out::Data {
                channel: self.channel,
                data,
            })
            .await
            .map_err(|_| Closed)
    }
}

impl Connection {
    fn start<S>(socket: WebSocketStream<S>, protocol: &str, channels: usize) -> Self
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let base64 = protocol.contains("base64");
        let close_signal = protocol == "v5.channel.k8s.io";
        let (senders, inbound): (Vec<_>, Vec<_>) = (0..channels)
            .map(|_| {
                let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
                (Some(tx), Some(rx))
            })
            .unzip();
        let (out, mut outgoing) = mpsc::channel::<Out>(64);
        let (finished, done) = tokio::sync::oneshot::channel();
        let (mut sink, mut source) = socket.split();
        tokio::spawn(
            async move {
                let mut senders = senders;
                loop {
                    tokio::select! {
                        message = source.next() => match message {
                            Some(Ok(message)) => {
                                let Ok(Some((channel, data))) = decode(&message, base64) else { continue };
                                if close_signal && channel == CLOSE_SIGNAL {
                                    if let Some(sender) = data.first().and_then(|c| senders.get_mut(usize::from(*c))) {
                                        sender.take();
                                    }
                                    continue;
                                }
                                if let Some(Some(sender)) = senders.get(usize::from(channel)) {
                                    let _ = sender.send(data);
                                }
                            }
                            // The client went away: every channel ends.
                            _ => break,
                        },
                        out = outgoing.recv() => match out {
                            Some(Out::Data { channel, data }) => {
                                if sink.send(encode(channel, &data, base64)).await.is_err() {
                                    break;
                                }
                            }
                            Some(Out::Close) | None => {
                                let _ = sink.send(normal_close()).await;
                                let _ = sink.close().await;
                                break;
                            }
                        },
                    }
                }
                drop(senders);
                let _ = finished.send(());
            }
            .in_current_span(),
        );
        Self { inbound, out, done }
    }

    /// What the client sends on `channel`, until it stops; taken once.
    pub fn take_inbound(&mut self, channel: usize) -> Option<mpsc::UnboundedReceiver<Bytes>> {
        self.inbound.get_mut(channel).and_then(Option::take)
    }

    /// A writer for `channel`.
    pub fn writer(&self, channel: u8) -> ChannelWriter {
        ChannelWriter {
            channel,
            out: self.out.clone(),
        }
    }

    /// Sends what is queued, a close frame, and waits for the end.
    pub async fn close(self) {
        let _ = self.out.send(Out::Close).await;
        let _ = self.done.await;
    }

    /// Waits until the client has gone or the connection was closed.
    pub async fn closed(self) {
        let _ = self.done.await;
    }
}

/// Sends a byte stream as messages, as `wsstream.Reader` does: an empty
/// message first, then chunks of at most 2048 bytes (base64 text under
/// `base64.binary.k8s.io`), then a close; what the client sends is ignored.
pub async fn send_stream<S>(upgrade: Upgrade, mut chunks: S)
where
    S: futures::Stream<Item = Bytes> + Unpin + Send + 'static,
{
    let base64 = upgrade.protocol.starts_with("base64.");
    let Ok(upgraded) = upgrade.on.await else {
        return;
    };
    let socket = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
    let (mut sink, mut source) = socket.split();
    let message = |data: &[u8]| stream_message(data, base64);
    let send = async {
        sink.send(message(&[])).await?;
        while let Some(chunk) = chunks.next().await {
            for piece in chunk.chunks(2048) {
                sink.send(message(piece)).await?;
            }
        }
        sink.send(normal_close()).await
    };
    // The client's messages are read and dropped; its going away ends the send.
    let ignore = async { while let Some(Ok(_)) = source.next().await {} };
    tokio::select! {
        _ = send => {}
        () = ignore => {}
    }
}

/// A channel message's channel and bytes (`None`: not a channel message of
/// this protocol — a control frame, an empty message, the other encoding).
pub fn decode(message: &Message, base64: bool) -> Result<Option<(u8, Bytes)>, base64::DecodeError> {
    match message {
        Message::Binary(data) if !base64 => Ok(data
            .split_first()
            .map(|(&channel, rest)| (channel, Bytes::copy_from_slice(rest)))),
        Message::Text(text) if base64 => {
            let Some((&digit, rest)) = text.as_bytes().split_first() else {
                return Ok(None);
            };
            Ok(Some((
                digit.wrapping_sub(b'0'),
                Bytes::from(STANDARD.decode(rest)?),
            )))
        }
        _ => Ok(None),
    }
}

/// `data` as a message on `channel`.
pub fn encode(channel: u8, data: &[u8], base64: bool) -> Message {
    if base64 {
        let mut text = String::with_capacity(1 + data.len() * 4 / 3 + 4);
        text.push(char::from(b'0' + channel));
        text.push_str(&STANDARD.encode(data));
        Message::text(text)
    } else {
        let mut frame = Vec::with_capacity(1 + data.len());
        frame.push(channel);
        frame.extend_from_slice(data);
        Message::binary(frame)
    }
}

/// The bytes of a byte-stream message (`binary.k8s.io`: binary messages;
/// `base64.binary.k8s.io`: base64 text); `None` for any other message.
pub fn payload(message: &Message, base64: bool) -> Result<Option<Bytes>, base64::DecodeError> {
    match message {
        Message::Binary(data) => Ok(Some(data.clone())),
        Message::Text(text) if base64 => Ok(Some(Bytes::from(STANDARD.decode(text.as_bytes())?))),
        _ => Ok(None),
    }
}

/// `data` as a byte-stream message.
fn stream_message(data: &[u8], base64: bool) -> Message {
    if base64 {
        Message::text(STANDARD.encode(data))
    } else {
        Message::binary(data.to_vec())
    }
}

/// A close frame with status 1000, as `x/net/websocket` ends a connection
/// (a close without a status is an error to gorilla's client, kubectl's).
pub(crate) fn normal_close() -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "".into(),
    }))
}
