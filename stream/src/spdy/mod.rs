//! SPDY/3.1 sessions as Kubernetes uses them for `exec`, `attach` and
//! `port-forward` (`k8s.io/apimachinery/pkg/util/httpstream/spdy` over Go's
//! `spdystream`): after an HTTP/1.1 upgrade to `SPDY/3.1`, the client opens
//! one stream per channel (stdin, stdout, error, a forwarded port's data …),
//! each named by its headers, and the server replies to each.
//!
//! A [`Session`] is one task that owns the connection's write half and every
//! stream's inbound queue; a second task reads and decodes frames. Streams and
//! the session's handle talk to it through a channel. There is no flow
//! control: `spdystream` does none, and sends no `WINDOW_UPDATE`.

mod dictionary;
pub mod frame;

use std::collections::HashMap;

use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument;

pub use frame::Frame;
use frame::{Decoder, Encoder, MAX_PAYLOAD, rst};

/// The `Upgrade` token of the protocol.
pub const UPGRADE: &str = "SPDY/3.1";

pub use crate::Closed;

/// What streams and handles ask of the session task.
#[derive(Debug)]
enum Command {
    Open {
        headers: HeaderMap,
        opened: oneshot::Sender<Stream>,
    },
    Reply {
        id: u32,
    },
    Data {
        id: u32,
        data: Bytes,
        fin: bool,
    },
    Reset {
        id: u32,
    },
    Close,
}

/// A handle on a session: opens streams (a client's side) and closes it.
#[derive(Debug, Clone)]
pub struct Session {
    commands: mpsc::Sender<Command>,
}

/// One stream: its headers, what the peer sends on it, and a way to send.
#[derive(Debug)]
pub struct Stream {
    id: u32,
    headers: HeaderMap,
    inbound: mpsc::UnboundedReceiver<Bytes>,
    writer: Writer,
}

/// The sending half of a stream.
#[derive(Debug, Clone)]
pub struct Writer {
    id: u32,
    commands: mpsc::Sender<Command>,
}

impl Session {
    /// Starts the server side of a session on an upgraded connection; the
    /// receiver yields the streams the client opens, each to be
    /// [`Stream::reply`]'d or [`Writer::reset`].
    pub fn server<IO>(io: IO) -> (Session, mpsc::Receiver<Stream>)
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        Self::start(io, 2)
    }

    /// Starts the client side of a session; streams are opened with
    /// [`Session::open`]. The receiver yields streams the server opens, which
    /// Kubernetes servers never do.
    pub fn client<IO>(io: IO) -> (Session, mpsc::Receiver<Stream>)
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        Self::start(io, 1)
    }

    fn start<IO>(io: IO, first_id: u32) -> (Session, mpsc::Receiver<Stream>)
    where
        IO: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (commands_tx, commands) = mpsc::channel(64);
        let (accepted_tx, accepted) = mpsc::channel(16);
        let (frames_tx, frames) = mpsc::channel(64);
        let (mut read, write) = tokio::io::split(io);
        let reader = tokio::spawn(
            async move {
                let mut decoder = Decoder::default();
                loop {
                    let frame = match decoder.read(&mut read).await {
                        Ok(Some(frame)) => frame,
                        Ok(None) => return,
                        Err(error) => {
                            tracing::debug!(%error, "SPDY session ends");
                            return;
                        }
                    };
                    if frames_tx.send(frame).await.is_err() {
                        return;
                    }
                }
            }
            .in_current_span(),
        );
        let task = Task {
            reader: reader.abort_handle(),
            write,
            encoder: Encoder::default(),
            streams: HashMap::new(),
            pending: HashMap::new(),
            next_id: first_id,
            last_peer_id: 0,
            commands_tx: commands_tx.downgrade(),
            accepted: accepted_tx,
        };
        tokio::spawn(task.run(frames, commands).in_current_span());
        (
            Session {
                commands: commands_tx,
            },
            accepted,
        )
    }

    /// Opens a stream with `headers` and waits for the server's reply.
    pub async fn open(&self, headers: HeaderMap) -> Result<Stream, Closed> {
        let (opened, stream) = oneshot::channel();
        self.commands
            .send(Command::Open { headers, opened })
            .await
            .map_err(|_| Closed)?;
        stream.await.map_err(|_| Closed)
    }

    /// Resets every stream, says `GOAWAY` and closes the connection — what
    /// a Kubernetes server does once the command or forwarding has ended.
    pub async fn close(&self) {
        let _ = self.commands.send(Command::Close).await;
    }

    /// Waits until the session has ended (either side closed it).
    pub async fn closed(&self) {
        self.commands.closed().await;
    }
}

