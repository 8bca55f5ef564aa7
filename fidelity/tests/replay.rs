//! Every fixture in `fidelity/fixtures/` replayed against a fresh API server double: one
//! test per scenario, failing with each divergence from what kube-apiserver answered.
//! A fixture whose scenario file changed since it was recorded fails too (record it again:
//! `nodeconform-fidelity record --kubeconfig … NAME`).

use libtest_mimic::{Arguments, Failed, Trial};
use nodeconform_fidelity::{Fixture, Scenario, fixtures_dir, scenarios_dir};

fn main() {
    let args = Arguments::from_args();
    let scenarios = Scenario::load_dir(&scenarios_dir()).expect("the scenarios load");
    let runtime = std::sync::Arc::new(
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime"),
    );
    let trials = scenarios
        .into_iter()
        .map(|scenario| {
            let runtime = runtime.clone();
            Trial::test(scenario.name.clone(), move || {
                runtime.block_on(replay(scenario))
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}

async fn replay(scenario: Scenario) -> Result<(), Failed> {
    let path = Fixture::path(&fixtures_dir(), &scenario.name);
    let fixture = Fixture::load(&path).map_err(|e| {
        format!("no recording of this scenario ({e}); record it against kube-apiserver")
    })?;
    if fixture.scenario != scenario {
        return Err("the scenario changed since it was recorded; record it again".into());
    }
    let (_api, target) = nodeconform_fidelity::embedded().await?;
    let divergences = nodeconform_fidelity::replay(&fixture, &target)
        .await
        .map_err(|e| e.to_string())?;
    if divergences.is_empty() {
        return Ok(());
    }
    let lines: Vec<String> = divergences.iter().map(|d| format!("  {d}")).collect();
    Err(format!(
        "{} divergences from {}:\n{}",
        divergences.len(),
        fixture.server,
        lines.join("\n")
    )
    .into())
}
