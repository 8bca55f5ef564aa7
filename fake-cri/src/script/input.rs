//! A process's standard input: what an `exec -i` or `attach` client types,
//! as it comes, until the client closes it.

use bytes::{Bytes, BytesMut};
use tokio::sync::mpsc;

/// Standard input, read by `cat` and by an interactive `sh`.
#[derive(Debug)]
pub struct Input {
    chunks: mpsc::UnboundedReceiver<Bytes>,
    buffered: BytesMut,
}

impl Input {
    /// Input from `chunks`; it ends when every sender is dropped.
    pub fn new(chunks: mpsc::UnboundedReceiver<Bytes>) -> Self {
        Self {
            chunks,
            buffered: BytesMut::new(),
        }
    }

    /// The next line, with its newline; the rest without one at the end of
    /// input; `None` once nothing is left.
    pub async fn line(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buffered.iter().position(|b| *b == b'\n') {
                let line = self.buffered.split_to(end + 1);
                return Some(String::from_utf8_lossy(&line).into_owned());
            }
            match self.chunks.recv().await {
                Some(chunk) => self.buffered.extend_from_slice(&chunk),
                None if self.buffered.is_empty() => return None,
                None => {
                    let rest = self.buffered.split();
                    return Some(String::from_utf8_lossy(&rest).into_owned());
                }
            }
        }
    }

    /// The next bytes, as they come; `None` at the end of input.
    pub async fn chunk(&mut self) -> Option<Bytes> {
        if !self.buffered.is_empty() {
            return Some(self.buffered.split().freeze());
        }
        self.chunks.recv().await
    }
}
