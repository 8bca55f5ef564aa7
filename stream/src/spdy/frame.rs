//! SPDY/3 frames (draft-mbelshe-httpbis-spdy-00, section 2.6) and their
//! compressed header blocks, as Go's `spdystream` — the library under the
//! kubelet, kube-apiserver, kubectl and containerd — reads and writes them.
//!
//! Header blocks of one direction form a single zlib stream, each block
//! ending at a sync flush. Go compresses with the SPDY dictionary; a zlib
//! stream without one is equally valid, and that is what [`Encoder`] writes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};
use http::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::dictionary;

/// The protocol version every control frame carries.
const VERSION: u16 = 3;
/// The largest payload a frame's 24-bit length can carry.
pub const MAX_PAYLOAD: usize = 0x00ff_ffff;
/// How large a decompressed header block may be.
const MAX_HEADER_BLOCK: usize = 1 << 20;

const FLAG_FIN: u8 = 0x01;
const FLAG_UNIDIRECTIONAL: u8 = 0x02;

/// `RST_STREAM` status codes used here.
pub mod rst {
    /// `PROTOCOL_ERROR`.
    pub const PROTOCOL_ERROR: u32 = 1;
    /// `REFUSED_STREAM`.
    pub const REFUSED_STREAM: u32 = 3;
    /// `CANCEL`.
    pub const CANCEL: u32 = 5;
}

/// One frame.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// `SYN_STREAM`: the peer opens a stream.
    SynStream {
        /// The stream.
        id: u32,
        /// Its headers.
        headers: HeaderMap,
        /// The sender sends nothing more on it.
        fin: bool,
        /// The receiver may not send on it.
        unidirectional: bool,
    },
    /// `SYN_REPLY`: the peer accepts a stream.
    SynReply {
        /// The stream.
        id: u32,
        /// Its headers.
        headers: HeaderMap,
        /// The sender sends nothing more on it.
        fin: bool,
    },
    /// `RST_STREAM`.
    RstStream {
        /// The stream.
        id: u32,
        /// Why (see [`rst`]).
        status: u32,
    },
    /// `PING`.
    Ping {
        /// Its id.
        id: u32,
    },
    /// `GOAWAY`.
    GoAway {
        /// The last stream the sender accepted.
        last_good: u32,
        /// Why.
        status: u32,
    },
    /// `HEADERS`: more headers on a stream.
    Headers {
        /// The stream.
        id: u32,
        /// The headers.
        headers: HeaderMap,
        /// The sender sends nothing more on it.
        fin: bool,
    },
    /// `DATA`.
    Data {
        /// The stream.
        id: u32,
        /// The bytes.
        data: Bytes,
        /// The sender sends nothing more on it.
        fin: bool,
    },
    /// `SETTINGS`, `WINDOW_UPDATE` and control frames of unknown types: read
    /// and ignored, as `spdystream` (which does no flow control) does.
    Ignored {
        /// The control frame type.
        kind: u16,
    },
}

/// A malformed frame or header block.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading from the connection failed (or it ended mid-frame).
    #[error("reading a SPDY frame: {0}")]
    Io(#[from] std::io::Error),
    /// A control frame of another version.
    #[error("unsupported SPDY version {0}")]
    Version(u16),
    /// A frame shorter than its fixed fields.
    #[error("SPDY {kind} frame of {len} bytes is too short")]
    Short {
        /// The frame type.
        kind: &'static str,
        /// Its length.
        len: usize,
    },
    /// A header block that is not a zlib stream, or not the SPDY dictionary's.
    #[error("SPDY header block: {0}")]
    Compression(String),
    /// A header block whose fields do not add up.
    #[error("SPDY header block: {0}")]
    Headers(String),
}

/// Reads frames; owns the inbound header decompressor.
pub struct Decoder {
    inflate: Decompress,
    started: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self {
            // Raw deflate: the zlib header is read here, to prime the window
            // with the dictionary when the stream names it.
            inflate: Decompress::new(false),
            started: false,
        }
    }
}

