//! `nodeconform-agent`: the reference node agent's command line.

use clap::Parser;

/// jemalloc, because bursts of pod syncs interleave short- and long-lived allocations:
/// glibc's malloc kept ~16 MiB of free but fragmented heap resident at 1,000 pods
/// (RSS 44–50 MiB even with two arenas and `malloc_trim` every 2 s; 41–45 MiB with this).
#[cfg(feature = "jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (before `main`): freed pages go
/// back to the OS after 1 s (default 10 s), from jemalloc's own background thread.
#[cfg(feature = "jemalloc")]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: MallocConf =
    MallocConf(c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr());

/// A C string pointer jemalloc reads as `const char *malloc_conf`.
#[cfg(feature = "jemalloc")]
#[repr(transparent)]
struct MallocConf(*const std::ffi::c_char);

// SAFETY: the pointer is to a static, immutable C string.
#[cfg(feature = "jemalloc")]
unsafe impl Sync for MallocConf {}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    nodeconform_agent::cli::run(nodeconform_agent::cli::Args::parse()).await?;
    Ok(())
}
