//! The persistent tuning database: winners keyed by [`TuneKey`] (operation signature, device,
//! target, template version and source fingerprint), with their timings and runners-up.
//!
//! On disk: an 8-byte magic, a little-endian `u32` format version, the body length (`u64`), the
//! blake3 hash of the body, then the body (bincode via serde). Writes go to a temporary file in
//! the same directory that is renamed over the old one, so a reader sees the old or the new file,
//! never half of one. Read-modify-write cycles hold an exclusive `fs4` lock on `<db>.lock`, so
//! several processes can insert at once without losing each other's entries.
//!
//! Sharing between machines is JSON ([`TuningDb::export_json`], [`TuningDb::import_json`]):
//! on the same key (which includes the fingerprint) the faster winner is kept; entries with
//! different fingerprints are different keys and are never mixed.
//!
//! A lookup ([`TuningDb::lookup`]) serves the exact entry, else the nearest tuned shape of the
//! same family (same op, dtypes, layouts, attributes, device, target, template and
//! fingerprint; nearest by log2 distance over the shape), else the template's default, and
//! says which in a `tracing::info!` line. Every served config is re-checked against the
//! problem (`Template::check`) and its emitted source against the stored fingerprint; the
//! runners-up that also pass are returned as launch-time fallbacks.

use super::key::{DeviceKey, ProblemSignature, TuneKey};
use super::measure::TimingStats;
use super::tuner::TuneOutcome;
use crate::templates::{ConstraintViolation, Template};
use crate::Arch;
use fs4::fs_std::FileExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// First bytes of every tuning database file.
pub const MAGIC: [u8; 8] = *b"RTXTUNE\0";
/// The on-disk format this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// Format tag of the JSON export.
pub const EXPORT_FORMAT: &str = "rtx-tuning-db";
const HEADER_LEN: usize = 8 + 4 + 8 + 32;

/// Serialises a JSON value as itself in human-readable formats and as JSON text in binary ones
/// (bincode cannot carry a self-describing `serde_json::Value`).
mod json_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(v: &Value, s: S) -> Result<S::Ok, S::Error> {
        if s.is_human_readable() {
            v.serialize(s)
        } else {
            s.serialize_str(&v.to_string())
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
        if d.is_human_readable() {
            Value::deserialize(d)
        } else {
            let s = String::deserialize(d)?;
            serde_json::from_str(&s).map_err(D::Error::custom)
        }
    }
}

/// One stored config with its timing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredConfig {
    /// The config in its serde JSON form.
    #[serde(with = "json_text")]
    pub config: Value,
    /// Hex fingerprint of this config's emitted source (re-checked on lookup).
    pub fingerprint: String,
    /// Its final timing.
    pub stats: TimingStats,
}

/// How an entry was produced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryMeta {
    /// Seconds since the Unix epoch when it was tuned.
    pub created_unix_s: u64,
    /// The strategy that found it.
    pub strategy: String,
    /// Candidates measured on the GPU.
    pub measured: u32,
    /// Candidates that failed.
    pub failed: u32,
    /// Configs in the searched space.
    pub space: u32,
    /// Version of rtx-synthesis that tuned it.
    pub tuner_version: String,
}

/// One database entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DbEntry {
    /// Its key.
    pub key: TuneKey,
    /// The winner.
    pub winner: StoredConfig,
    /// The next fastest verified configs, fastest first (fallbacks if the winner fails at launch).
    pub runners_up: Vec<StoredConfig>,
    /// Provenance.
    pub meta: EntryMeta,
}

