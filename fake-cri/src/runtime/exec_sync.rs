//! `ExecSync`: a command interpreted in a running container.

use std::time::Duration;

use nodeconform_cri::v1;

use super::state::{Runtime, invalid};
use crate::error::{Error, Result};
use crate::logs::Captured;
use crate::script::{Outcome, Program, Shell};

impl Runtime {
    /// Runs a command in a running container, interpreted like its main
    pub(crate) async fn exec_sync(
        &self,
        id: &str,
        cmd: &[String],
        timeout: i64,
    ) -> Result<v1::ExecSyncResponse> {
        if cmd.is_empty() {
            return Err(invalid("ExecSync", "cmd must not be empty"));
        }
        let (context, mut exited) = self.running_container(id, "exec in it", |c| {
            (c.context.clone(), c.exited.subscribe())
        })?;
        let program = match Program::from_argv(cmd) {
            Ok(program) => program,
            // As `sh -c` would: a syntax error exits 2.
            Err(error) => {
                return Ok(v1::ExecSyncResponse {
                    stdout: Vec::new(),
                    stderr: format!("sh: syntax error: {error}\n").into_bytes(),
                    exit_code: 2,
                });
            }
        };
        let mut output = Captured::default();
        let exec = Shell::exec(context, &mut output).run(&program);
        // The exec's process dies with the container (killed, as everything
        // in its cgroup), or when the container is gone (removed, restart,
        // shutdown).
        let run = async {
            tokio::select! {
                outcome = exec => outcome,
                _ = exited.wait_for(|exited| *exited) => Outcome {
                    exit_code: 137,
                    oom_killed: false,
                },
            }
        };
        let outcome = if timeout > 0 {
            let limit = Duration::from_secs(u64::try_from(timeout).unwrap_or(u64::MAX));
            tokio::time::timeout(limit, run)
                .await
                .map_err(|_| Error::ExecTimeout {
                    id: id.to_owned(),
                    timeout,
                })?
        } else {
            run.await
        };
        Ok(v1::ExecSyncResponse {
            stdout: output.stdout,
            stderr: output.stderr,
            exit_code: outcome.exit_code,
        })
    }
}
