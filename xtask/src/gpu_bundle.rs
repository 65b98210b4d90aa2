//! `cargo xtask gpu-bundle`: release test binaries + the bench binary in one folder that runs on
//! a GPU machine with no cargo (`run.sh` inside runs them all).

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RUN_SH: &str = include_str!("gpu_bundle_run.sh");

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(crate::root())
        // A stripped, self-contained build of its own, so the bundle stays small enough to carry.
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_TARGET_DIR", crate::root().join("target/gpu-bundle"));
    c
}

/// Executables cargo reported in its JSON messages (test harnesses, or the named binary).
fn executables(json: &str, tests: bool) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for line in json.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else { continue };
        if v["profile"]["test"].as_bool() != Some(tests) {
            continue;
        }
        let kind = v["target"]["kind"][0].as_str().unwrap_or("bin");
        let name = v["target"]["name"].as_str().unwrap_or("unknown").replace('-', "_");
        let pkg = v["package_id"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("").split(['#', '@']).next().unwrap_or("").replace('-', "_");
        let label = if tests { format!("{pkg}__{kind}__{name}") } else { name };
        out.push((label, PathBuf::from(exe)));
    }
    out
}

fn build(args: &[&str], tests: bool) -> Result<Vec<(String, PathBuf)>> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let o = cargo().args(args).args(["--message-format=json"]).stderr(Stdio::inherit()).output().context("running cargo")?;
    if !o.status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    Ok(executables(&String::from_utf8_lossy(&o.stdout), tests))
}

fn copy_exe(src: &Path, dst: &Path) -> Result<()> {
    std::fs::copy(src, dst).with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    Ok(())
}

/// Builds everything into `out`.
pub fn run(out: &Path) -> Result<()> {
    let out = if out.is_absolute() { out.to_path_buf() } else { crate::root().join(out) };
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("tests"))?;
    let tests = build(&["test", "--workspace", "--release", "--no-run"], true)?;
    let bins = build(&["build", "--release", "-p", "rtx-bench"], false)?;
    for (label, exe) in &tests {
        copy_exe(exe, &out.join("tests").join(label))?;
    }
    if !bins.iter().any(|(n, _)| n == "rtx_bench") {
        bail!("cargo built no rtx-bench binary");
    }
    for (name, exe) in &bins {
        copy_exe(exe, &out.join(name.replace('_', "-")))?;
    }
    let anchors = crate::root().join("../shared/anchors/torch_anchors.py");
    if anchors.is_file() {
        std::fs::copy(&anchors, out.join("torch_anchors.py"))?;
    }
    // Committed baselines and tuning fixtures travel with the bundle.
    let run = out.join("run.sh");
    std::fs::write(&run, RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755))?;
    }
    let total: u64 = walk_size(&out);
    eprintln!("xtask: bundle at {} ({} test binaries + {} binaries, {:.1} MiB); run it with `{}/run.sh`", out.display(), tests.len(), bins.len(), total as f64 / 1048576.0, out.display());
    Ok(())
}

fn walk_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.flatten()
                .map(|e| {
                    let m = e.metadata().ok();
                    if m.as_ref().is_some_and(|m| m.is_dir()) {
                        walk_size(&e.path())
                    } else {
                        m.map_or(0, |m| m.len())
                    }
                })
                .sum()
        })
        .unwrap_or(0)
}
