//! Remote commands — `exec` and `attach` — on the serving side, as the CRI
//! streaming server serves them (`k8s.io/kubelet/pkg/cri/streaming/remotecommand`):
//! over SPDY the client opens a stream per channel (`streamType` `error`,
//! `stdin`, `stdout`, `stderr`, `resize`) and the command runs once all
//! expected streams are there; over WebSocket the five are numbered channels
//! of one connection. The outcome goes to the error stream — a
//! `metav1.Status` as JSON under `v4.channel.k8s.io` (and its base64 and v5
//! variants), the error's text under older protocols.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::channel::Writer;
use crate::spdy::Session;
use crate::upgrade::Upgrade;
use crate::websocket;

/// The protocols served over SPDY, newest first (`SupportedStreamingProtocols`).
pub const PROTOCOLS: [&str; 4] = [
    V4,
    "v3.channel.k8s.io",
    "v2.channel.k8s.io",
    "channel.k8s.io",
];
/// The protocols a runtime's streaming server serves over WebSocket (`""`:
/// the client named none).
pub const WEBSOCKET_PROTOCOLS: [&str; 5] = [
    "",
    "channel.k8s.io",
    "base64.channel.k8s.io",
    V4,
    "v4.base64.channel.k8s.io",
];
/// The protocol whose error stream carries a JSON `Status`.
pub const V4: &str = "v4.channel.k8s.io";
/// How long the client has to open its streams (`DefaultStreamCreationTimeout`).
pub const STREAM_CREATION_TIMEOUT: Duration = Duration::from_secs(30);

/// Which channels a command has (the `stdin`, `stdout`, `stderr`, `tty`
/// options of the request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Standard input.
    pub stdin: bool,
    /// Standard output.
    pub stdout: bool,
    /// Standard error (never with a TTY).
    pub stderr: bool,
    /// A terminal.
    pub tty: bool,
}

/// A terminal size sent on the resize stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalSize {
    /// Columns.
    #[serde(rename = "Width")]
    pub width: u16,
    /// Rows.
    #[serde(rename = "Height")]
    pub height: u16,
}

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It exited; `command` is its argv, for the message of a non-zero code.
    Exited {
        /// The argv (empty for `attach`).
        command: Vec<String>,
        /// The exit code.
        code: i32,
    },
    /// It could not run: why, as upstream words it (`error executing
    /// command in container: …`, `error attaching to container: …`).
    Failed(String),
    /// A status made elsewhere (a kubelet's, passed on by a translator).
    Status(serde_json::Value),
}

/// The client did not open the streams it had to.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The upgrade did not complete.
    #[error("upgrading the connection: {0}")]
    Upgrade(#[from] hyper::Error),
    /// Not every expected stream came in time.
    #[error("timed out waiting for client to create streams")]
    Timeout,
    /// The connection ended first.
    #[error("the connection ended before the client created its streams")]
    Ended,
}

/// A command's channels, ready for it to run.
#[derive(Debug)]
pub struct Channels {
    /// What the client types, until it closes stdin.
    pub stdin: Option<mpsc::UnboundedReceiver<Bytes>>,
    /// Where the command's output goes.
    pub stdout: Option<Writer>,
    /// Where its errors go.
    pub stderr: Option<Writer>,
    /// Terminal sizes, with a TTY under v3 and later.
    pub resize: Option<mpsc::UnboundedReceiver<TerminalSize>>,
    error: Option<Writer>,
    tty: bool,
    protocol: String,
    ending: Ending,
}

/// How the connection ends once the outcome is written.
#[derive(Debug)]
enum Ending {
    Spdy(Session),
    WebSocket(websocket::Connection),
}

/// Completes the upgrade and waits for the client's streams.
pub async fn accept(upgrade: Upgrade, options: Options) -> Result<Channels, Error> {
    let protocol = upgrade.protocol().to_owned();
    let (session, mut streams) = upgrade.session().await?;
    let resizing = options.tty && protocol != "v2.channel.k8s.io" && protocol != "channel.k8s.io";
    let expected = 1
        + usize::from(options.stdin)
        + usize::from(options.stdout)
        + usize::from(options.stderr)
        + usize::from(resizing);
    let mut channels = Channels {
        stdin: None,
        stdout: None,
        stderr: None,
        resize: None,
        error: None,
        tty: options.tty,
        protocol,
        ending: Ending::Spdy(session),
    };
    let deadline = Instant::now() + STREAM_CREATION_TIMEOUT;
    let mut received = 0;
    while received < expected {
        let stream = match tokio::time::timeout_at(deadline, streams.recv()).await {
            Ok(Some(stream)) => stream,
            Ok(None) => return Err(Error::Ended),
            Err(_) => {
                if let Ending::Spdy(session) = &channels.ending {
                    session.close().await;
                }
                return Err(Error::Timeout);
            }
        };
        if stream.reply().await.is_err() {
            return Err(Error::Ended);
        }
        let kind = stream.header("streamtype").unwrap_or_default().to_owned();
        let (inbound, writer) = stream.split();
        let writer = Writer::Spdy(writer);
        match kind.as_str() {
            "error" => channels.error = Some(writer),
            "stdin" => channels.stdin = Some(inbound),
            "stdout" => channels.stdout = Some(writer),
            "stderr" => channels.stderr = Some(writer),
            "resize" => channels.resize = Some(resize_events(inbound)),
            other => {
                tracing::debug!(stream_type = other, "unexpected stream type");
                continue;
            }
        }
        received += 1;
    }
    Ok(channels)
}

