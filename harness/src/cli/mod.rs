//! The `nodeconform` command line: `run` ([`run`]), `up`, `list`, `check`, `matrix`.

#[cfg(feature = "mutants")]
mod mutants;
mod run;

use std::io::Write as _;
use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};

use crate::backend::BackendKind;
use crate::case;
use crate::out;
use crate::report::Format;
use crate::runner::Selection;

/// Conformance cases for Kubernetes node agents.
#[derive(Debug, Parser)]
#[command(name = "nodeconform", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the cases against a cluster and an agent.
    Run(Box<RunArgs>),
    /// Start a cluster for kubectl (the API server double, and fake-cri and an agent per
    /// node), or join nodes to an existing one; runs until Ctrl-C.
    Up(UpArgs),
    /// List the cases (`area::name`, tags, requirements).
    List(ListArgs),
    /// Validate case files; print every error with file:line:column.
    Check(CheckArgs),
    /// The compatibility matrix of result bundles (`run --out`), as Markdown or one HTML page.
    Matrix(MatrixArgs),
    /// The cases whose outcome differs between result bundles (the same agent on fake-cri
    /// and on containerd, two agents, two releases), as a Markdown table; exits 1 when any
    /// does, as diff(1).
    Diff(DiffArgs),
    /// Build the cases' test images from Debian's packages into a directory of image
    /// archives, for `run --runtime containerd --images DIR`.
    Images(ImagesArgs),
    /// Run the reference agent for one node, as `nodeconform-agent` does (a node on a real
    /// runtime runs it this way, as a process in the node's namespaces).
    #[cfg(feature = "reference-agent")]
    Agent(Box<nodeconform_agent::cli::Args>),
    /// The mutation score: the suite against the reference agent with each kubelet rule
    /// broken on purpose, and which cases catch each (only with the `mutants` feature).
    #[cfg(feature = "mutants")]
    Mutants(mutants::MutantsArgs),
}

/// `nodeconform images`.
#[derive(Debug, Args)]
pub struct ImagesArgs {
    /// The directory the archives are written to (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// A static busybox (Debian's busybox-static).
    #[arg(long, value_name = "PATH", default_value = "/bin/busybox")]
    pub busybox: PathBuf,
    /// A static agnhost binary built outside nodeconform (from the Kubernetes tree's
    /// `test/images/agnhost`); without it there is no agnhost image.
    #[arg(long, value_name = "PATH", env = "NODECONFORM_AGNHOST")]
    pub agnhost: Option<PathBuf>,
    /// Programs of Debian's packages the agnhost image carries with their libraries, as
    /// upstream's image has them (only with --agnhost).
    #[arg(long, value_name = "PATH", value_delimiter = ',', default_values_t = crate::images::AGNHOST_PROGRAMS.map(String::from))]
    pub agnhost_programs: Vec<String>,
    /// Debian's nginx binary, for the nginx image (its MIME types from
    /// `/etc/nginx/mime.types`); by default `/usr/sbin/nginx` when Debian's `nginx` is
    /// installed, else there is no nginx image.
    #[arg(long, value_name = "PATH")]
    pub nginx: Option<PathBuf>,
}

/// The matrix's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum MatrixFormat {
    /// Markdown tables.
    Markdown,
    /// One HTML page, nothing fetched.
    Html,
}

/// `nodeconform matrix`.
#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// The cases directory, whose `features.yaml` orders and describes the rows.
    #[arg(long, default_value_os_t = default_cases_dir())]
    pub cases: PathBuf,
    /// Write the matrix to this file instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Markdown (for READMEs) or one self-contained HTML page, with the failing
    /// cases' pod states drawn.
    #[arg(long, value_enum, default_value_t = MatrixFormat::Markdown)]
    pub format: MatrixFormat,
    /// Result bundles, one column each, in this order.
    #[arg(required = true, value_name = "BUNDLE")]
    pub bundles: Vec<PathBuf>,
}

/// `nodeconform diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// List every case, not only those whose outcomes differ.
    #[arg(long)]
    pub all: bool,
    /// Result bundles (`run --out`), one column each, in this order.
    #[arg(required = true, num_args = 2.., value_name = "BUNDLE")]
    pub bundles: Vec<PathBuf>,
}

