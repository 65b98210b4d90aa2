//! Finds NVRTC and the CUDA headers, installing the PyPI wheels into `./.cuda` when missing.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The NVRTC wheels the tests need (they ship libnvrtc.so.13 and include/).
const WHEELS: [&str; 2] = ["nvidia-cuda-nvrtc==13.0.*", "nvidia-cuda-runtime==13.0.*"];

/// Where NVRTC and the headers were found.
pub struct CudaEnv {
    /// Folder holding `libnvrtc.so.13`.
    pub lib_dir: PathBuf,
    /// Folder holding `cuda_fp16.h`.
    pub include_dir: PathBuf,
}

impl CudaEnv {
    /// Environment variables to run tests and binaries with.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut ld = self.lib_dir.display().to_string();
        if let Ok(old) = std::env::var("LD_LIBRARY_PATH") {
            if !old.is_empty() {
                ld = format!("{ld}:{old}");
            }
        }
        vec![
            ("LD_LIBRARY_PATH".into(), ld),
            (
                "RTX_CUDA_INCLUDE".into(),
                self.include_dir.display().to_string(),
            ),
        ]
    }

    /// `export` lines for a POSIX shell (`cargo xtask env`): the library folder goes in front of
    /// the shell's own `LD_LIBRARY_PATH`, not of this process's (which cargo extends with its
    /// target folders).
    pub fn shell_exports(&self) -> String {
        format!(
            "export LD_LIBRARY_PATH={}${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}\nexport RTX_CUDA_INCLUDE={}\n",
            shell_quote(&self.lib_dir),
            shell_quote(&self.include_dir)
        )
    }
}

/// `p` as one shell word: bare when it holds only safe characters, else single-quoted.
fn shell_quote(p: &Path) -> String {
    let s = p.display().to_string();
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-+,=:@%".contains(c);
    if !s.is_empty() && s.chars().all(safe) {
        s
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

fn complete(lib: &Path, inc: &Path) -> bool {
    lib.join("libnvrtc.so.13").is_file()
        && inc.join("cuda_fp16.h").is_file()
        && inc.join("cuda_bf16.h").is_file()
}

/// Returns a usable NVRTC + headers, installing them locally first when neither the project
/// folder nor a system CUDA 13 has them.
pub fn ensure() -> Result<CudaEnv> {
    let local = crate::root().join(".cuda/site/nvidia/cu13");
    let (lib, inc) = (local.join("lib"), local.join("include"));
    if complete(&lib, &inc) {
        return Ok(CudaEnv {
            lib_dir: lib,
            include_dir: inc,
        });
    }
    {
        let sys = "/usr/local/cuda";
        let (sl, si) = (Path::new(sys).join("lib64"), Path::new(sys).join("include"));
        if complete(&sl, &si) {
            eprintln!("xtask: using the system CUDA at {sys}");
            return Ok(CudaEnv {
                lib_dir: sl,
                include_dir: si,
            });
        }
    }
    let target = crate::root().join(".cuda/site");
    eprintln!(
        "xtask: NVRTC not found; installing {} into {} ...",
        WHEELS.join(" "),
        target.display()
    );
    let mut last_err = String::new();
    for py in ["python3", "python"] {
        let status = Command::new(py)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-cache-dir",
                "--upgrade",
                "--target",
            ])
            .arg(&target)
            .args(WHEELS)
            .status();
        match status {
            Ok(s) if s.success() => {
                if complete(&lib, &inc) {
                    eprintln!("xtask: installed NVRTC into {}", local.display());
                    return Ok(CudaEnv {
                        lib_dir: lib,
                        include_dir: inc,
                    });
                }
                last_err = format!(
                    "{py} -m pip succeeded but {} lacks libnvrtc.so.13 or cuda_fp16.h",
                    local.display()
                );
            }
            Ok(s) => last_err = format!("{py} -m pip install exited with {s}"),
            Err(e) => last_err = format!("{py}: {e}"),
        }
    }
    bail!("could not install NVRTC ({last_err}); install Python 3 with pip, or set up CUDA 13 at /usr/local/cuda")
}

/// Runs `cmd` with the CUDA environment, failing with its exit status.
pub fn run_with(env: &CudaEnv, mut cmd: Command, what: &str) -> Result<()> {
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    let status = cmd.status().with_context(|| format!("starting {what}"))?;
    if !status.success() {
        return Err(ChildFailed {
            what: what.to_string(),
            status,
        }
        .into());
    }
    Ok(())
}

/// A command xtask ran ended without success; xtask exits with the same code (rtx-bench's 2
/// for a gate failure, 3 for a wrong result), or 1 when it was killed by a signal.
#[derive(Debug)]
pub struct ChildFailed {
    /// What was run.
    pub what: String,
    /// How it ended.
    pub status: std::process::ExitStatus,
}

impl ChildFailed {
    /// The exit code xtask passes on.
    pub fn code(&self) -> u8 {
        self.status
            .code()
            .and_then(|c| u8::try_from(c).ok())
            .filter(|&c| c != 0)
            .unwrap_or(1)
    }
}

impl std::fmt::Display for ChildFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} failed ({})", self.what, self.status)
    }
}

impl std::error::Error for ChildFailed {}

/// Re-runs this xtask process with the CUDA environment when it is not set yet (the dynamic
/// loader reads `LD_LIBRARY_PATH` only at process start). Returns in the re-run process.
pub fn reexec_with_cuda_env() -> Result<()> {
    const MARK: &str = "RTX_XTASK_CUDA_ENV";
    if std::env::var_os(MARK).is_some() {
        return Ok(());
    }
    let env = ensure()?;
    let mut cmd = Command::new(std::env::current_exe().context("locating the xtask binary")?);
    cmd.args(std::env::args_os().skip(1)).env(MARK, "1");
    for (k, v) in env.vars() {
        cmd.env(k, v);
    }
    let status = cmd
        .status()
        .context("re-running xtask with the CUDA environment")?;
    std::process::exit(status.code().unwrap_or(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_command_passes_its_exit_code_on() {
        let status = |script: &str| Command::new("sh").args(["-c", script]).status().unwrap();
        let failed = |script: &str| ChildFailed {
            what: "sh".into(),
            status: status(script),
        };
        assert_eq!(failed("exit 2").code(), 2);
        assert_eq!(failed("exit 3").code(), 3);
        assert_eq!(failed("kill -9 $$").code(), 1, "a signal has no exit code");
        assert!(failed("exit 2").to_string().starts_with("sh failed ("));
    }

    #[test]
    fn shell_exports_extend_the_shells_path_and_quote_odd_folders() {
        let env = CudaEnv {
            lib_dir: PathBuf::from("/opt/cu13/lib"),
            include_dir: PathBuf::from("/opt/it's here/include"),
        };
        assert_eq!(
            env.shell_exports(),
            "export LD_LIBRARY_PATH=/opt/cu13/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n\
             export RTX_CUDA_INCLUDE='/opt/it'\\''s here/include'\n"
        );
        // The exports run in a shell: the quoted folder comes back as one word.
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "LD_LIBRARY_PATH=/x; {} printf '%s|%s' \"$LD_LIBRARY_PATH\" \"$RTX_CUDA_INCLUDE\"",
                env.shell_exports().replace('\n', "; ")
            ))
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "/opt/cu13/lib:/x|/opt/it's here/include"
        );
    }
}
