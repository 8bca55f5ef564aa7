//! `nodeconform-fidelity`: record scenarios against kube-apiserver, replay fixtures
//! against any server, fuzz two servers with random operation sequences.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};

use nodeconform_fidelity::{Fixture, Scenario, Target, fixtures_dir, fuzz, scenarios_dir};

#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs scenarios against the reference server (kube-apiserver) twice and writes
    /// their fixtures; a scenario whose two runs differ after normalizing is not written.
    Record {
        /// The reference server's kubeconfig.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Where the scenarios are.
        #[arg(long, default_value_os_t = scenarios_dir())]
        scenarios: PathBuf,
        /// Where the fixtures go.
        #[arg(long, default_value_os_t = fixtures_dir())]
        fixtures: PathBuf,
        /// Only these scenarios (default: all).
        names: Vec<String>,
    },
    /// Replays fixtures against a server (default: a fresh API server double for each).
    Replay {
        /// The server's kubeconfig.
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Where the fixtures are.
        #[arg(long, default_value_os_t = fixtures_dir())]
        fixtures: PathBuf,
        /// Only these fixtures (default: all).
        names: Vec<String>,
    },
    /// Runs random operation sequences against the reference and another server
    /// (default: a fresh API server double) and shrinks each divergent one.
    Fuzz {
        /// The reference server's kubeconfig.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// The other server's kubeconfig (default: the API server double).
        #[arg(long)]
        against: Option<PathBuf>,
        /// The first seed; sequence n uses seed + n.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// How many sequences.
        #[arg(long, default_value_t = 100)]
        sequences: u64,
        /// Operations per sequence.
        #[arg(long, default_value_t = 30)]
        operations: usize,
        /// Where shrunk divergent sequences are written as scenarios.
        #[arg(long, default_value = "fuzz-out")]
        out: PathBuf,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            // kube's client logs every error answer, which here are expected records.
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,kube_client=off".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Record {
            kubeconfig,
            scenarios,
            fixtures,
            names,
        } => record(&kubeconfig, &scenarios, &fixtures, &names).await,
        Command::Replay {
            kubeconfig,
            fixtures,
            names,
        } => replay(kubeconfig.as_deref(), &fixtures, &names).await,
        Command::Fuzz {
            kubeconfig,
            against,
            seed,
            sequences,
            operations,
            out,
        } => {
            // Both servers are on this machine: events arrive within milliseconds.
            let quiet = std::time::Duration::from_millis(120);
            let reference = Target::from_kubeconfig(&kubeconfig)
                .await?
                .with_quiet(quiet);
            let (_double, other) = match against {
                Some(path) => (None, Target::from_kubeconfig(&path).await?),
                None => {
                    let (api, target) = nodeconform_fidelity::embedded()
                        .await
                        .map_err(anyhow::Error::msg)?;
                    (Some(api), target)
                }
            };
            let other = other.with_quiet(quiet);
            run_fuzz(&reference, &other, seed, sequences, operations, &out).await
        }
    }
}

fn selected<'a>(all: &'a [Scenario], names: &[String]) -> anyhow::Result<Vec<&'a Scenario>> {
    for name in names {
        if !all.iter().any(|s| &s.name == name) {
            bail!("no scenario named {name}");
        }
    }
    Ok(all
        .iter()
        .filter(|s| names.is_empty() || names.contains(&s.name))
        .collect())
}