/// `nodeconform run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Where the API server comes from.
    #[arg(long, value_enum, default_value_t = BackendKind::Embedded)]
    pub backend: BackendKind,
    /// Kubeconfig of an existing cluster (`--backend kubeconfig`; default $KUBECONFIG or ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The Kubernetes release the embedded API server double answers as: 1.28 or 1.36
    /// (default: the newest).
    #[arg(long, value_name = "VERSION")]
    pub emulate_version: Option<String>,
    /// Context in the kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// Start this agent per case: `{kubeconfig} {node} {cri_endpoint} {root_dir}` are filled in (no shell).
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "node")]
    pub agent_cmd: Option<String>,
    /// Run an upstream kubelet binary per case on fake-cri, configured by the harness
    /// (its own ports, root directory and `KubeletConfiguration`; needs root).
    #[arg(long, value_name = "PATH", conflicts_with_all = ["node", "agent_cmd"])]
    pub kubelet: Option<PathBuf>,
    /// Use this already running node (e.g. `kind-control-plane`); cases that need runtime control are ignored.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// The container runtime under the agents the harness starts: fake-cri, or a containerd of
    /// each node's own with real containers (needs root and Debian's containerd, runc and
    /// containernetworking-plugins; the agent and containerd run in the node's namespaces).
    #[arg(long, value_enum, default_value_t = crate::backend::runtime::RuntimeKind::FakeCri,
          conflicts_with_all = ["node", "all_nodes", "node_selector"])]
    pub runtime: crate::backend::runtime::RuntimeKind,
    /// Image archives loaded into each node's containerd (written by `nodeconform images`);
    /// a case whose images are not among them is ignored.
    #[arg(long, value_name = "DIR")]
    pub images: Option<PathBuf>,
    /// Run on every Ready node of the cluster: nodes that report the same kubelet and
    /// runtime versions form a group, each group runs the cases (spread over its nodes,
    /// `--jobs` on each) beside the others and has its own report (`--out DIR/<group>`).
    #[arg(long, conflicts_with_all = ["node", "agent_cmd", "kubelet", "reference_agent"])]
    pub all_nodes: bool,
    /// As `--all-nodes`, on the nodes that match this label selector.
    #[arg(long, value_name = "SELECTOR", conflicts_with_all = ["node", "agent_cmd", "kubelet", "reference_agent"])]
    pub node_selector: Option<String>,
    /// Join the reference agent even where the backend brings its own node (kind).
    #[arg(long, conflicts_with_all = ["node", "agent_cmd", "kubelet"])]
    pub reference_agent: bool,
    /// Cases run at once (default: twelve per core with the in-process reference agent, four
    /// per core when every case starts an agent process; cases mostly wait on the agent); on
    /// each node with `--all-nodes`.
    #[arg(long, short)]
    pub jobs: Option<usize>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Human)]
    pub format: Format,
    /// Only cases with this tag (repeatable: all must match).
    #[arg(long = "tag", value_name = "TAG")]
    pub tags: Vec<String>,
    /// Leave out cases whose name contains this (repeatable).
    #[arg(long, value_name = "SUBSTRING")]
    pub skip: Vec<String>,
    /// The cases directory.
    #[arg(long, default_value_os_t = default_cases_dir())]
    pub cases: PathBuf,
    /// Run every selected case even when the start gate (the case tagged `gate`,
    /// `pods::runs-a-pod`: can the agent run a pod at all?) fails; by default the
    /// others are then reported as not run.
    #[arg(long)]
    pub no_gate: bool,
    /// Also write the results as a bundle into this directory: `agent.yaml`,
    /// `results.json`, `junit.xml`, `log.txt` (what `nodeconform matrix` reads).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// The agent's name in the bundle (default: `kubelet`, the agent command's
    /// program, `nodeconform reference agent`).
    #[arg(long, value_name = "NAME")]
    pub agent_name: Option<String>,
    /// The agent's version in the bundle (default: the nodes' `kubeletVersion`).
    #[arg(long, value_name = "VERSION")]
    pub agent_version: Option<String>,
    /// Features the agent does not support (`unsupported: [{feature, reason}]`): a
    /// case that fails on one is reported as unsupported, not failed.
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Run only the cases that failed in this bundle (`--out` of an earlier run).
    #[arg(long, value_name = "DIR", conflicts_with = "filter")]
    pub rerun_failed: Option<PathBuf>,
    /// The reference agent with this kubelet rule broken on purpose (see `nodeconform
    /// mutants`); only in builds with the `mutants` feature.
    #[cfg(feature = "mutants")]
    #[arg(long, value_enum, value_name = "MUTANT", conflicts_with_all = ["agent_cmd", "kubelet", "node", "all_nodes", "node_selector", "runtime"])]
    pub mutant: Option<nodeconform_agent::mutants::Mutant>,
    /// Run cases whose `area::name` contains any of these.
    pub filter: Vec<String>,
}