impl Decoder {
    /// Reads the next frame; `Ok(None)` at a clean end of the connection.
    pub async fn read<R: AsyncRead + Unpin>(&mut self, r: &mut R) -> Result<Option<Frame>, Error> {
        let mut head = [0u8; 8];
        match r.read_exact(&mut head[..1]).await {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e.into()),
        }
        r.read_exact(&mut head[1..]).await?;
        let flags = head[4];
        let len = usize::from(head[5]) << 16 | usize::from(head[6]) << 8 | usize::from(head[7]);
        let mut payload = vec![0u8; len];
        r.read_exact(&mut payload).await?;
        let mut p = Bytes::from(payload);
        if head[0] & 0x80 == 0 {
            let id = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            return Ok(Some(Frame::Data {
                id,
                data: p,
                fin: flags & FLAG_FIN != 0,
            }));
        }
        let version = u16::from_be_bytes([head[0] & 0x7f, head[1]]);
        if version != VERSION {
            return Err(Error::Version(version));
        }
        let kind = u16::from_be_bytes([head[2], head[3]]);
        let need = |name: &'static str, n: usize| {
            if len < n {
                Err(Error::Short { kind: name, len })
            } else {
                Ok(())
            }
        };
        let fin = flags & FLAG_FIN != 0;
        let frame = match kind {
            1 => {
                need("SYN_STREAM", 10)?;
                let id = p.get_u32() & 0x7fff_ffff;
                p.advance(6); // associated stream, priority, slot
                Frame::SynStream {
                    id,
                    headers: self.headers(&p)?,
                    fin,
                    unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                }
            }
            2 | 8 => {
                need("SYN_REPLY", 4)?;
                let id = p.get_u32() & 0x7fff_ffff;
                let headers = self.headers(&p)?;
                if kind == 2 {
                    Frame::SynReply { id, headers, fin }
                } else {
                    Frame::Headers { id, headers, fin }
                }
            }
            3 => {
                need("RST_STREAM", 8)?;
                Frame::RstStream {
                    id: p.get_u32() & 0x7fff_ffff,
                    status: p.get_u32(),
                }
            }
            6 => {
                need("PING", 4)?;
                Frame::Ping { id: p.get_u32() }
            }
            7 => {
                need("GOAWAY", 8)?;
                Frame::GoAway {
                    last_good: p.get_u32() & 0x7fff_ffff,
                    status: p.get_u32(),
                }
            }
            kind => Frame::Ignored { kind },
        };
        Ok(Some(frame))
    }

    /// Decompresses and parses one header block.
    fn headers(&mut self, block: &[u8]) -> Result<HeaderMap, Error> {
        let raw = self.inflate(block)?;
        parse_block(&raw)
    }

    fn inflate(&mut self, mut input: &[u8]) -> Result<Vec<u8>, Error> {
        let bad = |m: &str| Error::Compression(m.to_owned());
        if !self.started {
            let [cmf, flg, ..] = *input else {
                return Err(bad("truncated zlib header"));
            };
            if cmf & 0x0f != 8 || (u16::from(cmf) << 8 | u16::from(flg)) % 31 != 0 {
                return Err(bad("not a zlib stream"));
            }
            input = &input[2..];
            if flg & 0x20 != 0 {
                let [a, b, c, d, ..] = *input else {
                    return Err(bad("truncated zlib header"));
                };
                if u32::from_be_bytes([a, b, c, d]) != dictionary::ID {
                    return Err(bad("the stream names another dictionary"));
                }
                input = &input[4..];
                self.prime()?;
            }
            self.started = true;
        }
        let mut out = Vec::with_capacity(input.len() * 4 + 64);
        loop {
            let before = self.inflate.total_in();
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(256));
            }
            self.inflate
                .decompress_vec(input, &mut out, FlushDecompress::Sync)
                .map_err(|e| Error::Compression(e.to_string()))?;
            let used = usize::try_from(self.inflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            if out.len() > MAX_HEADER_BLOCK {
                return Err(bad("header block over 1 MiB"));
            }
            if input.is_empty() && out.len() < out.capacity() {
                return Ok(out);
            }
        }
    }

    /// Puts the dictionary in the decompressor's window, as a stored block
    /// whose output is dropped: what zlib's `inflateSetDictionary` does.
    fn prime(&mut self) -> Result<(), Error> {
        let dict = dictionary::bytes();
        let len = dict.len() as u16;
        let mut block = vec![0u8]; // not final, stored
        block.extend_from_slice(&len.to_le_bytes());
        block.extend_from_slice(&(!len).to_le_bytes());
        block.extend_from_slice(&dict);
        let mut sink = Vec::with_capacity(dict.len() + 16);
        let status = self
            .inflate
            .decompress_vec(&block, &mut sink, FlushDecompress::Sync)
            .map_err(|e| Error::Compression(e.to_string()))?;
        if sink != dict || status == Status::StreamEnd {
            return Err(Error::Compression("priming the dictionary".into()));
        }
        Ok(())
    }
}

