//! Commands run in a running container — `ExecSync` and the streaming
//! `Exec` — interpreted like its main command, and `Attach` to its output.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use nodeconform_cri::v1;
use nodeconform_stream::channel::Writer;
use nodeconform_stream::remotecommand;
use tokio::sync::{broadcast, mpsc};

use super::state::{Runtime, invalid};
use crate::error::{Error, Result};
use crate::logs::Captured;
use crate::script::{Input, Outcome, Output, Program, Shell, Stream};

impl Runtime {
    /// Runs `cmd` in running container `id` with its output to `output` and
    /// `stdin`, if any, as its input; returns the exit code. `rpc` names the
    /// request in errors.
    pub(crate) async fn exec(
        &self,
        rpc: &'static str,
        id: &str,
        cmd: &[String],
        output: &mut dyn Output,
        stdin: Option<&mut Input>,
    ) -> Result<i32> {
        if cmd.is_empty() {
            return Err(invalid(rpc, "cmd must not be empty"));
        }
        let (context, mut exited) = self.running_container(id, "exec in it", |c| {
            (c.context.clone(), c.exited.subscribe())
        })?;
        let program = match Program::from_argv(cmd) {
            Ok(program) => program,
            // As `sh -c` would: a syntax error exits 2.
            Err(error) => {
                output.write(
                    Stream::Stderr,
                    format!("sh: syntax error: {error}\n").as_bytes(),
                );
                return Ok(2);
            }
        };
        let mut shell = Shell::exec(context, output);
        if let Some(stdin) = stdin {
            shell = shell.with_stdin(stdin);
        }
        let exec = shell.run(&program);
        // The exec's process dies with the container (killed, as everything
        // in its cgroup), or when the container is gone (removed, restart,
        // shutdown).
        let outcome = tokio::select! {
            outcome = exec => outcome,
            _ = exited.wait_for(|exited| *exited) => Outcome {
                exit_code: 137,
                oom_killed: false,
            },
        };
        Ok(outcome.exit_code)
    }

    /// `ExecSync`: [`Runtime::exec`] with the output captured, within
    /// `timeout` seconds when positive.
    pub(crate) async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: i64,
    ) -> Result<v1::ExecSyncResponse> {
        let mut output = Captured::default();
        let run = self.exec("ExecSync", id, cmd, &mut output, None);
        let exit_code = if timeout > 0 {
            let limit = Duration::from_secs(u64::try_from(timeout).unwrap_or(u64::MAX));
            tokio::time::timeout(limit, run)
                .await
                .map_err(|_| Error::ExecTimeout {
                    id: id.to_owned(),
                    timeout,
                })??
        } else {
            run.await?
        };
        Ok(v1::ExecSyncResponse {
            stdout: output.stdout,
            stderr: output.stderr,
            exit_code,
        })
    }
}

impl Runtime {
    /// `Attach`: the running container's output from now on, to `stdout`
    /// and `stderr` (where the client's channels route them), until it exits; what the
    /// client sends on `stdin` goes to the container's standard input if it
    /// has one (`stdin: true`), which ends with the client's when the
    /// container asked for `stdin_once`.
    pub(crate) async fn attach(
        self: &Arc<Self>,
        id: &str,
        stdin: Option<mpsc::UnboundedReceiver<Bytes>>,
        stdout: Option<Writer>,
        stderr: Option<Writer>,
    ) -> remotecommand::Outcome {
        let attached = self.running_container(id, "attach to it", |c| {
            (
                c.attached.subscribe(),
                c.exited.subscribe(),
                c.stdin.clone().zip(Some(c.config.stdin_once)),
            )
        });
        let (mut output, mut exited, input) = match attached {
            Ok(attached) => attached,
            Err(error) => {
                return remotecommand::Outcome::Failed(format!(
                    "error attaching to container: {error}"
                ));
            }
        };
        if let (Some(mut from_client), Some((to_container, once))) = (stdin, input) {
            let (runtime, id) = (Arc::clone(self), id.to_owned());
            tokio::spawn(async move {
                while let Some(chunk) = from_client.recv().await {
                    if to_container.send(chunk).is_err() {
                        return;
                    }
                }
                if once {
                    runtime.close_stdin(&id);
                }
            });
        }
        loop {
            let (stream, data) = tokio::select! {
                biased;
                written = output.recv() => match written {
                    Ok(written) => written,
                    Err(broadcast::error::RecvError::Lagged(_)) => continue,
                    Err(broadcast::error::RecvError::Closed) => break,
                },
                () = async { let _ = exited.wait_for(|exited| *exited).await; } => {
                    // What it wrote last is queued already.
                    while let Ok((stream, data)) = output.try_recv() {
                        forward(&stdout, &stderr, stream, data).await;
                    }
                    break;
                }
            };
            if !forward(&stdout, &stderr, stream, data).await {
                break;
            }
        }
        remotecommand::Outcome::Exited {
            command: Vec::new(),
            code: 0,
        }
    }
}

/// Writes attached output to its stream's writer (none: dropped); `false`
/// once the client has gone.
async fn forward(
    stdout: &Option<Writer>,
    stderr: &Option<Writer>,
    stream: Stream,
    data: Bytes,
) -> bool {
    let writer = match stream {
        Stream::Stdout => stdout.as_ref(),
        Stream::Stderr => stderr.as_ref(),
    };
    match writer {
        Some(writer) => writer.write(data.to_vec()).await.is_ok(),
        None => true,
    }
}

impl Runtime {
    /// Ends container `id`'s standard input (its `stdin_once` client left).
    fn close_stdin(&self, id: &str) {
        if let Some(container) = self.state().containers.get_mut(id) {
            container.stdin = None;
        }
    }
}
