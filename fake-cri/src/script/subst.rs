//! Command substitution, `$(LIST)`: the list runs in a subshell whose
//! standard output becomes text of the word.

use super::ast::{Command, List};
use super::files::FileSystem;
use super::redirect::SharedInput;
use super::shell::{Output, Route, Shell, Stream};
use super::signals::{Effect, Stop, effect};

/// What a subshell runs.
#[derive(Clone, Copy)]
pub(super) enum Body<'b> {
    /// A list (`$(…)`, `( … )`).
    List(&'b List),
    /// One command (a stage of a pipeline).
    Command(&'b Command),
}

/// A subshell's output: stdout is kept (for a substitution or the next stage
/// of a pipeline) or goes where the parent's goes; stderr goes where the
/// parent's stderr goes.
struct Capture<'p> {
    stdout: Option<Vec<u8>>,
    routes: [Route; 2],
    parent: &'p mut dyn Output,
    files: FileSystem,
}

impl Capture<'_> {
    fn write_route(&mut self, index: usize, data: &[u8]) {
        match &self.routes[index] {
            Route::Stream(target) => self.parent.write(*target, data),
            Route::Null | Route::Closed => {}
            Route::File(path) => {
                // As `Shell::emit`: a volume removed since the redirection
                // loses the output.
                let _ = self.files.write(path, data, true);
            }
        }
    }
}

impl Output for Capture<'_> {
    fn write(&mut self, stream: Stream, data: &[u8]) {
        match (stream, &mut self.stdout) {
            (Stream::Stdout, Some(kept)) => kept.extend_from_slice(data),
            (Stream::Stdout, None) => self.write_route(0, data),
            (Stream::Stderr, _) => self.write_route(1, data),
        }
    }
}

impl Shell<'_> {
    /// Runs `list` in a subshell and returns its standard output without the
    /// trailing newlines, as `sh` does.
    pub(super) async fn substitute(&mut self, list: &List) -> Result<String, Stop> {
        let (status, stdout) = self.subshell_run(Body::List(list), true, None).await?;
        self.substitution_status = Some(status);
        let mut text = String::from_utf8_lossy(&stdout).into_owned();
        text.truncate(text.trim_end_matches('\n').len());
        Ok(text)
    }

    /// Runs `body` in a subshell: its status, and its standard output when
    /// `capture` (else it goes where this shell's goes). `input` is its
    /// standard input instead of this shell's.
    ///
    /// The subshell starts from a copy of this shell's context, variables,
    /// functions, parameters, options and `$?` (so its `exit` and the
    /// variables it sets stay inside it; the files are shared) and receives no
    /// signals; its traps start reset, as a subshell's do. Meanwhile this shell
    /// still takes its own signals: SIGKILL, or a SIGTERM that ends it, drops
    /// the subshell, so a `$(sleep 1000)` never keeps a container from
    /// stopping; a trapped SIGTERM runs its handler once the command in
    /// progress finishes.
    pub(super) async fn subshell_run(
        &mut self,
        body: Body<'_>,
        capture: bool,
        input: Option<SharedInput>,
    ) -> Result<(i32, Vec<u8>), Stop> {
        let mut capture = Capture {
            stdout: capture.then(Vec::new),
            routes: self.routes.clone(),
            parent: &mut *self.output,
            files: self.context.files.clone(),
        };
        let result = {
            let mut sub = Shell::new(self.context.clone(), &mut capture, None, false);
            sub.vars = self.vars.clone();
            sub.args = self.args.clone();
            sub.functions = self.functions.clone();
            sub.errexit = self.errexit;
            sub.ash = self.ash;
            sub.umask = self.umask;
            sub.nounset = self.nounset;
            sub.conditions = self.conditions;
            sub.line = self.line;
            sub.status = self.status;
            sub.input = input.or_else(|| self.input.clone());
            sub.stdin = self.stdin.as_deref_mut();
            let run = async {
                let result = match body {
                    Body::List(list) => sub.list(list).await,
                    Body::Command(command) => sub.command(command).await,
                };
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
            Ok(code) => code,
            Err(stop) => stop.code(),
        };
        Ok((status, capture.stdout.unwrap_or_default()))
    }
}

#[cfg(test)]
mod tests;
