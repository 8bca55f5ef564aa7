//! Signals reaching a container's main process, `trap`, and the waits
//! (`sleep`, a server's run) that signals interrupt.

use std::time::Duration;

use tokio::time::Instant;

use super::ast::List;
use super::parse;
use super::shell::{Shell, Stream};

/// A signal delivered to a container's main process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM, as sent by `StopContainer` before the timeout.
    Term,
    /// SIGKILL: ends the process at once with exit code 137.
    Kill {
        /// The kill is the kernel's OOM killer (reason `OOMKilled`).
        oom: bool,
    },
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The exit code (128 + signal number when a signal ended it).
    pub exit_code: i32,
    /// It was OOM-killed.
    pub oom_killed: bool,
}

impl Outcome {
    pub(crate) const fn exited(exit_code: i32) -> Self {
        Self {
            exit_code,
            oom_killed: false,
        }
    }
}

/// How `trap` set a signal up.
#[derive(Debug, Clone)]
pub(super) enum Trap {
    Default,
    Ignore,
    Handler(List),
}

/// Why a script stops before its end.
pub(super) enum Stop {
    /// `exit N`.
    Exit(i32),
    /// A signal ended the process.
    Signal(Outcome),
    /// `return N` from a function.
    Return(i32),
    /// `break N`: leaves N enclosing loops.
    Break(u32),
    /// `continue N`: the next iteration of the Nth enclosing loop.
    Continue(u32),
}

impl Stop {
    /// The exit status of a (sub)shell that stopped this way: `return`,
    /// `break` and `continue` outside what they leave end it as `exit` would.
    pub(super) fn code(&self) -> i32 {
        match self {
            Self::Exit(code) | Self::Return(code) => *code,
            Self::Signal(outcome) => outcome.exit_code,
            Self::Break(_) | Self::Continue(_) => 0,
        }
    }
}

/// What a signal does to a shell.
pub(super) enum Effect {
    /// It ends the shell.
    Stop(Stop),
    /// A trap runs once the command in progress finishes.
    Defer,
    /// Nothing happens.
    Ignore,
}

/// What `signal` does to a shell whose TERM trap is `term`.
pub(super) fn effect(signal: Signal, term: &Trap, pid1: bool) -> Effect {
    match signal {
        Signal::Kill { oom } => Effect::Stop(Stop::Signal(Outcome {
            exit_code: 137,
            oom_killed: oom,
        })),
        Signal::Term => match term {
            Trap::Handler(_) => Effect::Defer,
            Trap::Ignore => Effect::Ignore,
            // PID 1 has no default action for SIGTERM: the kernel drops it.
            Trap::Default if pid1 => Effect::Ignore,
            Trap::Default => Effect::Stop(Stop::Signal(Outcome::exited(143))),
        },
    }
}

impl Shell<'_> {
    /// Runs the TERM trap if a SIGTERM arrived while the last command ran:
    /// like `sh`, the trap runs only once the command in progress finished.
    pub(super) async fn run_pending_trap(&mut self) -> Result<(), Stop> {
        if !std::mem::take(&mut self.pending_term) {
            return Ok(());
        }
        if let Trap::Handler(handler) = self.term.clone() {
            let status = self.status;
            self.list(&handler).await?;
            self.status = status;
        }
        Ok(())
    }

    pub(super) fn on_signal(&mut self, signal: Signal) -> Result<(), Stop> {
        match effect(signal, &self.term, self.pid1) {
            Effect::Stop(stop) => Err(stop),
            Effect::Defer => {
                self.pending_term = true;
                Ok(())
            }
            Effect::Ignore => Ok(()),
        }
    }

    /// Waits for `duration`, handling signals that arrive meanwhile.
    pub(super) async fn sleep(&mut self, duration: Duration) -> Result<(), Stop> {
        let deadline = Instant::now().checked_add(duration);
        loop {
            let signal = match self.signals.as_deref_mut() {
                Some(signals) => {
                    let wait = async {
                        match deadline {
                            Some(deadline) => tokio::time::sleep_until(deadline).await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        () = wait => return Ok(()),
                        signal = signals.recv() => signal,
                    }
                }
                None => {
                    match deadline {
                        Some(deadline) => tokio::time::sleep_until(deadline).await,
                        None => std::future::pending().await,
                    }
                    return Ok(());
                }
            };
            match signal {
                Some(signal) => self.on_signal(signal)?,
                // Nobody can signal us any more: sleep out the rest undisturbed.
                None => self.signals = None,
            }
        }
    }

    /// A command the interpreter does not know: a well-behaved server that
    /// runs until SIGTERM and then exits 0. In an exec it succeeds at once.
    pub(super) async fn serve(&mut self) -> Result<i32, Stop> {
        let Some(signals) = self.signals.as_deref_mut() else {
            return Ok(0);
        };
        match signals.recv().await {
            Some(Signal::Term) => Ok(0),
            Some(signal @ Signal::Kill { .. }) => self.on_signal(signal).map(|()| 0),
            None => std::future::pending().await,
        }
    }

    pub(super) fn trap(&mut self, args: &[String]) -> i32 {
        let Some((action, signals)) = args.split_first() else {
            return 0;
        };
        let trap = match action.as_str() {
            "-" => Trap::Default,
            "" => Trap::Ignore,
            script => match parse(script) {
                Ok(list) => Trap::Handler(list),
                Err(error) => {
                    self.emit(Stream::Stderr, &format!("sh: trap: {error}\n"));
                    return 1;
                }
            },
        };
        for signal in signals {
            match signal.trim_start_matches("SIG") {
                "TERM" | "15" => self.term = trap.clone(),
                "EXIT" | "0" => {
                    self.on_exit = match &trap {
                        Trap::Handler(list) => Some(list.clone()),
                        Trap::Default | Trap::Ignore => None,
                    }
                }
                // Other signals are never delivered to a simulated container.
                _ => {}
            }
        }
        0
    }
}
