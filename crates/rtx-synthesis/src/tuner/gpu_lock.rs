//! One measurer per GPU: an exclusive inter-process lock that a tuning run or a benchmark holds
//! on the device it times, so two processes measuring on one GPU at once wait for each other
//! instead of timing each other's kernels (and storing winners picked from polluted timings; a
//! complaint against peers, TileOPs#773).
//!
//! - The lock is an `fs4` advisory lock on `<cache root>/gpu-locks/<device uuid>.lock`, keyed by
//!   the driver's UUID ([`rtx_runtime::Device::uuid`]), so the same physical GPU is one lock
//!   whatever its ordinal under `CUDA_VISIBLE_DEVICES`, and two GPUs of one host are two locks.
//! - The holder writes who it is (pid, program, since when) into the lock file, so a process
//!   that has to wait can say whom it waits for.
//! - The operating system drops the lock when its process ends, crash or kill included: a
//!   dead holder never blocks anyone.
//! - Re-entrant within a process: a second [`acquire`] of a device this process already holds
//!   shares the held lock (a benchmark that tunes inside its run does not wait for itself).
//!   Worker processes spawned by a holder ([`super::worker`]) measure under their parent's lock
//!   and take none of their own.
//! - Within a process, tuning runs on one device take turns ([`run_slot`], [`acquire_run`]):
//!   the file lock alone would let two threads of one process measure at once.
//! - [`LOCK_ENV`] chooses the policy: `wait` (default), `fail` (a busy GPU is an error, naming
//!   the holder) or `off`.

use crate::aot::fsio::{cache_root, unix_now};
use fs4::fs_std::FileExt;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};

/// Environment variable selecting the [`LockPolicy`]: `wait`, `fail` or `off`.
pub const LOCK_ENV: &str = "RTX_GPU_LOCK";
/// Sub-folder of the cache root that holds the lock files.
pub const LOCK_DIR: &str = "gpu-locks";

/// What to do when another process holds the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockPolicy {
    /// Wait until it is free (after telling the caller whom it waits for).
    Wait,
    /// Fail with [`GpuLockError::Busy`].
    Fail,
    /// Take no lock at all.
    Off,
}

impl LockPolicy {
    /// The policy [`LOCK_ENV`] selects (`wait` when unset or empty).
    pub fn from_env() -> Result<LockPolicy, GpuLockError> {
        match std::env::var(LOCK_ENV) {
            Ok(v) => v.parse(),
            Err(std::env::VarError::NotPresent) => Ok(LockPolicy::Wait),
            Err(std::env::VarError::NotUnicode(v)) => {
                Err(GpuLockError::BadPolicy(v.to_string_lossy().into_owned()))
            }
        }
    }
}

impl std::str::FromStr for LockPolicy {
    type Err = GpuLockError;

    fn from_str(s: &str) -> Result<LockPolicy, GpuLockError> {
        match s.trim() {
            "" | "wait" => Ok(LockPolicy::Wait),
            "fail" => Ok(LockPolicy::Fail),
            "off" => Ok(LockPolicy::Off),
            other => Err(GpuLockError::BadPolicy(other.to_string())),
        }
    }
}

/// Who holds a GPU lock, as the holder wrote it into the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// The holder's program and arguments, shortened.
    pub program: String,
    /// When it took the lock, seconds since the Unix epoch.
    pub since_unix: u64,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let age = unix_now().saturating_sub(self.since_unix);
        write!(f, "pid {} (`{}`, for {age} s)", self.pid, self.program)
    }
}

fn describe(holder: &Option<Holder>) -> String {
    holder.as_ref().map_or_else(
        || "another process (it wrote no name)".to_string(),
        |h| h.to_string(),
    )
}

/// Why a GPU lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum GpuLockError {
    /// [`LOCK_ENV`] holds something other than `wait`, `fail` or `off`.
    #[error("{LOCK_ENV}={0:?}: expected `wait`, `fail` or `off`")]
    BadPolicy(String),
    /// Another process measures on the GPU and the policy is [`LockPolicy::Fail`].
    #[error("GPU {device} is being measured by {}; set {LOCK_ENV}=wait to wait for it", describe(.holder))]
    Busy {
        /// The device UUID.
        device: String,
        /// The holder, when it could be read.
        holder: Option<Holder>,
    },
    /// The lock file could not be created, opened or locked.
    #[error("GPU lock file {}: {op}: {source}", .path.display())]
    Io {
        /// The lock file (or its folder).
        path: PathBuf,
        /// What failed.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
}