impl RunArgs {
    /// Whether the run goes to the cluster's nodes (`--all-nodes`, `--node-selector`).
    fn on_all_nodes(&self) -> bool {
        self.all_nodes || self.node_selector.is_some()
    }
}

/// `nodeconform up`.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// The node's name; with `--nodes`, the prefix of their names (`<node>-1`, …).
    #[arg(long, default_value = crate::up::DEFAULT_NODE)]
    pub node: String,
    /// How many nodes, each its own fake-cri and agent (the API server double's
    /// scheduler binds pods without `nodeName` to the first).
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub nodes: u16,
    /// Start no API server: the nodes join the cluster this kubeconfig reaches (another
    /// `nodeconform up`, a kube-apiserver), which then has nodes of several agents.
    #[arg(long, value_name = "KUBECONFIG", conflicts_with_all = ["port", "emulate_version"])]
    pub join: Option<PathBuf>,
    /// Where the kubeconfig, sockets and the agent's root go (created 0700 if missing;
    /// default: a fresh private directory under the temporary directory, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// The API server's port on 127.0.0.1 (default: a free one).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// Run an upstream kubelet on fake-cri instead of the reference agent (needs root).
    #[arg(long, value_name = "PATH")]
    pub kubelet: Option<PathBuf>,
    /// Run this agent instead of the reference agent: `{kubeconfig} {node} {cri_endpoint}
    /// {root_dir}` are filled in (no shell); its output goes to stderr.
    #[arg(long, value_name = "TEMPLATE", conflicts_with = "kubelet")]
    pub agent_cmd: Option<String>,
    /// Give the reference agent the shortened test timings (300 ms crash back-off, …)
    /// instead of upstream's.
    #[arg(long, conflicts_with_all = ["kubelet", "agent_cmd"])]
    pub fast: bool,
    /// Seconds the node has to become Ready.
    #[arg(long, value_name = "SECONDS", default_value_t = crate::up::READY_TIMEOUT.as_secs())]
    pub ready_timeout: u64,
    /// The Kubernetes release the API server double answers as: 1.28 or 1.36 (default: the
    /// newest).
    #[arg(long, value_name = "VERSION")]
    pub emulate_version: Option<String>,
}

/// `nodeconform list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// The cases directory.
    #[arg(long, default_value_os_t = default_cases_dir())]
    pub cases: PathBuf,
    /// Only cases whose `area::name` contains any of these.
    pub filter: Vec<String>,
}

/// `nodeconform check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The cases directory (when no files are given).
    #[arg(long, default_value_os_t = default_cases_dir())]
    pub cases: PathBuf,
    /// Case files to check instead of the whole directory.
    pub files: Vec<PathBuf>,
}