async fn record(
    kubeconfig: &std::path::Path,
    scenarios: &std::path::Path,
    fixtures: &std::path::Path,
    names: &[String],
) -> anyhow::Result<()> {
    let target = Target::from_kubeconfig(kubeconfig).await?;
    let all = Scenario::load_dir(scenarios)?;
    let mut unstable = 0;
    let mut requests = 0;
    let chosen = selected(&all, names)?;
    for scenario in &chosen {
        let first = nodeconform_fidelity::record(scenario, &target).await?;
        let second = nodeconform_fidelity::record(scenario, &target).await?;
        let differences = nodeconform_fidelity::diff::diff(scenario, &first, &second);
        if !differences.is_empty() {
            unstable += 1;
            println!(
                "UNSTABLE {}: two runs differ after normalizing:",
                scenario.name
            );
            for d in differences.iter().take(10) {
                println!("  {d}");
            }
            continue;
        }
        requests += scenario.requests();
        let fixture = Fixture {
            server: target.name.clone(),
            scenario: (*scenario).clone(),
            records: first,
        };
        fixture.save(&Fixture::path(fixtures, &scenario.name))?;
        println!(
            "recorded {} ({} requests)",
            scenario.name,
            scenario.requests()
        );
    }
    println!(
        "{} scenarios recorded ({requests} requests) against {}; {unstable} unstable",
        chosen.len() - unstable,
        target.name
    );
    if unstable > 0 {
        bail!("{unstable} scenarios were not stable");
    }
    Ok(())
}

async fn replay(
    kubeconfig: Option<&std::path::Path>,
    dir: &std::path::Path,
    names: &[String],
) -> anyhow::Result<()> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let remote = match kubeconfig {
        Some(path) => Some(Target::from_kubeconfig(path).await?),
        None => None,
    };
    let (mut diverged, mut total) = (0, 0);
    for path in paths {
        let fixture = Fixture::load(&path)?;
        if !names.is_empty() && !names.contains(&fixture.scenario.name) {
            continue;
        }
        total += 1;
        let (_api, target) = match &remote {
            Some(t) => (None, t.clone()),
            None => {
                let (api, t) = nodeconform_fidelity::embedded()
                    .await
                    .map_err(anyhow::Error::msg)?;
                (Some(api), t)
            }
        };
        let divergences = nodeconform_fidelity::replay(&fixture, &target).await?;
        if divergences.is_empty() {
            println!("ok {}", fixture.scenario.name);
        } else {
            diverged += 1;
            println!(
                "DIVERGED {} ({} places):",
                fixture.scenario.name,
                divergences.len()
            );
            for d in &divergences {
                println!("  {d}");
            }
        }
    }
    println!("{total} fixtures replayed, {diverged} diverged");
    if diverged > 0 {
        bail!("{diverged} fixtures diverged");
    }
    Ok(())
}

async fn run_fuzz(
    reference: &Target,
    other: &Target,
    seed: u64,
    sequences: u64,
    operations: usize,
    out: &std::path::Path,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let (mut ran, mut requests, mut diverged) = (0, 0, 0);
    let mut seen = std::collections::BTreeSet::new();
    for n in 0..sequences {
        let seed = seed + n;
        let Some(outcome) = fuzz::sequence(seed, operations, reference, other).await else {
            println!("seed {seed}: could not run");
            continue;
        };
        ran += 1;
        requests += outcome.requests * 2;
        if outcome.divergences.is_empty() {
            continue;
        }
        diverged += 1;
        let (small, divergences) = fuzz::shrink(&outcome.scenario, reference, other).await;
        let first = divergences
            .first()
            .map(|d| format!("{} at {}", d.request, d.path));
        let key = first.clone().unwrap_or_default();
        let new = seen.insert(key.clone());
        println!(
            "seed {seed}: diverged; shrunk to {} steps; first: {}{}",
            small.steps.len(),
            first.unwrap_or_default(),
            if new { "" } else { " (seen before)" }
        );
        if new {
            let mut small = small;
            small.description = format!(
                "Found by `nodeconform-fidelity fuzz --seed {seed} --sequences 1 --operations {operations}`, shrunk.\n{}",
                divergences
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            let path = out.join(format!("fuzz-{seed}.yaml"));
            std::fs::write(&path, serde_yaml::to_string(&small)?)?;
        }
    }
    println!(
        "{ran} sequences, {requests} requests ({} per server), {diverged} diverged, {} distinct first divergences",
        requests / 2,
        seen.len()
    );
    Ok(())
}