/// The held lock file of one device; the OS lock goes with the file handle.
#[derive(Debug)]
struct Held {
    path: PathBuf,
    _file: File,
}

/// A held GPU lock (or none, under [`LockPolicy::Off`]); released when the last clone of it in
/// this process is dropped.
#[derive(Debug, Clone)]
pub struct GpuLock {
    held: Option<Arc<Held>>,
}

impl GpuLock {
    /// A lock that holds nothing (policy `off`, or no lock file could be made).
    pub fn none() -> GpuLock {
        GpuLock { held: None }
    }

    /// True when this value really holds the device's lock.
    pub fn is_held(&self) -> bool {
        self.held.is_some()
    }

    /// The lock file, when held.
    pub fn path(&self) -> Option<&Path> {
        self.held.as_ref().map(|h| h.path.as_path())
    }
}

/// The locks this process holds, by lock-file path (re-entrancy).
fn held_here() -> &'static Mutex<HashMap<PathBuf, Weak<Held>>> {
    static H: std::sync::OnceLock<Mutex<HashMap<PathBuf, Weak<Held>>>> = std::sync::OnceLock::new();
    H.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The lock file of device `uuid` under `dir` (characters outside `[A-Za-z0-9-_]` become `_`).
pub fn lock_path(dir: &Path, uuid: &str) -> PathBuf {
    let name: String = uuid
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("{name}.lock"))
}

/// Who holds the lock at `path`, as written in it (`None` if unreadable or not yet written).
pub fn read_holder(path: &Path) -> Option<Holder> {
    let mut s = String::new();
    File::open(path).ok()?.read_to_string(&mut s).ok()?;
    serde_json::from_str(s.trim()).ok()
}

fn this_holder() -> Holder {
    let mut program: String = std::env::args().collect::<Vec<_>>().join(" ");
    if program.len() > 160 {
        let cut = (0..=157)
            .rev()
            .find(|&i| program.is_char_boundary(i))
            .unwrap_or(0);
        program.truncate(cut);
        program.push_str("...");
    }
    Holder {
        pid: std::process::id(),
        program,
        since_unix: unix_now(),
    }
}

/// Takes the lock of device `uuid` in folder `dir` under `policy`. When another process holds
/// it and the policy is [`LockPolicy::Wait`], `on_wait` is called once with the holder (if it
/// could be read) and the call blocks until the lock is free.
pub fn acquire_in(
    dir: &Path,
    uuid: &str,
    policy: LockPolicy,
    on_wait: impl FnOnce(Option<&Holder>),
) -> Result<GpuLock, GpuLockError> {
    if policy == LockPolicy::Off {
        return Ok(GpuLock::none());
    }
    let path = lock_path(dir, uuid);
    let mut reg = held_here().lock().unwrap_or_else(|p| p.into_inner());
    reg.retain(|_, w| w.strong_count() > 0);
    if let Some(h) = reg.get(&path).and_then(Weak::upgrade) {
        return Ok(GpuLock { held: Some(h) });
    }
    let io = |op: &'static str, p: &Path| {
        let path = p.to_path_buf();
        move |source| GpuLockError::Io { path, op, source }
    };
    fs::create_dir_all(dir).map_err(io("create folder", dir))?;
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(io("open", &path))?;
    if !FileExt::try_lock_exclusive(&file).map_err(io("lock", &path))? {
        let holder = read_holder(&path);
        match policy {
            LockPolicy::Fail => {
                return Err(GpuLockError::Busy {
                    device: uuid.to_string(),
                    holder,
                })
            }
            _ => {
                tracing::warn!("GPU {uuid} is being measured by {}; waiting for it ({LOCK_ENV}=fail or off to change that)", describe(&holder));
                on_wait(holder.as_ref());
                // Other threads of this process may take other devices' locks meanwhile.
                drop(reg);
                FileExt::lock_exclusive(&file).map_err(io("lock", &path))?;
                reg = held_here().lock().unwrap_or_else(|p| p.into_inner());
            }
        }
    }
    let me = serde_json::to_string(&this_holder()).unwrap_or_default();
    file.set_len(0).map_err(io("truncate", &path))?;
    file.seek(SeekFrom::Start(0)).map_err(io("seek", &path))?;
    file.write_all(me.as_bytes())
        .and_then(|_| file.flush())
        .map_err(io("write", &path))?;
    let held = Arc::new(Held {
        path: path.clone(),
        _file: file,
    });
    reg.insert(path, Arc::downgrade(&held));
    tracing::debug!(device = uuid, "took the GPU measurement lock");
    Ok(GpuLock { held: Some(held) })
}