/// Completes a WebSocket upgrade (`wsstream` with five channels: stdin,
/// stdout, stderr, error, resize) and says it is ready, as upstream does, by
/// an empty message on the first channel the command writes to.
pub async fn accept_websocket(
    upgrade: websocket::Upgrade,
    options: Options,
) -> Result<Channels, Error> {
    let protocol = upgrade.protocol().to_owned();
    let mut conn = upgrade.connect(5).await?;
    let ready = if options.stdout {
        1
    } else if options.stderr {
        2
    } else {
        3
    };
    let _ = conn.writer(ready).write(Bytes::new()).await;
    let writer = |on: bool, channel: u8| on.then(|| Writer::WebSocket(conn.writer(channel)));
    let stdout = writer(options.stdout, 1);
    let stderr = writer(options.stderr, 2);
    let error = writer(true, 3);
    let stdin = if options.stdin {
        conn.take_inbound(0)
    } else {
        None
    };
    let resize = if options.tty {
        conn.take_inbound(4).map(resize_events)
    } else {
        None
    };
    Ok(Channels {
        stdin,
        stdout,
        stderr,
        resize,
        error,
        tty: options.tty,
        protocol,
        ending: Ending::WebSocket(conn),
    })
}

/// Decodes the resize stream's JSON objects as they come.
fn resize_events(
    mut inbound: mpsc::UnboundedReceiver<Bytes>,
) -> mpsc::UnboundedReceiver<TerminalSize> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = BytesMut::new();
        while let Some(chunk) = inbound.recv().await {
            buf.extend_from_slice(&chunk);
            let mut sizes = serde_json::Deserializer::from_slice(&buf).into_iter::<TerminalSize>();
            let mut used = 0;
            while let Some(size) = sizes.next() {
                match size {
                    Ok(size) => {
                        used = sizes.byte_offset();
                        if tx.send(size).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.is_eof() => break,
                    // As upstream: a malformed size ends the resize events.
                    Err(_) => return,
                }
            }
            let _ = buf.split_to(used);
        }
    });
    rx
}

impl Channels {
    /// Where the command's standard output (`stderr` false) or standard
    /// error goes: its own stream, or with a terminal stdout's; `None` when
    /// the client asked for neither (the output is dropped).
    pub fn output(&self, stderr: bool) -> Option<Writer> {
        match (stderr, self.tty) {
            (false, _) => self.stdout.clone(),
            (true, false) => self.stderr.clone(),
            (true, true) => self.stderr.clone().or_else(|| self.stdout.clone()),
        }
    }

    /// The negotiated protocol.
    pub fn protocol(&self) -> &str {
        &self.protocol
    }

    /// Reports the outcome on the error stream and ends the session (every
    /// stream reset, `GOAWAY`), as upstream's `ServeExec` does.
    pub async fn finish(self, outcome: Outcome) {
        if let Some(error) = &self.error {
            let json = matches!(
                self.protocol.as_str(),
                V4 | "v4.base64.channel.k8s.io" | "v5.channel.k8s.io"
            );
            let report = if json {
                Some(status(&outcome).to_string())
            } else {
                match &outcome {
                    Outcome::Exited { code: 0, .. } => None,
                    other => Some(message(other)),
                }
            };
            if let Some(report) = report {
                let _ = error.write(report).await;
            }
        }
        match self.ending {
            Ending::Spdy(session) => session.close().await,
            Ending::WebSocket(conn) => conn.close().await,
        }
    }
}

/// The text of a failure (`StatusError.Error()`).
fn message(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Status(status) => status["message"].as_str().unwrap_or_default().to_owned(),
        Outcome::Exited { command, code } => format!(
            "command terminated with non-zero exit code: error executing command [{}], exit code {code}",
            command.join(" ")
        ),
        Outcome::Failed(why) => format!("Internal error occurred: {why}"),
    }
}

/// The `metav1.Status` of an outcome, in Go's field order.
pub fn status(outcome: &Outcome) -> serde_json::Value {
    match outcome {
        Outcome::Status(status) => status.clone(),
        Outcome::Exited { code: 0, .. } => json!({"metadata": {}, "status": "Success"}),
        Outcome::Exited { code, .. } => json!({
            "metadata": {},
            "status": "Failure",
            "message": message(outcome),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        }),
        Outcome::Failed(why) => json!({
            "metadata": {},
            "status": "Failure",
            "message": message(outcome),
            "reason": "InternalError",
            "details": {"causes": [{"message": why}]},
            "code": 500,
        }),
    }
}