/// Why a database operation failed.
#[derive(Debug, thiserror::Error)]
pub enum DbError {
    /// A file-system call failed.
    #[error("tuning db {path}: {op} failed: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// The file is not a tuning database or is damaged.
    #[error("tuning db {path} is corrupt: {reason} (delete it to start over)")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file was written by a newer rtx; it is left untouched.
    #[error("tuning db {path} has format version {found}; this build reads up to {supported}")]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// Its version.
        found: u32,
        /// Ours.
        supported: u32,
    },
    /// Encoding the body failed.
    #[error("tuning db: encoding failed: {0}")]
    Encode(String),
    /// A JSON export could not be read or written.
    #[error("tuning db JSON: {0}")]
    Json(String),
    /// The template refused its own default config (needed for the key fingerprint).
    #[error(transparent)]
    Template(#[from] ConstraintViolation),
    /// Neither `RTX_CACHE_DIR` nor a platform cache directory is available.
    #[error("no cache directory: set RTX_CACHE_DIR")]
    NoCacheDir,
    /// A tuning outcome cannot be stored (its winner cannot be serialised, ...).
    #[error("tuning db: cannot store outcome: {0}")]
    Outcome(String),
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(std::io::Error) -> DbError + 'a {
    move |source| DbError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

#[derive(Serialize, Deserialize)]
struct DbBody {
    entries: Vec<DbEntry>,
}

#[derive(Serialize, Deserialize)]
struct DbExport {
    format: String,
    version: u32,
    entries: Vec<DbEntry>,
}

/// Encodes entries in the on-disk format (header + bincode body).
pub fn encode(entries: &[DbEntry]) -> Result<Vec<u8>, DbError> {
    let body = bincode::serde::encode_to_vec(
        DbBody {
            entries: entries.to_vec(),
        },
        bincode::config::standard(),
    )
    .map_err(|e| DbError::Encode(e.to_string()))?;
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(&body).as_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes the on-disk format; `path` only names the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Vec<DbEntry>, DbError> {
    let corrupt = |reason: String| DbError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    if bytes.len() < 12 || bytes[..8] != MAGIC {
        return Err(corrupt("missing RTXTUNE magic".into()));
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version > FORMAT_VERSION {
        return Err(DbError::NewerFormat {
            path: path.to_path_buf(),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    if version == 0 {
        return Err(corrupt("format version 0".into()));
    }
    if bytes.len() < HEADER_LEN {
        return Err(corrupt(format!("truncated header ({} bytes)", bytes.len())));
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[12..20]);
    let len = u64::from_le_bytes(len);
    let body = &bytes[HEADER_LEN..];
    if body.len() as u64 != len {
        return Err(corrupt(format!("body is {} bytes, header says {len}", body.len())));
    }
    if blake3::hash(body).as_bytes() != &bytes[20..52] {
        return Err(corrupt("checksum mismatch".into()));
    }
    let (b, used): (DbBody, usize) = bincode::serde::decode_from_slice(body, bincode::config::standard())
        .map_err(|e| corrupt(format!("undecodable body: {e}")))?;
    if used != body.len() {
        return Err(corrupt(format!("{} trailing bytes", body.len() - used)));
    }
    Ok(b.entries)
}

/// Where a looked-up config came from.
#[derive(Debug, Clone, PartialEq)]
pub enum LookupSource {
    /// An entry for exactly this problem.
    Exact,
    /// The entry of the nearest tuned shape in the same family.
    NearestBucket {
        /// That entry's shape.
        from: Vec<u64>,
        /// log2 distance between the shapes.
        distance: f64,
    },
    /// Nothing usable was tuned: the template's default config.
    Default,
}

/// A config to launch, where it came from, and what to try if it fails at launch.
#[derive(Debug, Clone, PartialEq)]
pub struct Lookup<C> {
    /// The config to use.
    pub config: C,
    /// Where it came from.
    pub source: LookupSource,
    /// Further verified configs from the same entry, fastest first, that also pass `check()`.
    pub fallbacks: Vec<C>,
    /// The stored timing of `config` (for the tuned shape), when it came from the database.
    pub stats: Option<TimingStats>,
}

/// Knobs of [`TuningDb::lookup`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LookupPolicy {
    /// Farthest shape (sum over dimensions of |log2 a - log2 b|) a nearest-bucket lookup may
    /// borrow from; 4.0 allows e.g. 2x in every dimension of (M, N, K, batch).
    pub max_log2_distance: f64,
    /// Re-emit each served config and compare its fingerprint with the stored one.
    pub check_fingerprints: bool,
}

impl Default for LookupPolicy {
    fn default() -> Self {
        LookupPolicy {
            max_log2_distance: 4.0,
            check_fingerprints: true,
        }
    }
}

/// Counts of what a merge did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// New keys.
    pub added: usize,
    /// Existing keys whose winner the incoming (faster) one replaced.
    pub replaced: usize,
    /// Existing keys kept because they were at least as fast.
    pub kept: usize,
    /// Incoming entries refused (non-finite timing).
    pub refused: usize,
}

/// log2 distance between two shapes; `None` if they have different ranks or a zero extent.
pub fn shape_distance(a: &[u64], b: &[u64]) -> Option<f64> {
    if a.len() != b.len() || a.iter().chain(b).any(|&x| x == 0) {
        return None;
    }
    Some(
        a.iter()
            .zip(b)
            .map(|(&x, &y)| ((x as f64).log2() - (y as f64).log2()).abs())
            .sum(),
    )
}

/// The tuning database: an in-memory snapshot of one file plus locked updates.
#[derive(Debug)]
pub struct TuningDb {
    path: PathBuf,
    entries: Vec<DbEntry>,
    index: HashMap<TuneKey, usize>,
    families: HashMap<TuneKey, Vec<usize>>,
}

struct LockGuard {
    file: File,
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        let _ = FileExt::unlock(&self.file);
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

impl TuningDb {
    /// `$RTX_CACHE_DIR/tuning.db`, else `<platform cache dir>/rtx/tuning.db`.
    pub fn default_path() -> Result<PathBuf, DbError> {
        if let Some(dir) = std::env::var_os("RTX_CACHE_DIR").filter(|d| !d.is_empty()) {
            return Ok(PathBuf::from(dir).join("tuning.db"));
        }
        dirs::cache_dir()
            .map(|d| d.join("rtx").join("tuning.db"))
            .ok_or(DbError::NoCacheDir)
    }

    /// Opens the database at `path` (a missing file is an empty database).
    pub fn open(path: impl Into<PathBuf>) -> Result<TuningDb, DbError> {
        let path = path.into();
        let entries = Self::read_entries(&path)?;
        let mut db = TuningDb {
            path,
            entries: Vec::new(),
            index: HashMap::new(),
            families: HashMap::new(),
        };
        db.set_entries(entries);
        Ok(db)
    }

    /// Opens the database at [`TuningDb::default_path`].
    pub fn open_default() -> Result<TuningDb, DbError> {
        Self::open(Self::default_path()?)
    }

    fn read_entries(path: &Path) -> Result<Vec<DbEntry>, DbError> {
        match fs::read(path) {
            Ok(bytes) => decode(&bytes, path),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
            Err(e) => Err(io_err(path, "read")(e)),
        }
    }

    fn set_entries(&mut self, entries: Vec<DbEntry>) {
        self.index.clear();
        self.families.clear();
        let mut kept: Vec<DbEntry> = Vec::with_capacity(entries.len());
        for e in entries {
            if let Some(&i) = self.index.get(&e.key) {
                kept[i] = e; // a duplicate key: the later entry wins
            } else {
                self.index.insert(e.key.clone(), kept.len());
                kept.push(e);
            }
        }
        for (i, e) in kept.iter().enumerate() {
            self.families.entry(e.key.family()).or_default().push(i);
        }
        self.entries = kept;
    }

    /// The file this database reads and writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every entry of the snapshot.
    pub fn entries(&self) -> &[DbEntry] {
        &self.entries
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry for exactly `key`.
    pub fn get(&self, key: &TuneKey) -> Option<&DbEntry> {
        self.index.get(key).map(|&i| &self.entries[i])
    }

    /// Re-reads the file (picks up other processes' writes).
    pub fn reload(&mut self) -> Result<(), DbError> {
        let entries = Self::read_entries(&self.path)?;
        self.set_entries(entries);
        Ok(())
    }

    fn lock(&self) -> Result<LockGuard, DbError> {
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        fs::create_dir_all(dir).map_err(io_err(dir, "create directory"))?;
        let mut lock_path = self.path.clone().into_os_string();
        lock_path.push(".lock");
        let lock_path = PathBuf::from(lock_path);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path, "open lock file"))?;
        FileExt::lock_exclusive(&file).map_err(io_err(&lock_path, "lock"))?;
        Ok(LockGuard { file })
    }

    fn write_atomic(&self, entries: &[DbEntry]) -> Result<(), DbError> {
        let bytes = encode(entries)?;
        let dir = self
            .path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "tuning.db".into());
        let tmp = dir.join(format!(
            ".{name}.tmp.{}.{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let result = (|| {
            let mut f = File::create(&tmp).map_err(io_err(&tmp, "create temp file"))?;
            f.write_all(&bytes).map_err(io_err(&tmp, "write temp file"))?;
            f.sync_all().map_err(io_err(&tmp, "sync temp file"))?;
            fs::rename(&tmp, &self.path).map_err(io_err(&self.path, "rename temp file over"))
        })();
        if result.is_err() {
            let _ = fs::remove_file(&tmp);
        }
        result
    }

    /// Locked read-modify-write of the file; the snapshot becomes the written state.
    fn update<R>(&mut self, f: impl FnOnce(&mut Vec<DbEntry>) -> R) -> Result<R, DbError> {
        let _guard = self.lock()?;
        let mut entries = Self::read_entries(&self.path)?;
        let r = f(&mut entries);
        self.write_atomic(&entries)?;
        self.set_entries(entries);
        Ok(r)
    }

    /// Stores `entry`, replacing any entry with the same key (a new tuning run is authoritative).
    pub fn insert(&mut self, entry: DbEntry) -> Result<(), DbError> {
        self.update(|entries| match entries.iter().position(|e| e.key == entry.key) {
            Some(i) => entries[i] = entry,
            None => entries.push(entry),
        })
    }

    /// Removes the entry for `key`; true if there was one.
    pub fn remove(&mut self, key: &TuneKey) -> Result<bool, DbError> {
        self.update(|entries| {
            let before = entries.len();
            entries.retain(|e| &e.key != key);
            entries.len() != before
        })
    }

    /// Merges `incoming` under the sharing policy: new keys are added; on an existing key the
    /// faster winner is kept; entries with a non-finite winner time are refused.
    pub fn merge(&mut self, incoming: Vec<DbEntry>) -> Result<MergeReport, DbError> {
        self.update(|entries| {
            let mut report = MergeReport::default();
            let mut at: HashMap<TuneKey, usize> = entries.iter().enumerate().map(|(i, e)| (e.key.clone(), i)).collect();
            for e in incoming {
                if !(e.winner.stats.median_us.is_finite() && e.winner.stats.median_us >= 0.0) {
                    report.refused += 1;
                    continue;
                }
                match at.get(&e.key) {
                    None => {
                        at.insert(e.key.clone(), entries.len());
                        entries.push(e);
                        report.added += 1;
                    }
                    Some(&i) if e.winner.stats.median_us < entries[i].winner.stats.median_us => {
                        entries[i] = e;
                        report.replaced += 1;
                    }
                    Some(_) => report.kept += 1,
                }
            }
            report
        })
    }

    /// The snapshot as JSON, for sharing with other machines.
    pub fn export_json(&self) -> Result<String, DbError> {
        let export = DbExport {
            format: EXPORT_FORMAT.to_string(),
            version: FORMAT_VERSION,
            entries: self.entries.clone(),
        };
        serde_json::to_string_pretty(&export).map_err(|e| DbError::Json(e.to_string()))
    }

    /// Parses a JSON export and [`TuningDb::merge`]s it.
    pub fn import_json(&mut self, json: &str) -> Result<MergeReport, DbError> {
        let export: DbExport = serde_json::from_str(json).map_err(|e| DbError::Json(e.to_string()))?;
        if export.format != EXPORT_FORMAT {
            return Err(DbError::Json(format!(
                "format is `{}`, expected `{EXPORT_FORMAT}`",
                export.format
            )));
        }
        if export.version > FORMAT_VERSION {
            return Err(DbError::Json(format!(
                "export version {} is newer than {FORMAT_VERSION}",
                export.version
            )));
        }
        self.merge(export.entries)
    }

    /// The exact entry for `key`, else the entries of its family within `max_log2_distance`,
    /// nearest first (ties by shape), each with how it was found.
    pub fn candidates(&self, key: &TuneKey, max_log2_distance: f64) -> Vec<(&DbEntry, LookupSource)> {
        let mut out = Vec::new();
        if let Some(e) = self.get(key) {
            out.push((e, LookupSource::Exact));
        }
        let mut near: Vec<(f64, &DbEntry)> = self
            .families
            .get(&key.family())
            .into_iter()
            .flatten()
            .map(|&i| &self.entries[i])
            .filter(|e| e.key != *key)
            .filter_map(|e| shape_distance(&e.key.op.shape, &key.op.shape).map(|d| (d, e)))
            .filter(|(d, _)| *d <= max_log2_distance)
            .collect();
        near.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| a.1.key.op.shape.cmp(&b.1.key.op.shape))
        });
        for (distance, e) in near {
            out.push((
                e,
                LookupSource::NearestBucket {
                    from: e.key.op.shape.clone(),
                    distance,
                },
            ));
        }
        out
    }

    /// The config to launch `template` with on `problem` (see the module docs).
    pub fn lookup<T: Template>(
        &self,
        template: &T,
        problem: &T::Problem,
        arch: Arch,
        device: &DeviceKey,
        policy: &LookupPolicy,
    ) -> Result<Lookup<T::Config>, DbError>
    where
        T::Problem: ProblemSignature,
    {
        let key = TuneKey::new(template, problem, arch, device)?;
        let usable = |s: &StoredConfig| -> Option<T::Config> {
            let c: T::Config = serde_json::from_value(s.config.clone()).ok()?;
            template.check(problem, &c, arch).ok()?;
            if policy.check_fingerprints {
                let src = template.emit(problem, &c, arch).ok()?;
                if src.fingerprint().to_hex().as_str() != s.fingerprint {
                    return None;
                }
            }
            Some(c)
        };
        for (entry, source) in self.candidates(&key, policy.max_log2_distance) {
            let mut found: Vec<(T::Config, &TimingStats)> = Vec::new();
            for s in std::iter::once(&entry.winner).chain(&entry.runners_up) {
                if let Some(c) = usable(s) {
                    found.push((c, &s.stats));
                }
            }
            if found.is_empty() {
                tracing::warn!(entry = %entry.key, "tuning db entry has no config usable for {:?}; skipped", problem);
                continue;
            }
            let stats = Some(found[0].1.clone());
            let mut configs = found.into_iter().map(|(c, _)| c);
            let config = configs.next().expect("found is not empty");
            match &source {
                LookupSource::Exact => tracing::debug!(key = %key, "tuning db: exact entry"),
                LookupSource::NearestBucket { from, distance } => tracing::info!(
                    key = %key,
                    "tuning db: no entry for this shape; serving the nearest tuned shape {from:?} (log2 distance {distance:.2})"
                ),
                LookupSource::Default => {}
            }
            return Ok(Lookup {
                config,
                source,
                fallbacks: configs.collect(),
                stats,
            });
        }
        tracing::info!(key = %key, "tuning db: nothing tuned near this problem; serving the template's default config");
        Ok(Lookup {
            config: template.default_config(problem, arch),
            source: LookupSource::Default,
            fallbacks: Vec::new(),
            stats: None,
        })
    }
}

