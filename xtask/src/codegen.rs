//! `cargo xtask codegen --arch sm_90a,sm_120 [--ops FILE] [--db FILE] [--out DIR] [--check]`:
//! compiles every kernel a deployment needs (an ops manifest, see `bench/ops/example.json`,
//! and/or the tuning database rtx uses) into a bundle folder (`manifest.json` + cubins) that a
//! program loads with `rtx_synthesis::aot::Bundle::open`, so it never runs NVRTC. `--check`
//! compiles nothing and fails when the bundle in `--out` does not hold exactly what is needed.

use crate::cuda_env;
use anyhow::{bail, Context, Result};
use rtx_synthesis::aot::codegen::{self, CompileProgress, OpsManifest};
use rtx_synthesis::tuner::TuningDb;
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `cargo xtask codegen`.
#[derive(clap::Args, Debug)]
pub struct CodegenArgs {
    /// Target architectures, comma-separated (sm_70 ... sm_90a, sm_120).
    #[arg(long, default_value = "sm_90a,sm_120")]
    pub arch: String,
    /// Ops manifest (JSON, `{"format": "rtx-ops", "version": 1, "ops": [...]}`); without it the
    /// tuning database's entries for the architectures are compiled.
    #[arg(long)]
    pub ops: Option<PathBuf>,
    /// Tuning database (default: the one rtx uses, `$RTX_CACHE_DIR/tuning.db` or the platform
    /// cache folder); its tuned configs are added to manifest GEMMs too.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Bundle folder to write.
    #[arg(long, default_value = ".rtx-bundle")]
    pub out: PathBuf,
    /// Compile nothing: fail unless the bundle in --out serves exactly the planned kernels.
    #[arg(long)]
    pub check: bool,
    /// Concurrent NVRTC compiles (default: min(cores, memory / 1 GiB), or RTX_COMPILE_JOBS).
    #[arg(long)]
    pub jobs: Option<usize>,
}

/// Runs codegen.
pub fn run(a: &CodegenArgs) -> Result<()> {
    // Bad input is reported before anything else happens.
    let archs = codegen::parse_archs(&a.arch)?;
    let manifest = a.ops.as_deref().map(OpsManifest::read).transpose()?;
    if !a.check {
        // Compiling needs NVRTC; the loader reads LD_LIBRARY_PATH only at process start.
        cuda_env::reexec_with_cuda_env()?;
    }
    let db_path = match &a.db {
        Some(p) => Some(p.clone()),
        None => TuningDb::default_path().ok(),
    };
    let db = match &db_path {
        Some(p) if p.exists() => Some(
            TuningDb::open(p)
                .with_context(|| format!("reading the tuning database {}", p.display()))?,
        ),
        Some(p) if a.db.is_some() => bail!("tuning database {} does not exist", p.display()),
        _ => None,
    };
    let plan = codegen::plan(&archs, manifest.as_ref().zip(a.ops.as_deref()), db.as_ref())?;
    eprintln!(
        "codegen: {} kernel(s) for {} from {}{}",
        plan.kernels.len(),
        a.arch,
        a.ops
            .as_ref()
            .map(|p| format!("manifest {}", p.display()))
            .unwrap_or_else(|| "the tuning database".into()),
        db.as_ref()
            .map(|d| format!(" + tuning db {} ({} entries)", d.path().display(), d.len()))
            .unwrap_or_default()
    );
    for s in &plan.skipped {
        eprintln!("codegen: skipped {}: {}", s.what, s.reason);
    }
    if a.check {
        let r = codegen::check(&plan, &a.out)
            .with_context(|| format!("checking the bundle in {}", a.out.display()))?;
        for (label, entry, arch) in &r.missing {
            eprintln!("codegen --check: missing {entry} ({arch}) for {label}");
        }
        for (entry, arch) in &r.extra {
            eprintln!("codegen --check: not needed: {entry} ({arch})");
        }
        if !r.is_current() {
            bail!(
                "bundle {} is out of date ({} missing, {} not needed); run without --check",
                a.out.display(),
                r.missing.len(),
                r.extra.len()
            );
        }
        eprintln!(
            "codegen --check: {} is current ({} kernels)",
            a.out.display(),
            plan.kernels.len()
        );
        return Ok(());
    }
    let started = std::time::Instant::now();
    let progress = |p: CompileProgress<'_>| {
        let t = p
            .compile_time
            .map(|d| format!("{:.0} ms", d.as_secs_f64() * 1e3))
            .unwrap_or_else(|| "FAILED".into());
        let mut e = std::io::stderr().lock();
        let _ = writeln!(
            e,
            "[{:>3}/{}] {:<7} {} ({}) {t}",
            p.done,
            p.total,
            p.kernel.arch.sm_name(),
            p.kernel.source.entry,
            p.kernel.label
        );
    };
    let r = codegen::build(&plan, &a.out, a.jobs, &progress)?;
    let bytes: u64 = r.manifest.entries.iter().map(|e| e.bytes).sum();
    println!(
        "codegen: wrote {} with {} cubins ({:.1} MiB, NVRTC {:?}) in {:.1} s (NVRTC time {:.1} s)",
        r.dir.display(),
        r.manifest.entries.len(),
        bytes as f64 / (1 << 20) as f64,
        r.manifest.nvrtc_version.unwrap_or_default(),
        started.elapsed().as_secs_f64(),
        r.compile_time.as_secs_f64()
    );
    Ok(())
}