/// `./cases` if it exists, else the repository's `cases/` next to this crate.
pub fn default_cases_dir() -> PathBuf {
    let local = PathBuf::from("cases");
    if local.is_dir() {
        return local;
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cases");
    if repo.is_dir() { repo } else { local }
}

/// What went wrong at the top level.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Case files are broken (each error was printed).
    #[error("{count} broken case file{}", if *count == 1 { "" } else { "s" })]
    BrokenCases {
        /// How many errors.
        count: usize,
    },
    /// No case matched the filters.
    #[error("no case matches the filters")]
    NothingSelected,
    /// `--kubelet` does not name a program.
    #[error("--kubelet {}: {reason}", path.display())]
    Kubelet {
        /// The path given.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The backend or agent could not start.
    #[error(transparent)]
    Backend(#[from] crate::backend::Error),
    /// `nodeconform up` failed.
    #[error(transparent)]
    Up(#[from] crate::up::Error),
    /// The containerd runtime cannot be used.
    #[error("--runtime containerd")]
    Runtime {
        /// Why.
        #[source]
        source: crate::backend::containerd::Error,
    },
    /// The reference agent stopped with an error.
    #[cfg(feature = "reference-agent")]
    #[error("the reference agent")]
    Agent(#[from] nodeconform_agent::cli::Error),
    /// The test images could not be built.
    #[error("building the test images")]
    Images(#[from] crate::images::Error),
    /// A result bundle could not be written or read.
    #[error(transparent)]
    Bundle(#[from] crate::report::bundle::BundleError),
    /// The feature taxonomy or a profile is broken.
    #[error(transparent)]
    File(#[from] crate::case::features::FileError),
    /// `--all-nodes` found no node to run on.
    #[error("no Ready node to run on{}", selector.as_deref().map(|s| format!(" among the nodes matching {s:?}")).unwrap_or_default())]
    NoNodes {
        /// The `--node-selector`, if one was given.
        selector: Option<String>,
    },
    /// `--all-nodes` on the embedded backend, whose nodes the harness makes per case.
    #[error(
        "--all-nodes and --node-selector run on the nodes of an existing cluster (--backend kubeconfig or kind)"
    )]
    AllNodesEmbedded,
    /// `--format json|junit` with several node groups: one document cannot hold their reports.
    #[error(
        "the cluster's nodes form {groups} groups: --format json and junit print one report; use --out DIR for one bundle per group (results.json, junit.xml)"
    )]
    SeveralGroupsOneFormat {
        /// How many groups.
        groups: usize,
    },
    /// `--emulate-version` with a backend that brings its own API server.
    #[error(
        "--emulate-version applies to the embedded backend only (the {backend} backend's API server has its own version)"
    )]
    EmulateVersion {
        /// The backend chosen.
        backend: &'static str,
    },
}

/// Exit code: 0 all passed, 1 a case failed, 130 interrupted.
pub type ExitCode = i32;

fn load(dir: &Path) -> Result<case::Loaded, Error> {
    let loaded = case::load_dir(dir);
    if !loaded.errors.is_empty() {
        for e in &loaded.errors {
            eprintln!("error: {e}");
        }
        return Err(Error::BrokenCases {
            count: loaded.errors.len(),
        });
    }
    Ok(loaded)
}

/// Runs a parsed command line.
pub async fn run(cli: Cli) -> Result<ExitCode, Error> {
    match cli.command {
        Command::Check(args) => check(&args),
        Command::List(args) => {
            let cases = load(&args.cases)?.cases;
            let selection = Selection {
                filters: args.filter,
                ..Default::default()
            };
            let mut text = String::new();
            for c in cases.iter().filter(|c| selection.matches(c)) {
                let mut extra = Vec::new();
                if !c.case.tags.is_empty() {
                    extra.push(format!(
                        "tags: {}",
                        c.case.tags.iter().cloned().collect::<Vec<_>>().join(",")
                    ));
                }
                if !c.case.requires.is_empty() {
                    extra.push(format!(
                        "requires: {}",
                        c.case
                            .requires
                            .iter()
                            .map(|r| r.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    ));
                }
                let first = c.case.description.lines().next().unwrap_or_default();
                text.push_str(&format!("{}  [{}]\n    {first}\n", c.id, extra.join("; ")));
            }
            out(&text);
            Ok(0)
        }
        Command::Matrix(args) => matrix(&args),
        Command::Diff(args) => {
            let bundles = args
                .bundles
                .iter()
                .map(|dir| crate::report::bundle::read(dir))
                .collect::<Result<Vec<_>, _>>()?;
            let (text, differing) = crate::report::compare::render(&bundles, args.all);
            out(&text);
            Ok(u8::from(differing > 0).into())
        }
        #[cfg(feature = "reference-agent")]
        Command::Agent(args) => {
            crate::logs::init_stderr();
            nodeconform_agent::cli::run(*args).await?;
            Ok(0)
        }
        Command::Images(args) => {
            let sources = crate::images::Sources {
                busybox: args.busybox,
                agnhost: args.agnhost,
                agnhost_programs: args.agnhost_programs.iter().map(PathBuf::from).collect(),
                nginx: match args.nginx {
                    Some(binary) => Some(crate::images::nginx::Files::with_binary(binary)),
                    None => crate::images::nginx::Files::debian(),
                },
            };
            let mut out = std::io::stdout().lock();
            for built in crate::images::build(&args.out, &sources)? {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}",
                    built.file.display(),
                    &built.id["sha256:".len()..][..12],
                    built.tags.join(" ")
                );
            }
            Ok(0)
        }
        Command::Run(args) => run::run_cases(*args).await,
        #[cfg(feature = "mutants")]
        Command::Mutants(args) => mutants::run(&args).await,
        Command::Up(args) => up(args).await,
    }
}

