//! `nodeconform mutants`: the mutation score of the cases.
//!
//! Each mutant of the reference agent breaks one kubelet rule ([`Mutant`]). The suite runs
//! once on the reference agent as it is (the baseline) and once per mutant, each a
//! `nodeconform run` of this executable (a process is one mutant for its life); the cases
//! that failed on a mutant run once more on it, so that a case that failed by chance under
//! load is not counted. A mutant is *caught* by the cases that passed on the baseline and
//! failed on it both times; the score is the caught mutants over all.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::{Args, ValueEnum};
use futures::StreamExt as _;
use nodeconform_agent::mutants::Mutant;

use super::{Error, ExitCode, default_cases_dir};
use crate::out;
use crate::report::Outcome;
use crate::report::bundle::{self, BundleError};

/// `nodeconform mutants`.
#[derive(Debug, Args)]
pub struct MutantsArgs {
    /// Where the runs' bundles go (`DIR/baseline`, `DIR/<mutant>`, `DIR/<mutant>-again`), with
    /// their output beside them (`DIR/<run>.log`) and the score (`DIR/score.md`).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Only this mutant (repeatable; default: every one).
    #[arg(long = "mutant", value_enum, value_name = "MUTANT")]
    pub mutants: Vec<Mutant>,
    /// Cases run at once in each run (as `run --jobs`).
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Mutants whose runs go on at once (after the baseline, which runs alone).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub parallel: usize,
    /// The cases directory.
    #[arg(long, default_value_os_t = default_cases_dir())]
    pub cases: PathBuf,
    /// Only cases whose `area::name` contains any of these (as `run`).
    pub filter: Vec<String>,
}

/// What one mutant's runs showed.
struct Verdict {
    mutant: Mutant,
    /// The cases that caught it.
    caught_by: Vec<String>,
}

/// What failed on `path`, as the error of reading or writing a bundle.
fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path = path.to_path_buf();
    move |source| Error::Bundle(BundleError::Io { path, source })
}

pub(super) async fn run(args: &MutantsArgs) -> Result<ExitCode, Error> {
    std::fs::create_dir_all(&args.out).map_err(io(&args.out))?;
    let mutants: BTreeSet<Mutant> = if args.mutants.is_empty() {
        Mutant::value_variants().iter().copied().collect()
    } else {
        args.mutants.iter().copied().collect()
    };
    let baseline = passed(&run_suite(args, "baseline", &[]).await?)?;
    // The runs mostly wait on cases that hold a state for minutes, so several fit beside
    // each other; a case that fails by chance under that load is filtered out by its rerun.
    let mut verdicts: Vec<Verdict> = futures::stream::iter(mutants)
        .map(|mutant| judge(args, mutant, &baseline))
        .buffer_unordered(args.parallel.max(1))
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<Result<_, _>>()?;
    verdicts.sort_by_key(|v| v.mutant);
    let text = render(&verdicts);
    let score = args.out.join("score.md");
    std::fs::write(&score, &text).map_err(io(&score))?;
    out(&text);
    Ok(i32::from(verdicts.iter().any(|v| v.caught_by.is_empty())))
}

/// Runs the suite on `mutant`, its failed cases once more, and says which cases caught it.
async fn judge(
    args: &MutantsArgs,
    mutant: Mutant,
    baseline: &BTreeSet<String>,
) -> Result<Verdict, Error> {
    let name = name(mutant);
    let first = failed(&run_suite(args, &name, &["--mutant", &name]).await?)?;
    let again = if first.is_empty() {
        BTreeSet::new()
    } else {
        let bundle = args.out.join(&name);
        let bundle = bundle.to_string_lossy();
        let extra = ["--mutant", &name, "--rerun-failed", &bundle];
        failed(&run_suite(args, &format!("{name}-again"), &extra).await?)?
    };
    let caught_by = first
        .intersection(&again)
        .filter(|case| baseline.contains(*case))
        .cloned()
        .collect();
    Ok(Verdict { mutant, caught_by })
}

/// A mutant's name on the command line.
fn name(mutant: Mutant) -> String {
    mutant
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_else(|| format!("{mutant:?}"))
}

/// Runs `nodeconform run` with `extra` into the bundle `DIR/<label>`; returns its directory.
async fn run_suite(args: &MutantsArgs, label: &str, extra: &[&str]) -> Result<PathBuf, Error> {
    let dir = args.out.join(label);
    let log = args.out.join(format!("{label}.log"));
    let exe = std::env::current_exe().map_err(io(Path::new("/proc/self/exe")))?;
    let file = std::fs::File::create(&log).map_err(io(&log))?;
    let stderr = file.try_clone().map_err(io(&log))?;
    let mut command = tokio::process::Command::new(exe);
    command
        .arg("run")
        .arg("--cases")
        .arg(&args.cases)
        .arg("--out")
        .arg(&dir)
        .args(extra);
    if let Some(jobs) = args.jobs {
        command.arg("--jobs").arg(jobs.to_string());
    }
    // `--rerun-failed` picks its own cases.
    if !extra.contains(&"--rerun-failed") {
        command.args(&args.filter);
    }
    eprintln!("mutants: {label} (output in {})", log.display());
    // Its exit code says whether a case failed, which the bundle says too.
    command
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(stderr)
        .kill_on_drop(true)
        .status()
        .await
        .map_err(io(&log))?;
    Ok(dir)
}

fn outcomes(dir: &Path, wanted: Outcome) -> Result<BTreeSet<String>, Error> {
    Ok(bundle::read(dir)?
        .report
        .cases
        .into_iter()
        .filter(|c| c.outcome == wanted)
        .map(|c| c.name)
        .collect())
}

fn passed(dir: &Path) -> Result<BTreeSet<String>, Error> {
    outcomes(dir, Outcome::Passed)
}

fn failed(dir: &Path) -> Result<BTreeSet<String>, Error> {
    outcomes(dir, Outcome::Failed)
}

/// The score and a table of the mutants, as Markdown.
fn render(verdicts: &[Verdict]) -> String {
    let caught = verdicts.iter().filter(|v| !v.caught_by.is_empty()).count();
    let mut text = format!(
        "Mutation score: {caught} of {} mutants caught.\n\n| mutant | the rule it breaks | caught by |\n|---|---|---|\n",
        verdicts.len()
    );
    for v in verdicts {
        let rule = v
            .mutant
            .to_possible_value()
            .and_then(|p| p.get_help().map(ToString::to_string))
            .unwrap_or_default();
        let by = match v.caught_by.len() {
            0 => "**none**".to_string(),
            n => format!(
                "{n}: {}",
                v.caught_by
                    .iter()
                    .map(|c| format!("`{c}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        text.push_str(&format!("| `{}` | {rule} | {by} |\n", name(v.mutant)));
    }
    text
}
