//! `cargo xtask gpu-bundle`: release test binaries + the bench binary in one folder that runs on
//! a GPU machine with no cargo (`run.sh` inside runs them all).
//!
//! With `--patch FILE [--at REV]` it builds an experiment instead: a temporary git worktree of
//! `REV` (default `HEAD`) with the patch applied, so the checkout itself is never modified and a
//! patch written against an older commit still builds. `BUILD` then names the commit and the
//! patch's blob hash, and the patch is copied into the bundle.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const RUN_SH: &str = include_str!("gpu_bundle_run.sh");

/// The cargo target folder of a bundle build: one for builds of this checkout, another for
/// experiments (patched worktrees), never shared.
///
/// Cargo names a workspace crate's artifacts by a hash that leaves out where the workspace lies,
/// and decides freshness by comparing source mtimes with the last build. A worktree's files are
/// newer than any earlier build, so an experiment always rebuilds; but a checkout build after an
/// experiment found its own, older files "fresh" and linked the experiment's library. That is how
/// call CM's base bundle (main 221bb43) ran the mma patch it was the control for (session 23).
fn target_dir(experiment: bool) -> PathBuf {
    crate::root().join(if experiment {
        "target/gpu-bundle-experiment"
    } else {
        "target/gpu-bundle-checkout"
    })
}

