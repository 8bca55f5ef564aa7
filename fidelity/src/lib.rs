//! Differential fidelity of the API server double: what kube-apiserver answers is the
//! specification, and divergence from it is what is tested.
//!
//! - [`scenario`]: scripted client requests (YAML in `fidelity/scenarios/`), as client-go
//!   informers, typed clients, kube-rs, kubectl and the kubelet send them.
//! - [`run`]: runs a scenario against any server ([`run::Target`]) and records every
//!   answer and watch event.
//! - [`normalize`]: replaces what two correct servers may choose differently (uids,
//!   versions, times, generated names) by what it stands for.
//! - [`fixture`]: a scenario with kube-apiserver's normalized answers, recorded once by
//!   `nodeconform-fidelity record` and kept in `fidelity/fixtures/`.
//! - [`diff`]: where two normalized transcripts differ.
//! - [`fuzz`]: random operation sequences run against two servers at once, each
//!   divergence shrunk to a minimal scenario.
//!
//! `cargo test -p nodeconform-fidelity` replays every fixture against the double (no
//! kube-apiserver needed); `nodeconform-fidelity` records, replays against any server
//! and fuzzes.

pub mod diff;
pub mod fixture;
pub mod fuzz;
pub mod normalize;
pub mod run;
pub mod scenario;

use std::path::{Path, PathBuf};

pub use diff::Divergence;
pub use fixture::Fixture;
pub use run::{Target, Transcript};
pub use scenario::Scenario;

/// `fidelity/scenarios` of this crate.
pub fn scenarios_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

/// `fidelity/fixtures` of this crate.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// A fresh namespace name for one run: `fid-` and eight random letters and digits.
pub fn fresh_namespace() -> String {
    use rand::RngExt;
    const CHARS: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    let suffix: String = (0..8)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())] as char)
        .collect();
    format!("fid-{suffix}")
}

/// Runs `scenario` against `target` and returns its normalized records.
pub async fn record(scenario: &Scenario, target: &Target) -> Result<Vec<run::Record>, run::Error> {
    let transcript = run::run(scenario, target, &fresh_namespace(), None).await?;
    Ok(normalize::normalize(&transcript))
}

/// Replays a fixture against `target`: every divergence from the recording.
pub async fn replay(fixture: &Fixture, target: &Target) -> Result<Vec<Divergence>, run::Error> {
    let transcript = run::run(
        &fixture.scenario,
        target,
        &fresh_namespace(),
        Some(&fixture.records),
    )
    .await?;
    let actual = normalize::normalize(&transcript);
    Ok(diff::diff(&fixture.scenario, &fixture.records, &actual))
}

/// A fresh API server double on 127.0.0.1, as the embedded backend starts it, answering
/// as Kubernetes 1.28: the release the fixtures were recorded from.
pub async fn embedded() -> Result<(nodeconform_apiserver::ApiServer, Target), String> {
    let api = nodeconform_apiserver::ApiServer::builder()
        .emulate_version(nodeconform_apiserver::Version::V1_28)
        .start()
        .await
        .map_err(|e| format!("starting the API server double: {e}"))?;
    let target = Target::from_client(api.client(), format!("API server double at {}", api.url()));
    Ok((api, target))
}