impl Stream {
    /// The stream's id.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// The headers it was opened with.
    pub fn headers(&self) -> &HeaderMap {
        &self.headers
    }

    /// One header's value, if present and text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Accepts a stream the peer opened (`SYN_REPLY`).
    pub async fn reply(&self) -> Result<(), Closed> {
        self.writer.send(Command::Reply { id: self.id }).await
    }

    /// The next bytes the peer sent; `None` once it finished, reset the
    /// stream or the session ended.
    pub async fn read(&mut self) -> Option<Bytes> {
        self.inbound.recv().await
    }

    /// A handle to send on this stream.
    pub fn writer(&self) -> Writer {
        self.writer.clone()
    }

    /// Splits into the inbound queue and the writer.
    pub fn split(self) -> (mpsc::UnboundedReceiver<Bytes>, Writer) {
        (self.inbound, self.writer)
    }
}

impl Writer {
    async fn send(&self, command: Command) -> Result<(), Closed> {
        self.commands.send(command).await.map_err(|_| Closed)
    }

    /// Sends bytes.
    pub async fn write(&self, data: impl Into<Bytes>) -> Result<(), Closed> {
        let mut data: Bytes = data.into();
        while !data.is_empty() {
            let chunk = data.split_to(data.len().min(MAX_PAYLOAD));
            self.send(Command::Data {
                id: self.id,
                data: chunk,
                fin: false,
            })
            .await?;
        }
        Ok(())
    }

    /// Finishes the sending side (an empty `DATA` frame with `FIN`).
    pub async fn close(&self) -> Result<(), Closed> {
        self.send(Command::Data {
            id: self.id,
            data: Bytes::new(),
            fin: true,
        })
        .await
    }

    /// Resets the stream (`RST_STREAM`, `CANCEL`).
    pub async fn reset(&self) -> Result<(), Closed> {
        self.send(Command::Reset { id: self.id }).await
    }
}

/// The session task's state.
struct Task<W> {
    /// The frame reader, stopped with the session (a peer that never
    /// closes its side would keep it reading).
    reader: tokio::task::AbortHandle,
    write: W,
    encoder: Encoder,
    /// Inbound queues of the streams the peer may still send on.
    streams: HashMap<u32, mpsc::UnboundedSender<Bytes>>,
    /// Streams opened here, waiting for the peer's `SYN_REPLY`.
    pending: HashMap<u32, (Stream, oneshot::Sender<Stream>)>,
    next_id: u32,
    last_peer_id: u32,
    commands_tx: mpsc::WeakSender<Command>,
    accepted: mpsc::Sender<Stream>,
}

impl<W: AsyncWrite + Unpin> Task<W> {
    async fn run(
        mut self,
        mut frames: mpsc::Receiver<Frame>,
        mut commands: mpsc::Receiver<Command>,
    ) {
        loop {
            // Commands first: a stream registered by `Open` must be known
            // before the reply to its SYN_STREAM can be read.
            let step = tokio::select! {
                biased;
                command = commands.recv() => match command {
                    Some(command) => self.command(command).await,
                    None => Step::End,
                },
                frame = frames.recv() => match frame {
                    Some(frame) => self.frame(frame).await,
                    None => Step::End,
                },
            };
            if step == Step::End {
                break;
            }
        }
        let _ = self.write.shutdown().await;
        self.reader.abort();
        // Dropping the queues ends every stream's reads; closing the
        // commands channel ends its writes and `Session::closed`.
        commands.close();
    }

