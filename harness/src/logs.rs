//! Agent log capture: a bounded ring of recent lines per source, for the report's "agent log tail".

use std::collections::VecDeque;
use std::io::Write;
use std::sync::{Arc, Mutex, OnceLock};

/// A bounded buffer of the most recent log lines.
#[derive(Debug, Clone)]
pub struct LogBuffer {
    inner: Arc<Mutex<Ring>>,
}

#[derive(Debug)]
struct Ring {
    lines: VecDeque<String>,
    capacity: usize,
    partial: String,
}

impl LogBuffer {
    /// A buffer keeping the last `capacity` lines.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Ring {
                lines: VecDeque::with_capacity(capacity.min(1024)),
                capacity: capacity.max(1),
                partial: String::new(),
            })),
        }
    }

    /// Appends one complete line.
    pub fn push_line(&self, line: impl Into<String>) {
        if let Ok(mut ring) = self.inner.lock() {
            ring.push(line.into());
        }
    }

    /// Appends raw bytes, splitting them into lines.
    pub fn push_bytes(&self, bytes: &[u8]) {
        let Ok(mut ring) = self.inner.lock() else {
            return;
        };
        let text = String::from_utf8_lossy(bytes);
        let mut partial = std::mem::take(&mut ring.partial);
        partial.push_str(&text);
        let mut rest = partial.as_str();
        while let Some(i) = rest.find('\n') {
            let line = rest[..i].trim_end_matches('\r').to_string();
            ring.push(line);
            rest = &rest[i + 1..];
        }
        ring.partial = rest.to_string();
    }

    /// The last `n` lines (all if fewer), oldest first.
    pub fn tail(&self, n: usize) -> Vec<String> {
        self.tail_matching(n, |_| true)
    }

    /// The first `n` lines still kept (the start of a short-lived program's output).
    pub fn head(&self, n: usize) -> Vec<String> {
        self.inner
            .lock()
            .map(|ring| ring.lines.iter().take(n).cloned().collect())
            .unwrap_or_default()
    }

    /// The last `n` lines for which `keep` holds, oldest first.
    pub fn tail_matching(&self, n: usize, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let Ok(ring) = self.inner.lock() else {
            return Vec::new();
        };
        let mut out: Vec<String> = ring
            .lines
            .iter()
            .rev()
            .filter(|l| keep(l))
            .take(n)
            .cloned()
            .collect();
        out.reverse();
        out
    }
}

impl Ring {
    fn push(&mut self, line: String) {
        if self.lines.len() == self.capacity {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }
}

/// The process-wide buffer that in-process agents' `tracing` output goes to (see [`capture_tracing`]).
pub fn global() -> &'static LogBuffer {
    static GLOBAL: OnceLock<LogBuffer> = OnceLock::new();
    GLOBAL.get_or_init(|| LogBuffer::new(20_000))
}

/// A `std::io::Write` into the global buffer.
#[derive(Debug, Clone, Copy, Default)]
pub struct GlobalWriter;

impl Write for GlobalWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        global().push_bytes(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Sends this process's `tracing` events (the in-process reference agent's logs) into [`global`],
/// filtered by `RUST_LOG` (default `info`). Does nothing if a subscriber is already set.
pub fn capture_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(|| GlobalWriter)
        .try_init();
}

/// Sends `tracing` output to stderr, as a node agent's own process writes it
/// (`nodeconform agent`, whose output the harness reads from the pipe).
pub fn init_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_lines_and_joins_partial_writes() {
        let b = LogBuffer::new(3);
        b.push_bytes(b"one\ntw");
        b.push_bytes(b"o\nthree\nfour\n");
        assert_eq!(b.tail(10), ["two", "three", "four"]);
        assert_eq!(b.tail(1), ["four"]);
        assert_eq!(b.head(2), ["two", "three"]);
        assert_eq!(b.tail_matching(5, |l| l.contains('o')), ["two", "four"]);
    }
}
