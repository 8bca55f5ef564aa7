//! Serving every gRPC client on a unix socket, whatever `:authority` it sends.
//!
//! Go gRPC clients dialing a unix socket through a custom dialer (the kubelet,
//! crictl, critest) send the socket's *path* as the HTTP/2 `:authority`; the
//! Python `grpcio` client sends it percent-encoded, others send an empty one. The `h2` server under tonic parses the
//! pseudo-header as a URI authority and resets the stream with
//! `PROTOCOL_ERROR` when it is not one (`malformed headers: malformed
//! authority`; hyperium/h2 pull request 487 to relax it is still open), so
//! none of those clients could make a single call.
//!
//! [`Normalized`] sits between the socket and the server and rewrites the
//! bytes the client sends: it forwards every frame unchanged except header
//! blocks (`HEADERS` + `CONTINUATION`), which it decodes with the client's
//! HPACK context, and re-encodes with its own context towards the server,
//! replacing an `:authority` that is not a valid URI authority with
//! `localhost` (what gRPC's own resolver uses for `unix:` targets). The
//! re-encoding is unconditional because HPACK is stateful: once one block
//! changed, the server's dynamic table no longer mirrors the client's, so the
//! two sides each keep their own. What the server sends back passes through
//! untouched. Anything that is not HTTP/2 passes through too, for `h2` to
//! refuse as before.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{Buf, BufMut, BytesMut};
use loona_hpack::{Decoder, Encoder};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Frames are never larger than this unless the server allows it, and `h2`
/// does not by default.
const MAX_FRAME: usize = 16 * 1024;
/// A header block larger than this ends the connection; `h2` itself allows
/// 16 KiB of decoded headers per request.
const MAX_HEADER_BLOCK: usize = 1 << 20;
/// What replaces an `:authority` that is not one.
const LOCALHOST: &[u8] = b"localhost";

/// A connection whose incoming header blocks carry only valid `:authority`
/// values; see the [module docs](self).
#[derive(Debug)]
pub struct Normalized<IO> {
    inner: IO,
    rewriter: Rewriter,
}

impl<IO> Normalized<IO> {
    /// Wraps a freshly accepted connection.
    pub fn new(inner: IO) -> Self {
        Self {
            inner,
            rewriter: Rewriter::default(),
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Normalized<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if !this.rewriter.output.is_empty() {
                let n = this.rewriter.output.len().min(buf.remaining());
                buf.put_slice(&this.rewriter.output.split_to(n));
                return Poll::Ready(Ok(()));
            }
            if this.rewriter.is_passthrough() {
                return Pin::new(&mut this.inner).poll_read(cx, buf);
            }
            let mut chunk = [0u8; 8 * 1024];
            let mut read = ReadBuf::new(&mut chunk);
            ready!(Pin::new(&mut this.inner).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // End of stream: whatever was held back goes to the server,
                // which sees a truncated frame, as it would have anyway.
                this.rewriter.finish();
                if this.rewriter.output.is_empty() {
                    return Poll::Ready(Ok(()));
                }
                continue;
            }
            this.rewriter.input.extend_from_slice(read.filled());
            this.rewriter.process()?;
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Normalized<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for Normalized<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.inner.connect_info()
    }
}

#[derive(Debug, Default, PartialEq)]
enum Phase {
    /// Waiting for the 24 bytes of the connection preface.
    #[default]
    Preface,
    /// Between or inside frames.
    Frames,
    /// Not HTTP/2, or a framing error `h2` will report: bytes flow unchanged.
    Passthrough,
}

/// The byte-level state machine of [`Normalized`], apart from the I/O so
/// that it can be tested on byte strings.
#[derive(Default)]
struct Rewriter {
    phase: Phase,
    /// Bytes read from the client and not yet looked at.
    input: BytesMut,
    /// Bytes ready for the server.
    output: BytesMut,
    /// Payload bytes of the current non-header frame still to forward.
    forward: usize,
    /// A `HEADERS` frame whose block continues in `CONTINUATION` frames.
    block: Option<HeaderBlock>,
    decoder: Decoder<'static>,
    encoder: Encoder<'static>,
}

impl std::fmt::Debug for Rewriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rewriter")
            .field("phase", &self.phase)
            .field("input", &self.input.len())
            .field("output", &self.output.len())
            .finish_non_exhaustive()
    }
}