fn cargo(src: &Path, target: &Path) -> Command {
    let mut c = crate::cargo();
    c.current_dir(src)
        // A stripped, self-contained build of its own, so the bundle stays small enough to carry.
        .env("CARGO_PROFILE_RELEASE_STRIP", "true")
        .env("CARGO_PROFILE_RELEASE_DEBUG", "false")
        .env("CARGO_TARGET_DIR", target);
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

fn build(src: &Path, target: &Path, args: &[&str], tests: bool) -> Result<Vec<(String, PathBuf)>> {
    eprintln!(
        "xtask: cargo {} (in {}, target {})",
        args.join(" "),
        src.display(),
        target.display()
    );
    let o = cargo(src, target)
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

/// `git ARGS` in `dir`; `None` when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<std::process::Output> {
    Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
}

/// `<commit>` of the tree the bundle was built from, `+dirty` when tracked files differ from it
/// (an experiment build), or `unknown` outside a git checkout.
fn build_id() -> String {
    let root = crate::root();
    let git = |args: &[&str]| git(&root, args);
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

/// An experiment's source tree: a detached worktree of `rev` with `patch` applied, removed on drop.
struct PatchedTree {
    dir: PathBuf,
    /// The patch (canonical path), copied into the bundle.
    patch: PathBuf,
    /// `<short commit>+<patch file name>@<first 12 hex digits of its git blob hash>`.
    id: String,
}

/// Distinguishes the worktrees of one process.
fn next_tree_number() -> usize {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl PatchedTree {
    fn new(patch: &Path, rev: &str) -> Result<Self> {
        let root = crate::root();
        let patch = std::fs::canonicalize(patch)
            .with_context(|| format!("--patch {}: no such file", patch.display()))?;
        let commit = git(
            &root,
            &[
                "rev-parse",
                "--short",
                "--verify",
                &format!("{rev}^{{commit}}"),
            ],
        )
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .with_context(|| format!("--at {rev}: not a commit of this repository"))?;
        let blob = git(&root, &["hash-object", &patch.to_string_lossy()])
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .context("git hash-object failed on the patch")?;
        let name = patch
            .file_name()
            .map_or_else(|| "patch".into(), |n| n.to_string_lossy().into_owned());
        let dir = root.join("target/gpu-bundle-worktrees").join(format!(
            "{commit}-{}-{}",
            std::process::id(),
            next_tree_number()
        ));
        if dir.exists() {
            let _ = git(
                &root,
                &["worktree", "remove", "--force", &dir.to_string_lossy()],
            );
            let _ = std::fs::remove_dir_all(&dir);
        }
        let added = Command::new("git")
            .args(["worktree", "add", "--detach", "--quiet"])
            .arg(&dir)
            .arg(&commit)
            .current_dir(&root)
            .status()
            .context("running git worktree add")?;
        if !added.success() {
            bail!(
                "git worktree add {} {commit} failed ({added})",
                dir.display()
            );
        }
        let tree = PatchedTree {
            dir,
            patch,
            id: format!("{commit}+{name}@{}", &blob[..blob.len().min(12)]),
        };
        let applied = Command::new("git")
            .args(["apply", "--whitespace=nowarn"])
            .arg(&tree.patch)
            .current_dir(&tree.dir)
            .status()
            .context("running git apply")?;
        if !applied.success() {
            bail!(
                "--patch {} does not apply at {commit} (git apply said why above); name the commit it was written against with --at",
                tree.patch.display()
            );
        }
        Ok(tree)
    }
}

impl Drop for PatchedTree {
    fn drop(&mut self) {
        let root = crate::root();
        if git(
            &root,
            &["worktree", "remove", "--force", &self.dir.to_string_lossy()],
        )
        .is_none()
        {
            let _ = std::fs::remove_dir_all(&self.dir);
            let _ = git(&root, &["worktree", "prune"]);
        }
    }
}

/// Builds the bench binaries and the chosen test binaries (see [`test_args`]) into `out`, from
/// this checkout, or for `experiment = Some((patch, rev))` from a worktree of `rev` with the patch
/// applied.
pub fn run(
    out: &Path,
    only_tests: Option<&[String]>,
    experiment: Option<(&Path, &str)>,
) -> Result<()> {
    let test_cmd = test_args(only_tests)?;
    let out = if out.is_absolute() {
        out.to_path_buf()
    } else {
        crate::root().join(out)
    };
    let tree = experiment
        .map(|(patch, rev)| PatchedTree::new(patch, rev))
        .transpose()?;
    let src = tree.as_ref().map_or_else(crate::root, |t| t.dir.clone());
    let target = target_dir(tree.is_some());
    if out.exists() {
        std::fs::remove_dir_all(&out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out.join("tests"))?;
    let tests = match &test_cmd {
        Some(args) => build(
            &src,
            &target,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            true,
        )?,
        None => Vec::new(),
    };
    let bins = build(
        &src,
        &target,
        &["build", "--release", "-p", "rtx-bench"],
        false,
    )?;
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
    let id = match &tree {
        Some(t) => {
            std::fs::copy(&t.patch, out.join("exp.patch"))?;
            t.id.clone()
        }
        None => build_id(),
    };
    std::fs::write(out.join("BUILD"), format!("{id}\n"))?;
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
    use super::{target_dir, test_args, PatchedTree};
    use std::path::Path;

    /// A patch that adds one line at the end of the README of `HEAD`.
    fn readme_patch(dir: &Path, line: &str) -> std::path::PathBuf {
        let head = std::process::Command::new("git")
            .args(["show", "HEAD:README.md"])
            .current_dir(crate::root())
            .output()
            .unwrap();
        assert!(head.status.success(), "this test needs the git checkout");
        let text = String::from_utf8(head.stdout).unwrap();
        let n = text.lines().count();
        let last = text.lines().last().unwrap();
        let patch =
            format!("--- a/README.md\n+++ b/README.md\n@@ -{n},1 +{n},2 @@\n {last}\n+{line}\n");
        let p = dir.join(format!("{line}.patch"));
        std::fs::write(&p, patch).unwrap();
        p
    }

    #[test]
    fn a_patch_builds_in_its_own_worktree_and_the_checkout_is_untouched() {
        let tmp = std::env::temp_dir().join(format!("rtx-xtask-patch-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let patch = readme_patch(&tmp, "experiment-line");
        let dir;
        {
            let tree = PatchedTree::new(&patch, "HEAD").unwrap();
            dir = tree.dir.clone();
            let readme = std::fs::read_to_string(dir.join("README.md")).unwrap();
            assert!(readme.ends_with("experiment-line\n"), "patch not applied");
            assert!(tree.id.contains("+experiment-line.patch@"), "{}", tree.id);
            let ours = std::fs::read_to_string(crate::root().join("README.md")).unwrap();
            assert!(!ours.contains("experiment-line"));
        }
        assert!(!dir.exists(), "the worktree outlived the build");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_patch_that_does_not_apply_and_a_bad_commit_are_named() {
        let tmp = std::env::temp_dir().join(format!("rtx-xtask-badpatch-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let bad = tmp.join("bad.patch");
        std::fs::write(
            &bad,
            "--- a/README.md\n+++ b/README.md\n@@ -1,1 +1,1 @@\n-no such line in the readme\n+x\n",
        )
        .unwrap();
        let e = PatchedTree::new(&bad, "HEAD").err().unwrap().to_string();
        assert!(e.contains("does not apply at"), "{e}");
        let good = readme_patch(&tmp, "another-line");
        let e = PatchedTree::new(&good, "no-such-rev-xyz")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("--at no-such-rev-xyz"), "{e}");
        let e = PatchedTree::new(&tmp.join("missing.patch"), "HEAD")
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no such file"), "{e}");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn experiments_and_checkout_builds_never_share_a_target_folder() {
        assert_ne!(target_dir(true), target_dir(false));
        // Nor the folder every build shared before session 23, which may hold an experiment's
        // libraries that a checkout build would take for fresh.
        for t in [target_dir(true), target_dir(false)] {
            assert_ne!(t, crate::root().join("target/gpu-bundle"));
        }
    }

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
