//! The partial report a run keeps on disk while it goes: `report.partial.json` in the output
//! folder, rewritten (atomically) after every finished suite and, inside the GEMM, attention
//! and memory suites, after every case, and in the transformer suite after the unfused plan
//! ([`crate::suites::SuiteContext::save_partial`]). A run that is killed (a `timeout`, a fault
//! that takes the process down, an OOM kill) leaves the cases it had finished there; a run that
//! ends writes `report.json` and removes the partial file. The partial file has the same format
//! as `report.json`, without the anchors and the measured profile that are added at the end.

use crate::report::{Case, Report, SuiteRun};
use std::cell::RefCell;
use std::path::{Path, PathBuf};

/// File name of the partial report inside the output folder.
pub const PARTIAL_FILE: &str = "report.partial.json";

/// Keeps the finished suites of a run and writes them, with the running suite's cases so far.
#[derive(Debug)]
pub struct Checkpoint {
    path: PathBuf,
    done: RefCell<Report>,
}

impl Checkpoint {
    /// A checkpoint writing `dir/report.partial.json`, starting from `report` (no cases yet).
    pub fn new(dir: &Path, report: Report) -> Checkpoint {
        Checkpoint {
            path: dir.join(PARTIAL_FILE),
            done: RefCell::new(report),
        }
    }

    /// The partial file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the finished suites plus `running`, the running suite's cases so far. A write
    /// that fails is logged and the run goes on (the final report is still written).
    pub fn save(&self, running: &[Case]) {
        let mut r = self.done.borrow().clone();
        r.cases.extend_from_slice(running);
        if let Err(e) = r.write_file(&self.path) {
            tracing::warn!(target: "rtx_bench", "partial report not saved: {e}");
        }
    }

    /// Records a finished suite and its cases, and writes the file.
    pub fn suite_done(&self, run: SuiteRun, cases: &[Case]) {
        {
            let mut d = self.done.borrow_mut();
            d.cases.extend_from_slice(cases);
            d.suites.push(run);
        }
        self.save(&[]);
    }

    /// The report so far: the finished suites and their cases.
    pub fn report(&self) -> Report {
        self.done.borrow().clone()
    }

    /// Removes the partial file: the run's `report.json` is written.
    pub fn finish(self) {
        match std::fs::remove_file(&self.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::warn!(target: "rtx_bench", "{}: {e}", self.path.display()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tests::sample_report;
    use crate::SuiteId;

    #[test]
    fn the_partial_file_holds_finished_suites_and_the_running_cases() {
        let dir = tempfile::tempdir().unwrap();
        // Hand-made cases (test inputs, not measurements).
        let sample = sample_report();
        let mut empty = sample.clone();
        empty.cases.clear();
        empty.suites.clear();
        let cp = Checkpoint::new(dir.path(), empty);
        assert!(
            !cp.path().exists(),
            "nothing is written before the first case"
        );

        cp.save(&sample.cases[..1]);
        let r = Report::read_file(cp.path()).unwrap();
        assert_eq!(r.cases, sample.cases[..1]);
        assert!(r.suites.is_empty());

        let run = SuiteRun {
            suite: SuiteId::Gemm,
            skipped: None,
        };
        cp.suite_done(run.clone(), &sample.cases);
        cp.save(&sample.cases[..1]);
        let r = Report::read_file(cp.path()).unwrap();
        assert_eq!(r.suites, vec![run]);
        assert_eq!(r.cases.len(), sample.cases.len() + 1);
        assert_eq!(r.cases[..sample.cases.len()], sample.cases[..]);
        // The report itself holds the finished suites only, not the running cases.
        assert_eq!(cp.report().cases, sample.cases);

        let path = cp.path().to_path_buf();
        cp.finish();
        assert!(!path.exists());
    }
}
