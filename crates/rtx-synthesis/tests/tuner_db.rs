//! The tuning database under concurrent processes: N REAL child processes (this test binary
//! re-executed as `db_child_entry`) insert distinct keys into one file at the same time; every
//! key must be present afterwards and no temporary file may be left behind.

use rtx_synthesis::tuner::db::EntryMeta;
use rtx_synthesis::tuner::{
    DbEntry, DeviceKey, OpSignature, StoredConfig, TimingStats, TuneKey, TuningDb,
};
use rtx_synthesis::Arch;
use std::path::Path;
use std::process::Command;

const CHILD_PATH: &str = "RTX_TUNER_DB_CHILD_PATH";
const CHILD_ID: &str = "RTX_TUNER_DB_CHILD_ID";
const CHILDREN: u64 = 6;
const PER_CHILD: u64 = 8;

fn key(child: u64, j: u64) -> TuneKey {
    TuneKey {
        op: OpSignature {
            op: "gemm".into(),
            dtypes: vec![],
            layouts: vec![],
            shape: vec![1 + child, 1 + j],
            attrs: vec![("writer".into(), child.to_string())],
        },
        device: DeviceKey::new("test device", (9, 0), (13, 0)),
        arch: Arch::Sm90a,
        template: "t".into(),
        template_version: 1,
        fingerprint: "f".into(),
    }
}

fn entry(child: u64, j: u64) -> DbEntry {
    DbEntry {
        key: key(child, j),
        winner: StoredConfig {
            config: serde_json::json!({"child": child, "j": j}),
            fingerprint: "f".into(),
            // A placeholder sample: this test checks storage, not timings.
            stats: TimingStats::from_samples(vec![1.0]).unwrap(),
        },
        runners_up: vec![],
        meta: EntryMeta {
            created_unix_s: 0,
            strategy: "test".into(),
            measured: 1,
            failed: 0,
            space: 1,
            tuner_version: "test".into(),
        },
    }
}

/// The child side; in the parent run (no env var) it does the same inserts in-process.
#[test]
fn db_child_entry() {
    match (std::env::var(CHILD_PATH), std::env::var(CHILD_ID)) {
        (Ok(path), Ok(id)) => {
            let id: u64 = id.parse().expect("numeric child id");
            let mut db = TuningDb::open(&path).expect("open");
            for j in 0..PER_CHILD {
                // One locked read-modify-write per entry, to interleave with the others.
                db.insert(entry(id, j)).expect("insert");
            }
            std::process::exit(0);
        }
        _ => {
            let dir = tempfile::tempdir().unwrap();
            let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
            for j in 0..PER_CHILD {
                db.insert(entry(0, j)).unwrap();
            }
            assert_eq!(
                TuningDb::open(dir.path().join("t.db")).unwrap().len(),
                PER_CHILD as usize
            );
        }
    }
}

fn temp_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp."))
        .collect()
}

#[test]
fn concurrent_processes_lose_no_entries() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tuning.db");
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = (0..CHILDREN)
        .map(|id| {
            Command::new(&exe)
                .args([
                    "db_child_entry",
                    "--exact",
                    "--nocapture",
                    "--test-threads",
                    "1",
                ])
                .env(CHILD_PATH, &path)
                .env(CHILD_ID, id.to_string())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for mut c in children {
        let status = c.wait().unwrap();
        assert!(status.success(), "child failed: {status}");
    }
    let db = TuningDb::open(&path).unwrap();
    assert_eq!(db.len(), (CHILDREN * PER_CHILD) as usize);
    for child in 0..CHILDREN {
        for j in 0..PER_CHILD {
            let e = db
                .get(&key(child, j))
                .unwrap_or_else(|| panic!("entry {child}/{j} lost"));
            assert_eq!(e.winner.config, serde_json::json!({"child": child, "j": j}));
        }
    }
    assert!(
        temp_files(dir.path()).is_empty(),
        "{:?}",
        temp_files(dir.path())
    );
}