/// The fields of a decompressed header block: a count, then names and
/// values, each a 32-bit length and bytes; a value holds several values
/// separated by NUL. Names must be lowercase.
fn parse_block(mut raw: &[u8]) -> Result<HeaderMap, Error> {
    let bad = |m: String| Error::Headers(m);
    let take = |raw: &mut &[u8]| -> Result<Vec<u8>, Error> {
        if raw.len() < 4 {
            return Err(bad("truncated".into()));
        }
        let n = raw.get_u32() as usize;
        if raw.len() < n {
            return Err(bad("truncated".into()));
        }
        let (field, rest) = raw.split_at(n);
        *raw = rest;
        Ok(field.to_vec())
    };
    if raw.len() < 4 {
        return Err(bad("truncated".into()));
    }
    let count = raw.get_u32();
    let mut headers = HeaderMap::new();
    for _ in 0..count {
        let name = take(&mut raw)?;
        let value = take(&mut raw)?;
        if name.iter().any(u8::is_ascii_uppercase) {
            return Err(bad(format!(
                "header name {:?} is not lowercase",
                String::from_utf8_lossy(&name)
            )));
        }
        let name = HeaderName::from_bytes(&name).map_err(|_| {
            bad(format!(
                "invalid header name {:?}",
                String::from_utf8_lossy(&name)
            ))
        })?;
        if headers.contains_key(&name) {
            return Err(bad(format!("duplicate header {name}")));
        }
        for v in value.split(|b| *b == 0) {
            let v = HeaderValue::from_bytes(v)
                .map_err(|_| bad(format!("invalid value of header {name}")))?;
            headers.append(name.clone(), v);
        }
    }
    Ok(headers)
}

/// Writes frames; owns the outbound header compressor.
pub struct Encoder {
    deflate: Compress,
}

impl Default for Encoder {
    fn default() -> Self {
        Self {
            deflate: Compress::new(Compression::default(), true),
        }
    }
}

impl Encoder {
    /// Appends `frame` to `out`. Data longer than [`MAX_PAYLOAD`] is the
    /// caller's to split.
    pub fn encode(&mut self, frame: &Frame, out: &mut BytesMut) {
        let control = |out: &mut BytesMut, kind: u16, flags: u8, payload: &[u8]| {
            out.put_u16(0x8000 | VERSION);
            out.put_u16(kind);
            out.put_u32(u32::from(flags) << 24 | payload.len() as u32);
            out.put_slice(payload);
        };
        let fin = |f: bool| if f { FLAG_FIN } else { 0 };
        match frame {
            Frame::SynStream {
                id,
                headers,
                fin: f,
                unidirectional,
            } => {
                let mut p = BytesMut::new();
                p.put_u32(*id);
                p.put_u32(0);
                p.put_u16(0); // priority 0, slot 0
                p.put_slice(&self.block(headers));
                let flags = fin(*f)
                    | if *unidirectional {
                        FLAG_UNIDIRECTIONAL
                    } else {
                        0
                    };
                control(out, 1, flags, &p);
            }
            Frame::SynReply {
                id,
                headers,
                fin: f,
            }
            | Frame::Headers {
                id,
                headers,
                fin: f,
            } => {
                let mut p = BytesMut::new();
                p.put_u32(*id);
                p.put_slice(&self.block(headers));
                let kind = if matches!(frame, Frame::SynReply { .. }) {
                    2
                } else {
                    8
                };
                control(out, kind, fin(*f), &p);
            }
            Frame::RstStream { id, status } => {
                control(
                    out,
                    3,
                    0,
                    &[id.to_be_bytes(), status.to_be_bytes()].concat(),
                );
            }
            Frame::Ping { id } => control(out, 6, 0, &id.to_be_bytes()),
            Frame::GoAway { last_good, status } => {
                control(
                    out,
                    7,
                    0,
                    &[last_good.to_be_bytes(), status.to_be_bytes()].concat(),
                );
            }
            Frame::Data { id, data, fin: f } => {
                out.put_u32(id & 0x7fff_ffff);
                out.put_u32(u32::from(fin(*f)) << 24 | data.len() as u32);
                out.put_slice(data);
            }
            Frame::Ignored { .. } => {}
        }
    }