    async fn send(&mut self, frame: &Frame) -> Step {
        let mut out = BytesMut::new();
        self.encoder.encode(frame, &mut out);
        match self.write.write_all(&out).await {
            Ok(()) => Step::Go,
            Err(_) => Step::End,
        }
    }

    async fn command(&mut self, command: Command) -> Step {
        match command {
            Command::Open { headers, opened } => {
                let Some(commands) = self.commands_tx.upgrade() else {
                    return Step::End;
                };
                let id = self.next_id;
                self.next_id += 2;
                let (tx, inbound) = mpsc::unbounded_channel();
                self.streams.insert(id, tx);
                let step = self
                    .send(&Frame::SynStream {
                        id,
                        headers: headers.clone(),
                        fin: false,
                        unidirectional: false,
                    })
                    .await;
                let stream = Stream {
                    id,
                    headers,
                    inbound,
                    writer: Writer { id, commands },
                };
                self.pending.insert(id, (stream, opened));
                step
            }
            Command::Reply { id } => {
                self.send(&Frame::SynReply {
                    id,
                    headers: HeaderMap::new(),
                    fin: false,
                })
                .await
            }
            Command::Data { id, data, fin } => self.send(&Frame::Data { id, data, fin }).await,
            Command::Reset { id } => {
                self.streams.remove(&id);
                self.send(&Frame::RstStream {
                    id,
                    status: rst::CANCEL,
                })
                .await
            }
            Command::Close => {
                let mut ids: Vec<u32> = self.streams.drain().map(|(id, _)| id).collect();
                ids.sort_unstable();
                for id in ids {
                    self.send(&Frame::RstStream {
                        id,
                        status: rst::CANCEL,
                    })
                    .await;
                }
                let last_good = self.last_peer_id;
                self.send(&Frame::GoAway {
                    last_good,
                    status: 0,
                })
                .await;
                Step::End
            }
        }
    }

    async fn frame(&mut self, frame: Frame) -> Step {
        match frame {
            Frame::SynStream {
                id, headers, fin, ..
            } => {
                // Stream ids of the peer's parity must grow (spdystream's
                // validateStreamId); anything else is refused.
                if id <= self.last_peer_id || id % 2 == self.next_id % 2 || id == 0 {
                    return self
                        .send(&Frame::RstStream {
                            id,
                            status: rst::PROTOCOL_ERROR,
                        })
                        .await;
                }
                self.last_peer_id = id;
                let Some(commands) = self.commands_tx.upgrade() else {
                    return Step::End;
                };
                let (tx, inbound) = mpsc::unbounded_channel();
                if !fin {
                    self.streams.insert(id, tx);
                }
                let stream = Stream {
                    id,
                    headers,
                    inbound,
                    writer: Writer { id, commands },
                };
                if let Err(refused) = self.accepted.try_send(stream) {
                    let id = match refused {
                        mpsc::error::TrySendError::Full(s)
                        | mpsc::error::TrySendError::Closed(s) => s.id,
                    };
                    self.streams.remove(&id);
                    return self
                        .send(&Frame::RstStream {
                            id,
                            status: rst::REFUSED_STREAM,
                        })
                        .await;
                }
                Step::Go
            }
            Frame::Data { id, data, fin } => {
                if let Some(tx) = self.streams.get(&id) {
                    if !data.is_empty() {
                        let _ = tx.send(data);
                    }
                    if fin {
                        self.streams.remove(&id);
                    }
                }
                Step::Go
            }
            Frame::SynReply { id, fin, .. } | Frame::Headers { id, fin, .. } => {
                if let Some((stream, opened)) = self.pending.remove(&id) {
                    let _ = opened.send(stream);
                }
                if fin {
                    self.streams.remove(&id);
                }
                Step::Go
            }
            Frame::RstStream { id, .. } => {
                self.pending.remove(&id);
                self.streams.remove(&id);
                Step::Go
            }
            // A ping of the peer's parity is answered; ours are not sent.
            Frame::Ping { id } => {
                if id % 2 != self.next_id % 2 {
                    self.send(&Frame::Ping { id }).await
                } else {
                    Step::Go
                }
            }
            Frame::GoAway { .. } => Step::End,
            Frame::Ignored { .. } => Step::Go,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Go,
    End,
}