struct HeaderBlock {
    stream_id: u32,
    end_stream: bool,
    priority: Option<[u8; 5]>,
    fragment: BytesMut,
    /// The frames as the client sent them, for when they must pass unchanged.
    raw: BytesMut,
}

impl Rewriter {
    fn is_passthrough(&self) -> bool {
        self.phase == Phase::Passthrough && self.input.is_empty()
    }

    /// Hands everything still held to the server and stops rewriting.
    fn finish(&mut self) {
        self.passthrough();
        self.output.extend_from_slice(&self.input.split());
    }

    /// Gives up rewriting: `h2` will see the original bytes and answer them
    /// (a protocol error it reports itself).
    fn passthrough(&mut self) {
        if let Some(block) = self.block.take() {
            self.output.extend_from_slice(&block.raw);
        }
        self.phase = Phase::Passthrough;
    }

    /// Moves what can be decided from `input` to `output`.
    fn process(&mut self) -> io::Result<()> {
        loop {
            match self.phase {
                Phase::Preface => {
                    let n = self.input.len().min(PREFACE.len());
                    if self.input[..n] != PREFACE[..n] {
                        self.passthrough();
                    } else if n < PREFACE.len() {
                        return Ok(());
                    } else {
                        self.output.extend_from_slice(&self.input.split_to(n));
                        self.phase = Phase::Frames;
                    }
                }
                Phase::Passthrough => {
                    self.output.extend_from_slice(&self.input.split());
                    return Ok(());
                }
                Phase::Frames if self.forward > 0 => {
                    let n = self.forward.min(self.input.len());
                    self.output.extend_from_slice(&self.input.split_to(n));
                    self.forward -= n;
                    if self.forward > 0 {
                        return Ok(());
                    }
                }
                Phase::Frames => {
                    if self.input.len() < FRAME_HEADER {
                        return Ok(());
                    }
                    let len = u32::from_be_bytes([0, self.input[0], self.input[1], self.input[2]])
                        as usize;
                    let kind = self.input[3];
                    if kind != HEADERS && kind != CONTINUATION {
                        if self.block.is_some() {
                            // A frame inside a header block: PROTOCOL_ERROR.
                            self.passthrough();
                            continue;
                        }
                        self.output
                            .extend_from_slice(&self.input.split_to(FRAME_HEADER));
                        self.forward = len;
                        continue;
                    }
                    if self.input.len() < FRAME_HEADER + len {
                        return Ok(());
                    }
                    let frame = self.input.split_to(FRAME_HEADER + len);
                    self.header_frame(frame)?;
                }
            }
        }
    }

    /// Collects a `HEADERS` or `CONTINUATION` frame; the block's last frame
    /// sends the whole re-encoded block on.
    fn header_frame(&mut self, frame: BytesMut) -> io::Result<()> {
        let flags = frame[4];
        let stream_id = u32::from_be_bytes([frame[5], frame[6], frame[7], frame[8]]) & 0x7fff_ffff;
        let payload = &frame[FRAME_HEADER..];
        let block = match (frame[3], self.block.take()) {
            (HEADERS, None) => match headers_fragment(flags, payload) {
                Some((priority, fragment)) => HeaderBlock {
                    stream_id,
                    end_stream: flags & END_STREAM != 0,
                    priority,
                    fragment: BytesMut::from(fragment),
                    raw: frame,
                },
                None => return self.refuse(None, &frame),
            },
            (CONTINUATION, Some(mut block)) if block.stream_id == stream_id => {
                block.fragment.extend_from_slice(payload);
                block.raw.extend_from_slice(&frame);
                block
            }
            // A CONTINUATION out of place, or a HEADERS inside a block.
            (_, block) => return self.refuse(block, &frame),
        };
        if block.fragment.len() > MAX_HEADER_BLOCK {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("header block of stream {stream_id} exceeds {MAX_HEADER_BLOCK} bytes"),
            ));
        }
        if flags & END_HEADERS != 0 {
            self.reencode(block)
        } else {
            self.block = Some(block);
            Ok(())
        }
    }

    /// Forwards a malformed header frame (and the block it interrupts) as it
    /// came, for `h2` to refuse, and stops rewriting.
    fn refuse(&mut self, block: Option<HeaderBlock>, frame: &[u8]) -> io::Result<()> {
        self.block = block;
        self.passthrough();
        self.output.extend_from_slice(frame);
        Ok(())
    }

    fn reencode(&mut self, block: HeaderBlock) -> io::Result<()> {
        let headers = self.decoder.decode(&block.fragment).map_err(|error| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("HPACK error in stream {}: {error}", block.stream_id),
            )
        })?;
        let encoded = self.encoder.encode(headers.iter().map(|(name, value)| {
            if name == b":authority" && !is_authority(value) {
                tracing::debug!(authority = %String::from_utf8_lossy(value), "rewriting :authority");
                (&name[..], LOCALHOST)
            } else {
                (&name[..], &value[..])
            }
        }));
        let mut first = true;
        let mut rest = &encoded[..];
        loop {
            let room = MAX_FRAME
                - if first {
                    block.priority.map_or(0, |p| p.len())
                } else {
                    0
                };
            let (chunk, tail) = rest.split_at(rest.len().min(room));
            let mut flags = if tail.is_empty() { END_HEADERS } else { 0 };
            let (kind, priority) = if first {
                if block.end_stream {
                    flags |= END_STREAM;
                }
                if block.priority.is_some() {
                    flags |= PRIORITY;
                }
                (HEADERS, block.priority.as_ref().map_or(&[][..], |p| &p[..]))
            } else {
                (CONTINUATION, &[][..])
            };
            let len = (priority.len() + chunk.len()) as u32;
            self.output.put_slice(&len.to_be_bytes()[1..]);
            self.output.put_u8(kind);
            self.output.put_u8(flags);
            self.output.put_u32(block.stream_id);
            self.output.put_slice(priority);
            self.output.put_slice(chunk);
            if tail.is_empty() {
                return Ok(());
            }
            first = false;
            rest = tail;
        }
    }
}

