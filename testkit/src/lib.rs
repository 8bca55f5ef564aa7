//! What the project's tests need of the machine, and tests that are *ignored with the reason*
//! when the machine lacks it.
//!
//! libtest's `#[test]` cannot decide at run time that it does not apply: a test that needs a
//! program (kubectl, Chromium), a Python module (the official client, grpcio), root or a
//! built example could only print a line and return, and was shown as passed. Such tests are
//! [libtest-mimic] trials of a [`Suite`] instead (a `[[test]]` with `harness = false`):
//!
//! - each trial names its [`need`](Suite::test), checked when the binary starts, so when it
//!   lists its tests a missing need marks the trial ignored — `cargo test` and cargo-nextest
//!   (which lists before it runs) both show it ignored;
//! - [`Suite::run`] prints each ignored trial's reason (not when only listing);
//! - a trial run anyway (`--include-ignored`) ends *ignored, with the reason*, never passed.
//!
//! [libtest-mimic]: https://docs.rs/libtest-mimic

use std::future::Future;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};

use libtest_mimic::{Arguments, Completion, Trial};

/// The trials of one test binary, each with what it needs of the machine.
#[derive(Default)]
pub struct Suite {
    trials: Vec<Trial>,
    ignored: Vec<(String, String)>,
}

impl Suite {
    /// An empty suite.
    pub fn new() -> Self {
        Self::default()
    }

    /// A trial that runs `body` with what `need` found; ignored with the reason when it is
    /// `Err`. `body` asserts by panicking, as a `#[test]` does.
    pub fn test<T: Send + 'static>(
        mut self,
        name: &str,
        need: Result<T, String>,
        body: impl FnOnce(T) + Send + 'static,
    ) -> Self {
        let missing = need.as_ref().err().cloned();
        if let Some(reason) = &missing {
            self.ignored.push((name.to_string(), reason.clone()));
        }
        let trial = Trial::ignorable_test(name, move || match need {
            Ok(found) => {
                body(found);
                Ok(Completion::Completed)
            }
            Err(reason) => Ok(Completion::ignored_with(reason)),
        });
        self.trials.push(trial.with_ignored_flag(missing.is_some()));
        self
    }

    /// [`test`](Self::test) for an async body, run on a multi-threaded tokio runtime of two
    /// workers (what `#[tokio::test(flavor = "multi_thread", worker_threads = 2)]` gives).
    pub fn async_test<T, F>(
        self,
        name: &str,
        need: Result<T, String>,
        body: impl FnOnce(T) -> F + Send + 'static,
    ) -> Self
    where
        T: Send + 'static,
        F: Future<Output = ()>,
    {
        self.test(name, need, move |found| block_on(body(found)))
    }

    /// Runs the trials as libtest would (the command line's filters and flags apply) and
    /// returns the exit code; first says why each ignored trial is ignored.
    pub fn run(self) -> ExitCode {
        let args = Arguments::from_args();
        if !args.list {
            for (name, reason) in &self.ignored {
                eprintln!("note: {name} is ignored: {reason}");
            }
        }
        libtest_mimic::run(&args, self.trials).exit_code()
    }
}

/// Runs `future` to completion on a new multi-threaded runtime of two workers.
pub fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

/// A need that is always met: for the trials of a suite that need nothing of the machine.
pub fn nothing() -> Result<(), String> {
    Ok(())
}

/// The program `name` on `PATH`; `hint` says how to get it.
pub fn program(name: &str, hint: &str) -> Result<PathBuf, String> {
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
        .ok_or_else(|| format!("no {name} on PATH ({hint})"))
}

/// `python3` that imports `module`, from the PyPI package `package`.
pub fn python_module(module: &str, package: &str) -> Result<(), String> {
    let imports = std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if imports {
        Ok(())
    } else {
        Err(format!(
            "python3 with the `{package}` package not found (pip install {package})"
        ))
    }
}

/// The effective user is root.
pub fn root(why: &str) -> Result<(), String> {
    // SAFETY: geteuid(2) has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err(format!("needs root: {why}"))
    }
}