    /// One header block, compressed and sync-flushed.
    fn block(&mut self, headers: &HeaderMap) -> Vec<u8> {
        let mut raw = Vec::new();
        raw.put_u32(headers.keys_len() as u32);
        for name in headers.keys() {
            raw.put_u32(name.as_str().len() as u32);
            raw.put_slice(name.as_str().as_bytes());
            let values: Vec<&[u8]> = headers
                .get_all(name)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect();
            let value = values.join(&0u8);
            raw.put_u32(value.len() as u32);
            raw.put_slice(&value);
        }
        let mut out = Vec::with_capacity(raw.len() + 64);
        let mut input = raw.as_slice();
        loop {
            let before = self.deflate.total_in();
            if out.len() == out.capacity() {
                out.reserve(out.capacity().max(64));
            }
            // Compressing into memory cannot fail.
            let _ = self
                .deflate
                .compress_vec(input, &mut out, FlushCompress::Sync);
            let used = usize::try_from(self.deflate.total_in() - before).unwrap_or(input.len());
            input = &input[used..];
            if input.is_empty() && out.len() < out.capacity() {
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[tokio::test]
    async fn frames_round_trip() {
        let frames = vec![
            Frame::SynStream {
                id: 1,
                headers: headers(&[("streamtype", "error"), ("port", "80"), ("port", "81")]),
                fin: false,
                unidirectional: false,
            },
            Frame::SynReply {
                id: 1,
                headers: HeaderMap::new(),
                fin: false,
            },
            Frame::Data {
                id: 1,
                data: Bytes::from_static(b"hello"),
                fin: true,
            },
            Frame::Headers {
                id: 3,
                headers: headers(&[("a", "b")]),
                fin: true,
            },
            Frame::RstStream {
                id: 3,
                status: rst::CANCEL,
            },
            Frame::Ping { id: 2 },
            Frame::GoAway {
                last_good: 1,
                status: 0,
            },
        ];
        let mut enc = Encoder::default();
        let mut wire = BytesMut::new();
        for f in &frames {
            enc.encode(f, &mut wire);
        }
        let mut dec = Decoder::default();
        let mut r = &wire[..];
        for f in &frames {
            assert_eq!(dec.read(&mut r).await.unwrap().as_ref(), Some(f));
        }
        assert!(dec.read(&mut r).await.unwrap().is_none());
    }

    /// A block compressed with the SPDY dictionary, as Go's framer writes one:
    /// made here by compressing the dictionary and the block in one stream and
    /// keeping only the block's part, which refers back into the dictionary.
    #[test]
    fn reads_blocks_compressed_with_the_dictionary() {
        let dict = dictionary::bytes();
        let mut raw = Vec::new();
        raw.put_u32(1);
        raw.put_u32(10);
        raw.put_slice(b"streamtype");
        raw.put_u32(6);
        raw.put_slice(b"stdout");
        let mut z = Compress::new(Compression::best(), false);
        let mut primed = Vec::with_capacity(4096);
        z.compress_vec(&dict, &mut primed, FlushCompress::Sync)
            .unwrap();
        let mut body = Vec::with_capacity(4096);
        z.compress_vec(&raw, &mut body, FlushCompress::Sync)
            .unwrap();
        let mut block = vec![0x78, 0xbb];
        block.extend_from_slice(&dictionary::ID.to_be_bytes());
        block.extend_from_slice(&body);
        let mut dec = Decoder::default();
        let h = dec.headers(&block).unwrap();
        assert_eq!(h.get("streamtype").unwrap(), "stdout");
    }

    #[test]
    fn refuses_uppercase_names_and_other_dictionaries() {
        let mut raw = Vec::new();
        raw.put_u32(1);
        raw.put_u32(1);
        raw.put_slice(b"A");
        raw.put_u32(0);
        assert!(matches!(parse_block(&raw), Err(Error::Headers(_))));
        let mut dec = Decoder::default();
        let block = [0x78, 0xbb, 0, 0, 0, 1, 0];
        assert!(matches!(dec.headers(&block), Err(Error::Compression(_))));
    }
}