fn matrix(args: &MatrixArgs) -> Result<ExitCode, Error> {
    let taxonomy = crate::case::features::Taxonomy::load(&args.cases)?.unwrap_or_default();
    let bundles = args
        .bundles
        .iter()
        .map(|dir| crate::report::bundle::read(dir))
        .collect::<Result<Vec<_>, _>>()?;
    let matrix = crate::matrix::build(&taxonomy, &bundles);
    let text = match args.format {
        MatrixFormat::Markdown => crate::matrix::markdown::render(&matrix),
        MatrixFormat::Html => crate::matrix::html::render(&matrix, &bundles),
    };
    match &args.out {
        Some(path) => {
            std::fs::write(path, text).map_err(|source| crate::report::bundle::BundleError::Io {
                path: path.clone(),
                source,
            })?
        }
        None => out(&text),
    }
    Ok(0)
}

async fn up(args: UpArgs) -> Result<ExitCode, Error> {
    use crate::up::{Agent, Options};
    let agent = if let Some(kubelet) = args.kubelet {
        crate::backend::kubelet::check_binary(&kubelet).map_err(|reason| Error::Kubelet {
            path: kubelet.clone(),
            reason,
        })?;
        Agent::Kubelet(kubelet)
    } else if let Some(template) = args.agent_cmd {
        Agent::Command(template)
    } else {
        Agent::Reference
    };
    // The in-process agent and the API server double log to stderr (`RUST_LOG`, default warn).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let options = Options {
        node: args.node,
        nodes: usize::from(args.nodes),
        join: args.join,
        dir: args.dir,
        port: args.port,
        agent,
        fast: args.fast,
        ready_timeout: std::time::Duration::from_secs(args.ready_timeout),
        emulate_version: args.emulate_version.clone(),
    };
    crate::up::serve(&options).await?;
    Ok(0)
}

fn check(args: &CheckArgs) -> Result<ExitCode, Error> {
    let mut errors = Vec::new();
    let mut ok = 0usize;
    if args.files.is_empty() {
        let loaded = case::load_dir(&args.cases);
        ok = loaded.cases.len();
        errors = loaded.errors;
    } else {
        for f in &args.files {
            // A directory is a cases directory (`nodeconform check cases`).
            if f.is_dir() {
                let loaded = case::load_dir(f);
                ok += loaded.cases.len();
                errors.extend(loaded.errors);
                continue;
            }
            match case::load_file(f) {
                Ok(_) => ok += 1,
                Err(e) => errors.extend(e),
            }
        }
    }
    for e in &errors {
        eprintln!("error: {}", crate::error_chain(e));
    }
    if errors.is_empty() {
        out(&format!("{ok} case{} OK\n", if ok == 1 { "" } else { "s" }));
        Ok(0)
    } else {
        Err(Error::BrokenCases {
            count: errors.len(),
        })
    }
}
