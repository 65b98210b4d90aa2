//! Progress bars on stderr (indicatif), hidden when stderr is not a terminal, plus a plain
//! `tracing` line per finished step so logs (e.g. `bench.log`) still show progress.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress reporter for one suite or phase.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
    label: String,
}

impl Progress {
    /// A bar of `len` steps labelled `label` (drawn only when stderr is a terminal and `enabled`).
    pub fn new(label: &str, len: u64, enabled: bool) -> Progress {
        let target = if enabled {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(len), target);
        if let Ok(style) = ProgressStyle::with_template(
            "{prefix:>12} [{bar:30}] {pos}/{len} {elapsed_precise} {wide_msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        Progress {
            bar,
            label: label.to_string(),
        }
    }

    /// A bar that draws nothing (tests).
    pub fn hidden() -> Progress {
        Progress::new("", 0, false)
    }

    /// Adds `n` more steps to the total.
    pub fn add_len(&self, n: u64) {
        self.bar.inc_length(n);
    }

    /// Shows what is running now.
    pub fn running(&self, what: &str) {
        self.bar.set_message(what.to_string());
    }

    /// One step done; logs it.
    pub fn done(&self, what: &str) {
        self.bar.inc(1);
        tracing::info!(target: "rtx_bench", "{} {}/{}: {what}", self.label, self.bar.position(), self.bar.length().unwrap_or(0));
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