/// The priority fields and the block fragment of a `HEADERS` payload, or
/// `None` when its padding or priority fields do not fit.
fn headers_fragment(flags: u8, mut payload: &[u8]) -> Option<(Option<[u8; 5]>, &[u8])> {
    if flags & PADDED != 0 {
        let pad = usize::from(*payload.first()?);
        payload.advance(1);
        payload = &payload[..payload.len().checked_sub(pad)?];
    }
    let priority = if flags & PRIORITY != 0 {
        let fields: [u8; 5] = payload.get(..5)?.try_into().ok()?;
        payload.advance(5);
        Some(fields)
    } else {
        None
    };
    Some((priority, payload))
}

/// Whether `h2` accepts `value` as a request's authority.
fn is_authority(value: &[u8]) -> bool {
    http::uri::Authority::try_from(value).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes()[1..].to_vec();
        out.extend([kind, flags]);
        out.extend(stream.to_be_bytes());
        out.extend(payload);
        out
    }

    /// Runs `input` through a rewriter in pieces of `step` bytes.
    fn rewrite(input: &[u8], step: usize) -> Vec<u8> {
        let mut rewriter = Rewriter::default();
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            rewriter.input.extend_from_slice(piece);
            rewriter.process().expect("rewrites");
            out.extend_from_slice(&rewriter.output.split());
        }
        rewriter.finish();
        out.extend_from_slice(&rewriter.output.split());
        out
    }

    type Headers = Vec<(Vec<u8>, Vec<u8>)>;

    fn request(authority: &[u8]) -> Headers {
        vec![
            (b":method".to_vec(), b"POST".to_vec()),
            (b":scheme".to_vec(), b"http".to_vec()),
            (
                b":path".to_vec(),
                b"/runtime.v1.RuntimeService/Version".to_vec(),
            ),
            (b":authority".to_vec(), authority.to_vec()),
            (b"content-type".to_vec(), b"application/grpc".to_vec()),
        ]
    }

    /// Decodes the header blocks of a rewritten stream (after the preface).
    fn decoded_blocks(mut bytes: &[u8]) -> Vec<(u8, Headers)> {
        let mut decoder = Decoder::new();
        let mut blocks = Vec::new();
        let mut block = Vec::new();
        let mut first_flags = 0;
        while bytes.len() >= FRAME_HEADER {
            let len = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
            let (kind, flags) = (bytes[3], bytes[4]);
            let payload = &bytes[FRAME_HEADER..FRAME_HEADER + len];
            if kind == HEADERS {
                first_flags = flags;
                block.extend_from_slice(headers_fragment(flags, payload).unwrap().1);
            } else if kind == CONTINUATION {
                block.extend_from_slice(payload);
            }
            if (kind == HEADERS || kind == CONTINUATION) && flags & END_HEADERS != 0 {
                blocks.push((first_flags, decoder.decode(&block).unwrap()));
                block.clear();
            }
            bytes = &bytes[FRAME_HEADER + len..];
        }
        blocks
    }

    #[test]
    fn a_socket_path_becomes_localhost_and_the_rest_is_unchanged() {
        let mut client = Encoder::new();
        let mut input = PREFACE.to_vec();
        input.extend(frame(0x4, 0, 0, &[])); // SETTINGS
        for authority in [&b"/run/containerd/containerd.sock"[..], b"", b"localhost:1"] {
            let headers = request(authority);
            let block = client.encode(headers.iter().map(|(n, v)| (&n[..], &v[..])));
            input.extend(frame(HEADERS, END_HEADERS, 1, &block));
            input.extend(frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0])); // DATA
        }
        for step in [1, 7, 4096] {
            let out = rewrite(&input, step);
            assert_eq!(&out[..PREFACE.len()], PREFACE);
            let blocks = decoded_blocks(&out[PREFACE.len()..]);
            let authorities: Vec<_> = blocks
                .iter()
                .map(|(_, headers)| headers[3].1.clone())
                .collect();
            assert_eq!(
                authorities,
                [
                    b"localhost".to_vec(),
                    b"localhost".to_vec(),
                    b"localhost:1".to_vec()
                ]
            );
            assert_eq!(blocks[0].1[2], request(b"")[2], "other headers are kept");
            let data = frame(0x0, END_STREAM, 1, &[0, 0, 0, 0, 0]);
            assert!(out.ends_with(&data), "DATA frames pass unchanged");
        }
    }

    #[test]
    fn continuations_padding_and_priority_are_understood() {
        let mut client = Encoder::new();
        let mut headers = request(b"/tmp/cri.sock");
        headers.push((b"x-big".to_vec(), vec![b'a'; 40_000]));
        let block = client.encode(headers.iter().map(|(n, v)| (&n[..], &v[..])));
        let (head, tail) = block.split_at(10);
        let mut payload = vec![3]; // pad length
        payload.extend([0x80, 0, 0, 0, 7]); // exclusive dependency on stream 0, weight 7
        payload.extend(head);
        payload.extend([0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(frame(HEADERS, PADDED | PRIORITY | END_STREAM, 3, &payload));
        input.extend(frame(CONTINUATION, END_HEADERS, 3, tail));

        let out = rewrite(&input, 1000);
        let blocks = decoded_blocks(&out[PREFACE.len()..]);
        assert_eq!(blocks.len(), 1);
        let (flags, decoded) = &blocks[0];
        assert_eq!(
            flags & (END_STREAM | PRIORITY | PADDED),
            END_STREAM | PRIORITY
        );
        assert_eq!(decoded[3].1, b"localhost");
        assert_eq!(decoded[5].1.len(), 40_000);
        let body = &out[PREFACE.len()..];
        assert_eq!(&body[FRAME_HEADER..FRAME_HEADER + 5], &[0x80, 0, 0, 0, 7]);
        let first_len = u32::from_be_bytes([0, body[0], body[1], body[2]]) as usize;
        assert!(
            first_len <= MAX_FRAME,
            "re-encoded frames respect the frame size"
        );
    }

    #[test]
    fn what_is_not_http2_passes_unchanged() {
        let input = b"GET / HTTP/1.1\r\nHost: /tmp/x.sock\r\n\r\n";
        assert_eq!(rewrite(input, 3), input);
    }

    #[test]
    fn a_frame_inside_a_header_block_is_left_for_h2_to_refuse() {
        let mut input = PREFACE.to_vec();
        let first = frame(HEADERS, 0, 1, &[0x82]);
        let ping = frame(0x6, 0, 0, &[0; 8]);
        input.extend(&first);
        input.extend(&ping);
        let out = rewrite(&input, 5);
        assert_eq!(&out[PREFACE.len()..], [first, ping].concat());
    }

    #[test]
    fn broken_hpack_ends_the_connection() {
        let mut rewriter = Rewriter::default();
        rewriter.input.extend_from_slice(PREFACE);
        rewriter
            .input
            .extend(frame(HEADERS, END_HEADERS, 1, &[0xff, 0xff]));
        let error = rewriter.process().unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("stream 1"), "{error}");
    }
}
