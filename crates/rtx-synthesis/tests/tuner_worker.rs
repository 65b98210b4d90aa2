//! Fault isolation with REAL worker processes: the test binary re-executes itself as the
//! worker (`worker_child_entry`), serving a dummy backend whose candidates are slow, wrong,
//! broken, hanging, crashing or faulting. Every bad candidate must be recorded as failed, the
//! run must complete, and the fastest correct candidate must win.

mod tuner_support;

use rtx_synthesis::tuner::{
    worker_main, CandidateResult, Exhaustive, NoProgress, TuneError, TuneOptions, Tuner,
    WorkerBackend, WorkerCommand, WorkerOptions,
};
use rtx_synthesis::Arch;
use std::time::Duration;
use tuner_support::*;

const CHILD_ENV: &str = "RTX_TUNER_TEST_WORKER";

fn worker_command() -> WorkerCommand {
    let exe = std::env::current_exe().expect("test binary path");
    WorkerCommand::new(exe)
        .args([
            "worker_child_entry",
            "--exact",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_ENV, "1")
}

/// The worker side. In the parent test run (no env var) it checks the dummy's script instead.
#[test]
fn worker_child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        // Not a worker: check the script the other tests rely on.
        assert_eq!(expected_kind(WINNER), None);
        assert_eq!(expected_kind(REJECTED), Some("rejected"));
        let failing = (0..SPACE).filter(|&i| expected_kind(i).is_some()).count();
        assert_eq!(failing, 9);
        return;
    }
    let exit = worker_main(
        &ToyTemplate,
        &ToyProblem { n: SPACE },
        Arch::Sm90a,
        &DummyBackend,
    )
    .expect("worker I/O");
    std::process::exit(exit.code());
}

fn options() -> WorkerOptions {
    WorkerOptions {
        startup_timeout: Duration::from_secs(60),
        compile_timeout: Duration::from_secs(3),
        evaluate_timeout: Duration::from_secs(3),
        max_spawns: 32,
    }
}

#[test]
fn bad_candidates_fail_and_the_run_completes() {
    let backend: WorkerBackend<ToyTemplate> = WorkerBackend::new(worker_command(), options());
    let outcome = Tuner::new(TuneOptions {
        time_budget: Duration::from_secs(300),
        ..Default::default()
    })
    .tune(
        &ToyTemplate,
        &ToyProblem { n: SPACE },
        Arch::Sm90a,
        &backend,
        &mut Exhaustive::new(),
        &quick_protocol(),
        &mut NoProgress,
    )
    .unwrap_or_else(|e| panic!("tuning failed: {e}"));

    assert_eq!(outcome.best.config.id, WINNER, "{:#?}", outcome.table);
    for r in &outcome.table {
        let got = r.error().map(|e| e.kind());
        assert_eq!(
            got,
            expected_kind(r.config.id),
            "id {}: {:?}",
            r.config.id,
            r.result
        );
        if got.is_none() {
            assert!(
                matches!(r.result, CandidateResult::Measured { .. }),
                "id {} was not measured",
                r.config.id
            );
        }
    }
    assert!(!outcome.stopped_by_time && !outcome.stopped_by_fault);
    assert_eq!(outcome.measured, 5, "ids 0, 1, 2, 10, 13");

    let s = backend.stats();
    assert_eq!(s.faults, 1);
    assert!(s.timeouts >= 2, "{s:?}: the run hang and the compile hang");
    assert!(s.crashes >= 2, "{s:?}: the run abort and the compile abort");
    assert!(
        s.timeouts + s.crashes >= 5,
        "{s:?}: the batch holding both compile culprits also died"
    );
    assert!(s.spawned >= 6, "{s:?}: a fresh worker after every loss");
}

#[test]
fn a_worker_for_another_problem_refuses_and_nothing_wins() {
    let backend: WorkerBackend<ToyTemplate> = WorkerBackend::new(worker_command(), options());
    let e = Tuner::default()
        .tune(
            &ToyTemplate,
            &ToyProblem { n: 6 },
            Arch::Sm90a,
            &backend,
            &mut Exhaustive::new(),
            &quick_protocol(),
            &mut NoProgress,
        )
        .unwrap_err();
    match e {
        TuneError::NoWinner {
            first_error: Some(err),
            ..
        } => {
            assert!(err.to_string().contains("refused"), "{err}")
        }
        other => panic!("expected NoWinner, got {other:?}"),
    }
    assert_eq!(
        backend.stats().spawned,
        1,
        "a refusal is remembered, not retried"
    );
}
