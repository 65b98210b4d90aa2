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
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if v["reason"] == "compiler-message" {
            // JSON mode puts the compiler's diagnostics on stdout: show them.
            if let Some(text) = v["message"]["rendered"].as_str() {
                eprint!("{text}");
            }
            continue;
        }
        if v["reason"] != "compiler-artifact" {
            continue;
        }
        let Some(exe) = v["executable"].as_str() else {
            continue;
        };
        if v["profile"]["test"].as_bool() != Some(tests) {
            continue;
        }
        let kind = v["target"]["kind"][0].as_str().unwrap_or("bin");
        let name = v["target"]["name"]
            .as_str()
            .unwrap_or("unknown")
            .replace('-', "_");
        let pkg = v["package_id"]
            .as_str()
            .unwrap_or("")
            .rsplit('/')
            .next()
            .unwrap_or("")
            .split(['#', '@'])
            .next()
            .unwrap_or("")
            .replace('-', "_");
        let label = if tests {
            format!("{pkg}__{kind}__{name}")
        } else {
            name
        };
        out.push((label, PathBuf::from(exe)));
    }
    out
}

fn build(args: &[&str], tests: bool) -> Result<Vec<(String, PathBuf)>> {
    eprintln!("xtask: cargo {}", args.join(" "));
    let o = cargo()
        .args(args)
        .args(["--message-format=json"])
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo")?;
    let found = executables(&String::from_utf8_lossy(&o.stdout), tests);
    if !o.status.success() {
        bail!("cargo {} failed", args.join(" "));
    }
    Ok(found)
}

fn copy_exe(src: &Path, dst: &Path) -> Result<()> {
    std::fs::copy(src, dst)
        .with_context(|| format!("copying {} to {}", src.display(), dst.display()))?;
    Ok(())
}

/// The `cargo test` arguments for the chosen integration tests: every test of the workspace
/// (`None`), none (`Some(["none"])`), or the named targets. `None` means nothing to build.
fn test_args(only: Option<&[String]>) -> Result<Option<Vec<String>>> {
    let mut args: Vec<String> = ["test", "--workspace", "--release", "--no-run"]
        .map(String::from)
        .to_vec();
    let Some(names) = only else {
        return Ok(Some(args));
    };
    let names: Vec<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if names == ["none"] {
        return Ok(None);
    }
    if names.is_empty() {
        bail!("--tests needs test target names (e.g. wgmma_gpu,gpu) or `none`");
    }
    let is_name = |n: &str| {
        !n.starts_with('-')
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if let Some(bad) = names.iter().find(|n| !is_name(n)) {
        bail!("--tests: `{bad}` is not a test target name (letters, digits, `_` and `-`, not starting with `-`)");
    }
    for n in names {
        args.extend(["--test".to_string(), n.to_string()]);
    }
    Ok(Some(args))
}

/// `<commit>` of the tree the bundle was built from, `+dirty` when tracked files differ from it
/// (an experiment build), or `unknown` outside a git checkout.
fn build_id() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .current_dir(crate::root())
            .output()
            .ok()
            .filter(|o| o.status.success())
    };
    let Some(head) = git(&["rev-parse", "--short", "HEAD"]) else {
        return "unknown".into();
    };
    let head = String::from_utf8_lossy(&head.stdout).trim().to_string();
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .is_some_and(|o| !o.stdout.is_empty());
    if dirty {
        format!("{head}+dirty")
    } else {
        head
    }
}

/// Builds the bench binaries and the chosen test binaries (see [`test_args`]) into `out`.
pub fn run(out: &Path, only_tests: Option<&[String]>) -> Result<()> {
    let test_cmd = test_args(only_tests)?;
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        crate::root().join(out)
    };
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("tests"))?;
    let tests = match &test_cmd {
        Some(args) => build(&args.iter().map(String::as_str).collect::<Vec<_>>(), true)?,
        None => Vec::new(),
    };
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
    std::fs::write(out.join("BUILD"), format!("{}\n", build_id()))?;
    // Committed baselines and tuning fixtures travel with the bundle.
    let run = out.join("run.sh");
    std::fs::write(&run, RUN_SH)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o755))?;
    }
    let total: u64 = walk_size(&out);
    eprintln!(
        "xtask: bundle at {} ({} test binaries + {} binaries, {:.1} MiB); run it with `{}/run.sh`",
        out.display(),
        tests.len(),
        bins.len(),
        total as f64 / 1048576.0,
        out.display()
    );
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

#[cfg(test)]
mod tests {
    use super::test_args;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_test_by_default() {
        assert_eq!(
            test_args(None).unwrap().unwrap(),
            names(&["test", "--workspace", "--release", "--no-run"])
        );
    }

    #[test]
    fn none_builds_no_tests() {
        assert_eq!(test_args(Some(&names(&["none"]))).unwrap(), None);
    }

    #[test]
    fn named_targets_become_test_flags() {
        let args = test_args(Some(&names(&["wgmma_gpu", " gpu "])))
            .unwrap()
            .unwrap();
        assert_eq!(args[4..], names(&["--test", "wgmma_gpu", "--test", "gpu"]));
    }

    #[test]
    fn bad_names_are_refused() {
        let e = test_args(Some(&names(&["wgmma_gpu", "--all"])))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`--all`"), "{e}");
        assert!(test_args(Some(&names(&["", " "]))).is_err());
    }
}
