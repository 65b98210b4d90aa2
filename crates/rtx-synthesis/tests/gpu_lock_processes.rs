//! The GPU measurement lock across real processes: a child (this test binary re-executed in
//! holder mode) takes a device's lock; the parent then finds the GPU busy and named after the
//! child, waits for it under the `wait` policy, and gets it at once after the holder is killed.

use rtx_synthesis::tuner::gpu_lock::{
    acquire_in, lock_path, read_holder, GpuLockError, LockPolicy,
};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::sync::mpsc;

/// Set in a child: the lock folder; the child holds the lock until its stdin closes.
const HOLD_ENV: &str = "RTX_GPU_LOCK_TEST_HOLD";
/// What a holder prints once it holds the lock.
const HELD: &str = "RTX_GPU_LOCK_TEST_HELD";
const DEVICE: &str = "GPU-00000000-test-lock-0000-processes";

/// Child mode: take the lock, say so, hold it until stdin closes.
#[test]
fn holder_child() {
    let Some(dir) = std::env::var_os(HOLD_ENV) else {
        return;
    };
    let lock = acquire_in(Path::new(&dir), DEVICE, LockPolicy::Fail, |_| ())
        .expect("child takes the free lock");
    assert!(lock.is_held());
    println!("{HELD}");
    let mut rest = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut rest);
    drop(lock);
}

/// Starts a holder and returns once it holds the lock (its stdout read up to the marker).
#[allow(
    clippy::zombie_processes,
    reason = "on a panic here the dropped handle closes the holder's stdin and it exits"
)]
fn spawn_holder(dir: &Path) -> (Child, BufReader<ChildStdout>) {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args(["--exact", "holder_child", "--nocapture", "--test-threads=1"])
        .env(HOLD_ENV, dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn holder");
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).expect("read holder output") == 0 {
            let status = child.wait().expect("reap holder");
            panic!("holder exited ({status}) before taking the lock");
        }
        // libtest prints "test holder_child ... " on the same line first.
        if line.trim_end().ends_with(HELD) {
            return (child, out);
        }
    }
}

fn dir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().expect("temp dir");
    let p = t.path().join("gpu-locks");
    (t, p)
}

#[test]
fn a_busy_gpu_names_its_holder_and_a_waiter_gets_it_when_the_holder_ends() {
    let (_t, dir) = dir();
    let (mut child, _out) = spawn_holder(&dir);
    let pid = child.id();

    match acquire_in(&dir, DEVICE, LockPolicy::Fail, |_| {
        panic!("fail policy must not wait")
    }) {
        Err(GpuLockError::Busy { device, holder }) => {
            assert_eq!(device, DEVICE);
            let h = holder.expect("the holder wrote its name");
            assert_eq!(h.pid, pid);
            assert!(h.program.contains("holder_child"), "{}", h.program);
        }
        other => panic!("expected Busy, got {other:?}"),
    }

    // Wait policy: told whom it waits for, then gets the lock once the holder lets go.
    let (tx, rx) = mpsc::channel();
    let d = dir.clone();
    let waiter = std::thread::spawn(move || {
        acquire_in(&d, DEVICE, LockPolicy::Wait, |h| {
            tx.send(h.map(|h| h.pid)).unwrap()
        })
        .map(|l| {
            let me = read_holder(l.path().unwrap()).map(|h| h.pid);
            (l.is_held(), me)
        })
    });
    assert_eq!(rx.recv().expect("on_wait called"), Some(pid));
    drop(child.stdin.take()); // the holder's stdin closes: it drops the lock and exits
    let (held, me) = waiter
        .join()
        .expect("waiter thread")
        .expect("waiter gets the lock");
    assert!(held);
    assert_eq!(
        me,
        Some(std::process::id()),
        "the new holder wrote itself into the lock file"
    );
    assert!(child.wait().expect("holder exit").success());
}

#[test]
fn a_killed_holder_leaves_no_stale_lock() {
    let (_t, dir) = dir();
    let (mut child, _out) = spawn_holder(&dir);
    assert!(lock_path(&dir, DEVICE).exists());
    assert!(matches!(
        acquire_in(&dir, DEVICE, LockPolicy::Fail, |_| ()),
        Err(GpuLockError::Busy { .. })
    ));
    child.kill().expect("kill holder");
    child.wait().expect("reap holder");
    let l =
        acquire_in(&dir, DEVICE, LockPolicy::Fail, |_| ()).expect("the dead holder's lock is free");
    assert!(l.is_held());
}