/// Takes the measurement lock of `device` in the default folder (`<cache root>/gpu-locks`)
/// under the [`LOCK_ENV`] policy. A busy GPU waits or fails as the policy says; a lock that
/// cannot be made at all (no cache folder, read-only disk, no UUID from the driver) is logged
/// and the caller goes on unlocked, since measuring unlocked is what rtx did before.
pub fn acquire(
    device: &rtx_runtime::Device,
    on_wait: impl FnOnce(Option<&Holder>),
) -> Result<GpuLock, GpuLockError> {
    match LockPolicy::from_env()? {
        LockPolicy::Off => Ok(GpuLock::none()),
        policy => lock_device(device, &device.uuid(), policy, on_wait),
    }
}

/// [`acquire`] with the policy read and the UUID queried by the caller (not `Off`).
fn lock_device(
    device: &rtx_runtime::Device,
    uuid: &Result<String, rtx_runtime::RuntimeError>,
    policy: LockPolicy,
    on_wait: impl FnOnce(Option<&Holder>),
) -> Result<GpuLock, GpuLockError> {
    let uuid = match uuid {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(
                "no UUID for device {}: {e}; measuring without the GPU lock",
                device.ordinal()
            );
            return Ok(GpuLock::none());
        }
    };
    let Some(root) = cache_root() else {
        tracing::warn!(
            "no cache folder for the GPU lock (set RTX_CACHE_DIR); measuring without it"
        );
        return Ok(GpuLock::none());
    };
    match acquire_in(&root.join(LOCK_DIR), uuid, policy, on_wait) {
        Err(GpuLockError::Io { path, op, source }) => {
            tracing::warn!(
                "GPU lock file {}: {op}: {source}; measuring without the GPU lock",
                path.display()
            );
            Ok(GpuLock::none())
        }
        other => other,
    }
}

/// The in-process half of "one measurer per GPU": the file lock is shared by every thread of a
/// process, so two threads tuning on one GPU at once would still time each other. A run slot
/// lets one tuning run per device and process measure at a time; the others wait for it.
#[derive(Debug, Default)]
struct Slot {
    busy: Mutex<bool>,
    free: std::sync::Condvar,
}

/// A held run slot (see [`run_slot`]); the next waiting run goes when it is dropped.
#[derive(Debug)]
pub struct RunSlot {
    slot: Arc<Slot>,
}

impl Drop for RunSlot {
    fn drop(&mut self) {
        *self.slot.busy.lock().unwrap_or_else(|p| p.into_inner()) = false;
        self.slot.free.notify_one();
    }
}

/// Takes device `key`'s run slot in this process, waiting while another run holds it;
/// `on_wait` is called once before such a wait. Not re-entrant: a thread holding a slot must
/// not ask for the same one again.
pub fn run_slot(key: &str, on_wait: impl FnOnce()) -> RunSlot {
    static SLOTS: std::sync::OnceLock<Mutex<HashMap<String, Arc<Slot>>>> =
        std::sync::OnceLock::new();
    let slot = SLOTS
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(key.to_string())
        .or_default()
        .clone();
    let mut busy = slot.busy.lock().unwrap_or_else(|p| p.into_inner());
    if *busy {
        on_wait();
        while *busy {
            busy = slot.free.wait(busy).unwrap_or_else(|p| p.into_inner());
        }
    }
    *busy = true;
    drop(busy);
    RunSlot { slot }
}

/// What a tuning run holds: its device's run slot in this process and the GPU lock.
#[derive(Debug)]
pub struct TuningRun {
    // Dropped in order: the GPU lock (shared, so usually still held by the process) then the slot.
    _lock: GpuLock,
    _slot: RunSlot,
}