impl DbEntry {
    /// An entry from a finished tuning run: its winner plus up to `top_k` runners-up (verified
    /// configs ranked by final median), each with the fingerprint of its emitted source.
    pub fn from_outcome<T: Template>(
        template: &T,
        problem: &T::Problem,
        arch: Arch,
        device: &DeviceKey,
        outcome: &TuneOutcome<T::Config>,
        top_k: usize,
    ) -> Result<DbEntry, DbError>
    where
        T::Problem: ProblemSignature,
    {
        let key = TuneKey::new(template, problem, arch, device)?;
        let stored = |c: &T::Config, stats: &TimingStats| -> Result<StoredConfig, DbError> {
            let src = template.emit(problem, c, arch)?;
            let config = serde_json::to_value(c).map_err(|e| DbError::Outcome(e.to_string()))?;
            Ok(StoredConfig {
                config,
                fingerprint: src.fingerprint().to_hex().to_string(),
                stats: stats.clone(),
            })
        };
        let best_stats = outcome
            .best
            .final_stats()
            .ok_or_else(|| DbError::Outcome("the winner has no timing".into()))?;
        let winner = stored(&outcome.best.config, best_stats)?;
        let mut runners_up = Vec::new();
        for r in outcome
            .ranked()
            .into_iter()
            .filter(|r| r.config != outcome.best.config)
            .take(top_k)
        {
            if let Some(s) = r.final_stats() {
                runners_up.push(stored(&r.config, s)?);
            }
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Ok(DbEntry {
            key,
            winner,
            runners_up,
            meta: EntryMeta {
                created_unix_s: now,
                strategy: outcome.strategy.clone(),
                measured: outcome.measured as u32,
                failed: outcome.failed as u32,
                space: outcome.space as u32,
                tuner_version: env!("CARGO_PKG_VERSION").to_string(),
            },
        })
    }
}
