//! Command substitution, `$(LIST)`: the list runs in a subshell whose
//! standard output becomes text of the word.

use super::ast::List;
use super::files::FileSystem;
use super::shell::{Output, Route, Shell, Stream};
use super::signals::{Effect, Stop, effect};

/// A subshell's output: stdout is kept for the substitution, stderr goes
/// where the parent's stderr goes.
struct Capture<'p> {
    stdout: Vec<u8>,
    stderr: Route,
    parent: &'p mut dyn Output,
    files: FileSystem,
}

impl Output for Capture<'_> {
    fn write(&mut self, stream: Stream, data: &[u8]) {
        match (stream, &self.stderr) {
            (Stream::Stdout, _) => self.stdout.extend_from_slice(data),
            (Stream::Stderr, Route::Stream(target)) => self.parent.write(*target, data),
            (Stream::Stderr, Route::Null) => {}
            (Stream::Stderr, Route::File(path)) => {
                // As `Shell::emit`: a volume removed since the redirection
                // loses the output.
                let _ = self.files.write(path, data, true);
            }
        }
    }
}

impl Shell<'_> {
    /// Runs `list` in a subshell and returns its standard output without the
    /// trailing newlines, as `sh` does.
    ///
    /// The subshell starts from a copy of this shell's context, variables,
    /// parameters and `$?` (so its `exit` and the variables it sets stay
    /// inside it; the files are shared) and receives no signals; its traps
    /// start reset, as a subshell's do. Meanwhile this shell still takes its own
    /// signals: SIGKILL, or a SIGTERM that ends it, drops the subshell, so a
    /// `$(sleep 1000)` never keeps a container from stopping; a trapped
    /// SIGTERM runs its handler once the command in progress finishes.
    pub(super) async fn substitute(&mut self, list: &List) -> Result<String, Stop> {
        let mut capture = Capture {
            stdout: Vec::new(),
            stderr: self.routes[1].clone(),
            parent: &mut *self.output,
            files: self.context.files.clone(),
        };
        let result = {
            let mut sub = Shell::new(self.context.clone(), &mut capture, None, false);
            sub.vars = self.vars.clone();
            sub.args = self.args.clone();
            sub.status = self.status;
            let run = async {
                let result = sub.list(list).await;
                sub.run_exit_trap(result).await
            };
            tokio::pin!(run);
            loop {
                let Some(signals) = self.signals.as_deref_mut() else {
                    break run.await;
                };
                tokio::select! {
                    result = &mut run => break result,
                    signal = signals.recv() => match signal {
                        Some(signal) => match effect(signal, &self.term, self.pid1) {
                            Effect::Stop(stop) => return Err(stop),
                            Effect::Defer => self.pending_term = true,
                            Effect::Ignore => {}
                        },
                        // Nobody can signal us any more: wait for the subshell alone.
                        None => self.signals = None,
                    },
                }
            }
        };
        let status = match result {
            Ok(code) | Err(Stop::Exit(code)) => code,
            // The subshell has no signals; kept for completeness.
            Err(Stop::Signal(outcome)) => outcome.exit_code,
        };
        self.substitution_status = Some(status);
        let mut text = String::from_utf8_lossy(&capture.stdout).into_owned();
        text.truncate(text.trim_end_matches('\n').len());
        Ok(text)
    }
}

#[cfg(test)]
mod tests;