/// Takes what a tuning run on `device` needs: first the device's run slot in this process (so
/// concurrent tuning calls of one process measure one after the other), then the GPU lock
/// ([`acquire`]). `None` under [`LockPolicy::Off`], which turns both off.
pub fn acquire_run(device: &rtx_runtime::Device) -> Result<Option<TuningRun>, GpuLockError> {
    let policy = LockPolicy::from_env()?;
    if policy == LockPolicy::Off {
        return Ok(None);
    }
    let uuid = device.uuid();
    let key = uuid
        .clone()
        .unwrap_or_else(|_| format!("ordinal-{}", device.ordinal()));
    let slot = run_slot(&key, || {
        tracing::warn!("another tuning run of this process measures on GPU {key}; waiting for it")
    });
    Ok(Some(TuningRun {
        _lock: lock_device(device, &uuid, policy, |_| ())?,
        _slot: slot,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True when some other handle could take the lock file right now.
    fn free(path: &Path) -> bool {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .unwrap();
        let got = FileExt::try_lock_exclusive(&f).unwrap();
        if got {
            FileExt::unlock(&f).unwrap();
        }
        got
    }

    #[test]
    fn policies_parse_and_a_bad_one_is_named() {
        assert_eq!("wait".parse::<LockPolicy>().unwrap(), LockPolicy::Wait);
        assert_eq!("".parse::<LockPolicy>().unwrap(), LockPolicy::Wait);
        assert_eq!(" fail ".parse::<LockPolicy>().unwrap(), LockPolicy::Fail);
        assert_eq!("off".parse::<LockPolicy>().unwrap(), LockPolicy::Off);
        let e = "sometimes".parse::<LockPolicy>().unwrap_err();
        assert!(e.to_string().contains("RTX_GPU_LOCK=\"sometimes\""), "{e}");
    }

    #[test]
    fn lock_files_are_named_after_the_uuid_and_nothing_else() {
        let d = Path::new("/x");
        assert_eq!(
            lock_path(d, "GPU-5a1b2c3d-4e5f"),
            Path::new("/x/GPU-5a1b2c3d-4e5f.lock")
        );
        assert_eq!(
            lock_path(d, "../etc/passwd"),
            Path::new("/x/___etc_passwd.lock")
        );
    }

    #[test]
    fn a_held_lock_names_its_holder_is_shared_in_process_and_freed_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = acquire_in(dir.path(), "GPU-t1", LockPolicy::Fail, |_| {
            panic!("free lock must not wait")
        })
        .unwrap();
        let path = a.path().unwrap().to_path_buf();
        assert!(a.is_held() && !free(&path));
        let h = read_holder(&path).expect("holder written");
        assert_eq!(h.pid, std::process::id());
        // The same device again in this process: shared, not a self-deadlock or a Busy error.
        let b = acquire_in(dir.path(), "GPU-t1", LockPolicy::Fail, |_| {
            panic!("re-entrant")
        })
        .unwrap();
        assert_eq!(b.path(), Some(path.as_path()));
        // Another device is another lock.
        let other = acquire_in(dir.path(), "GPU-t2", LockPolicy::Fail, |_| {
            panic!("other device")
        })
        .unwrap();
        assert_ne!(other.path(), Some(path.as_path()));
        drop(a);
        assert!(!free(&path), "still held by the clone");
        drop(b);
        assert!(free(&path), "released with the last holder");
    }

    #[test]
    fn one_run_per_device_slot_at_a_time_within_a_process() {
        use std::sync::mpsc;
        let first = run_slot("GPU-slot-a", || panic!("a free slot must not wait"));
        // Another device's slot is free.
        drop(run_slot("GPU-slot-b", || panic!("another device")));
        let (waiting_tx, waiting_rx) = mpsc::channel();
        let (got_tx, got_rx) = mpsc::channel();
        let t = std::thread::spawn(move || {
            let s = run_slot("GPU-slot-a", || waiting_tx.send(()).unwrap());
            got_tx.send(()).unwrap();
            drop(s);
        });
        waiting_rx.recv().expect("the second run waits");
        assert!(
            got_rx.try_recv().is_err(),
            "the second run must not get the slot while the first holds it"
        );
        drop(first);
        got_rx
            .recv()
            .expect("the second run goes once the first ends");
        t.join().unwrap();
        drop(run_slot("GPU-slot-a", || panic!("free again")));
    }

    #[test]
    fn policy_off_takes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let l = acquire_in(dir.path(), "GPU-off", LockPolicy::Off, |_| panic!()).unwrap();
        assert!(!l.is_held());
        assert!(!lock_path(dir.path(), "GPU-off").exists());
    }

    #[test]
    fn an_unusable_folder_is_an_io_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("not-a-dir");
        fs::write(&blocker, b"x").unwrap();
        let e = acquire_in(&blocker, "GPU-io", LockPolicy::Wait, |_| ()).unwrap_err();
        assert!(matches!(e, GpuLockError::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("not-a-dir"), "{e}");
    }
}
