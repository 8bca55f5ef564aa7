//! `nodeconform`: run conformance cases against a Kubernetes node agent. See the crate docs.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<std::process::ExitCode> {
    let cli = nodeconform_harness::cli::Cli::parse();
    match nodeconform_harness::cli::run(cli).await {
        Ok(code) => Ok(std::process::ExitCode::from(
            u8::try_from(code).unwrap_or(1),
        )),
        Err(e) => {
            eprintln!("error: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                eprintln!("  caused by: {s}");
                source = s.source();
            }
            Ok(std::process::ExitCode::from(2))
        }
    }
}
