//! Compound commands: loops, `if`, `case`, groups, subshells, function
//! definitions, redirected compound commands, and pipelines.
//!
//! A pipeline's stages run one after another, each in a subshell, the
//! standard output of one kept in memory as the standard input of the next;
//! its status is the last stage's. That is `sh`'s result for stages that end;
//! a stage that never ends (`yes | head -1`) never lets the next one start.

use tokio::time::Instant;

use super::ast::Command;
use super::redirect::input;
use super::shell::{Shell, Stream};
use super::signals::Stop;
use super::subst::Body;

/// What a loop does after a `break` or `continue` of its body.
enum Flow {
    Next,
    Leave,
}

impl Shell<'_> {
    /// Runs a compound command (anything but a simple command).
    pub(super) async fn compound(&mut self, command: &Command) -> Result<i32, Stop> {
        match command {
            Command::Simple(_) => self.command(command).await,
            Command::Group(list) => self.list(list).await,
            Command::Subshell(list) => {
                Ok(self.subshell_run(Body::List(list), false, None).await?.0)
            }
            Command::Function { name, body } => {
                self.functions.insert(name.clone(), body.clone());
                Ok(0)
            }
            Command::Redirected(inner, redirects) => {
                let saved = self.save_redirections();
                let result = match self.redirect(redirects).await? {
                    Ok(()) => self.command(inner).await,
                    Err(message) => {
                        self.restore_redirections(saved.clone());
                        self.emit(Stream::Stderr, &format!("{message}\n"));
                        Ok(1)
                    }
                };
                self.restore_redirections(saved);
                result
            }
            Command::If {
                branches,
                otherwise,
            } => {
                let mut taken = None;
                for (condition, body) in branches {
                    if self.condition(condition).await? == 0 {
                        taken = Some(body);
                        break;
                    }
                }
                match taken.or(otherwise.as_ref()) {
                    Some(body) => self.list(body).await,
                    None => Ok(0),
                }
            }
            Command::While {
                until,
                condition,
                body,
            } => {
                let mut status = 0;
                self.loops += 1;
                let result = async {
                    loop {
                        let started = Instant::now();
                        let holds = self.condition(condition).await? == 0;
                        if holds == *until {
                            break;
                        }
                        if let Flow::Leave = self.iterate(body, &mut status, started).await? {
                            break;
                        }
                    }
                    Ok(status)
                }
                .await;
                self.loops -= 1;
                result
            }
            Command::For { name, values, body } => {
                let values = match values {
                    Some(words) => {
                        let mut values = Vec::new();
                        for word in words {
                            values.extend(self.expand_fields(word).await?);
                        }
                        values
                    }
                    None => self.args[1..].to_vec(),
                };
                let mut status = 0;
                self.loops += 1;
                let result = async {
                    for value in values {
                        let started = Instant::now();
                        self.assign(name, value);
                        if let Flow::Leave = self.iterate(body, &mut status, started).await? {
                            break;
                        }
                    }
                    Ok(status)
                }
                .await;
                self.loops -= 1;
                result
            }
            Command::Case { word, arms } => {
                let subject = self.expand(word).await?;
                for (patterns, body) in arms {
                    for pattern in patterns {
                        let pattern = self.expand_pattern(pattern).await?;
                        if super::pattern::matches(&pattern, &subject) {
                            return self.list(body).await;
                        }
                    }
                }
                Ok(0)
            }
        }
    }

    /// Runs a loop's body once (begun at `started`), keeping its status in `status`,
    /// and says whether the loop goes on: `break N` and `continue N` count down through
    /// the enclosing loops. An iteration that goes on takes at least the interpreter's
    /// minimum (`pace`).
    async fn iterate(
        &mut self,
        body: &super::ast::List,
        status: &mut i32,
        started: Instant,
    ) -> Result<Flow, Stop> {
        let result = self.list(body).await;
        let flow = Self::flow(result, status)?;
        if let Flow::Next = flow {
            self.pace(started).await?;
        }
        Ok(flow)
    }

    /// What a loop does with its body's result.
    fn flow(result: Result<i32, Stop>, status: &mut i32) -> Result<Flow, Stop> {
        match result {
            Ok(code) => {
                *status = code;
                Ok(Flow::Next)
            }
            Err(Stop::Break(n)) => {
                *status = 0;
                if n > 1 {
                    Err(Stop::Break(n - 1))
                } else {
                    Ok(Flow::Leave)
                }
            }
            Err(Stop::Continue(n)) => {
                *status = 0;
                if n > 1 {
                    Err(Stop::Continue(n - 1))
                } else {
                    Ok(Flow::Next)
                }
            }
            Err(stop) => Err(stop),
        }
    }

    /// Runs a pipeline of two or more stages.
    pub(super) async fn pipe(&mut self, commands: &[Command]) -> Result<i32, Stop> {
        let mut piped = None;
        let mut status = 0;
        for (index, command) in commands.iter().enumerate() {
            let last = index + 1 == commands.len();
            let (code, stdout) = self
                .subshell_run(Body::Command(command), !last, piped.take())
                .await?;
            status = code;
            if !last {
                piped = Some(input(stdout));
            }
        }
        Ok(status)
    }
}
