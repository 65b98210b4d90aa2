//! `cargo xtask cache {ls,clear,stats}`: the kernel cache (`$RTX_CACHE_DIR`, else the platform
//! cache folder + `rtx/kernels`).

use anyhow::{Context, Result};
use rtx_synthesis::aot::KernelCache;

/// What to do with the cache.
#[derive(clap::Subcommand)]
pub enum CacheCmd {
    /// List every entry (key, entry point, template, arch, size).
    Ls,
    /// Remove every entry.
    Clear,
    /// Entries, bytes and lifetime hit/miss/corruption counters.
    Stats,
}

/// Runs one cache command.
pub fn run(cmd: &CacheCmd) -> Result<()> {
    let cache = KernelCache::open_default().context("opening the kernel cache")?;
    match cmd {
        CacheCmd::Ls => {
            let entries = cache.list()?;
            println!(
                "{:<16} {:<8} {:<10} {:<24} entry",
                "key", "arch", "bytes", "template"
            );
            for e in &entries {
                println!(
                    "{:<16} {:<8} {:<10} {:<24} {}",
                    &e.key.to_hex()[..16],
                    e.arch.sm_name(),
                    e.bytes,
                    e.template,
                    e.entry
                );
            }
            println!("{} entries in {}", entries.len(), cache.dir().display());
        }
        CacheCmd::Clear => {
            let n = cache.clear()?;
            println!("removed {n} entries from {}", cache.dir().display());
        }
        CacheCmd::Stats => {
            let s = cache.stats()?;
            println!("cache: {}", cache.dir().display());
            println!("entries: {}  bytes: {}", s.entries, s.bytes);
            println!(
                "lifetime hits: {}  misses: {}  corrupt discarded: {}  write failures: {}",
                s.hits, s.misses, s.corrupt_discarded, s.write_failures
            );
        }
    }
    Ok(())
}
