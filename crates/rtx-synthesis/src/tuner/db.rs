//! The persistent tuning database: winners keyed by [`TuneKey`] (operation signature, device,
//! target, template version and source fingerprint), with their timings and runners-up.
//!
//! On disk: the [`fsio::frame`] layout (an 8-byte magic, a little-endian `u32` format version,
//! the body length (`u64`), the blake3 hash of the body), then the body (bincode via serde).
//! Writes go to a temporary file in the same directory that is renamed over the old one, so a
//! reader sees the old or the new file, never half of one. Read-modify-write cycles hold an
//! exclusive `fs4` lock on `<db>.lock`, so several processes can insert at once without losing
//! each other's entries.
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
use crate::aot::fsio::{self, FrameError};
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
    Ok(fsio::frame(&MAGIC, FORMAT_VERSION, &body))
}

/// Decodes the on-disk format; `path` only names the file in errors.
pub fn decode(bytes: &[u8], path: &Path) -> Result<Vec<DbEntry>, DbError> {
    let corrupt = |reason: String| DbError::Corrupt {
        path: path.to_path_buf(),
        reason,
    };
    // Every version up to FORMAT_VERSION has this body so far.
    let (_version, body) =
        fsio::unframe_versions(&MAGIC, FORMAT_VERSION, bytes).map_err(|e| match e {
            FrameError::UnsupportedVersion { found, max } if found > max => DbError::NewerFormat {
                path: path.to_path_buf(),
                found,
                supported: FORMAT_VERSION,
            },
            FrameError::UnsupportedVersion { found, .. } => {
                corrupt(format!("format version {found}"))
            }
            FrameError::BadMagic { .. } => corrupt("missing RTXTUNE magic".into()),
            FrameError::TooShort { len } => corrupt(format!("truncated header ({len} bytes)")),
            FrameError::Length { declared, actual } => {
                corrupt(format!("body is {actual} bytes, header says {declared}"))
            }
            FrameError::Checksum => corrupt("checksum mismatch".into()),
            other @ FrameError::WrongVersion { .. } => corrupt(other.to_string()),
        })?;
    let (b, used): (DbBody, usize) =
        fsio::decode_body(body).map_err(|e| corrupt(format!("undecodable body: {e}")))?;
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
            f.write_all(&bytes)
                .map_err(io_err(&tmp, "write temp file"))?;
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
        self.update(
            |entries| match entries.iter().position(|e| e.key == entry.key) {
                Some(i) => entries[i] = entry,
                None => entries.push(entry),
            },
        )
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
            let mut at: HashMap<TuneKey, usize> = entries
                .iter()
                .enumerate()
                .map(|(i, e)| (e.key.clone(), i))
                .collect();
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
        let export: DbExport =
            serde_json::from_str(json).map_err(|e| DbError::Json(e.to_string()))?;
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
    pub fn candidates(
        &self,
        key: &TuneKey,
        max_log2_distance: f64,
    ) -> Vec<(&DbEntry, LookupSource)> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tuner::key::OpSignature;
    use crate::tuner::testing::{ToyConfig, ToyProblem, ToyTemplate};
    use proptest::prelude::*;
    use serde_json::json;

    fn stats(median: f64) -> TimingStats {
        TimingStats::from_samples(vec![median; 3]).unwrap()
    }

    fn device() -> DeviceKey {
        DeviceKey::new("NVIDIA H200", (9, 0), (13, 0))
    }

    fn stored(t: &ToyTemplate, p: &ToyProblem, id: u32, median: f64) -> StoredConfig {
        let c = ToyTemplate::config(id);
        let src = t.emit(p, &c, Arch::Sm90a).unwrap();
        StoredConfig {
            config: serde_json::to_value(&c).unwrap(),
            fingerprint: src.fingerprint().to_hex().to_string(),
            stats: stats(median),
        }
    }

    /// An entry for the toy template on `n`, winner `id`, runners-up `runners`.
    fn toy_entry(t: &ToyTemplate, n: u32, id: u32, runners: &[u32]) -> DbEntry {
        let p = ToyProblem { n };
        DbEntry {
            key: TuneKey::new(t, &p, Arch::Sm90a, &device()).unwrap(),
            winner: stored(t, &p, id, 10.0),
            runners_up: runners
                .iter()
                .map(|&r| stored(t, &p, r, 20.0 + r as f64))
                .collect(),
            meta: EntryMeta {
                created_unix_s: 1,
                strategy: "test".into(),
                measured: 3,
                failed: 0,
                space: n,
                tuner_version: "test".into(),
            },
        }
    }

    fn plain_entry(shape: Vec<u64>, median: f64, fingerprint: &str) -> DbEntry {
        DbEntry {
            key: TuneKey {
                op: OpSignature {
                    op: "gemm".into(),
                    dtypes: vec![],
                    layouts: vec![],
                    shape,
                    attrs: vec![],
                },
                device: device(),
                arch: Arch::Sm90a,
                template: "t".into(),
                template_version: 1,
                fingerprint: fingerprint.into(),
            },
            winner: StoredConfig {
                config: json!({"bm": 128}),
                fingerprint: "f".into(),
                stats: stats(median),
            },
            runners_up: vec![],
            meta: EntryMeta {
                created_unix_s: 0,
                strategy: String::new(),
                measured: 0,
                failed: 0,
                space: 0,
                tuner_version: String::new(),
            },
        }
    }

    fn lookup(db: &TuningDb, t: &ToyTemplate, n: u32) -> Lookup<ToyConfig> {
        db.lookup(
            t,
            &ToyProblem { n },
            Arch::Sm90a,
            &device(),
            &LookupPolicy::default(),
        )
        .unwrap()
    }

    /// The on-disk layout written out by hand: magic, version (LE), body length (LE), blake3.
    fn hand_framed(version: u32, body: &[u8]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&MAGIC);
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
        bytes.extend_from_slice(blake3::hash(body).as_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    /// The bincode body of `entries`, as written since format version 1.
    fn body_of(entries: &[DbEntry]) -> Vec<u8> {
        let body = DbBody {
            entries: entries.to_vec(),
        };
        bincode::serde::encode_to_vec(body, bincode::config::standard()).unwrap()
    }

    #[test]
    fn encode_writes_the_same_bytes_as_the_hand_written_frame() {
        let t = ToyTemplate::default();
        let sets = [
            vec![],
            vec![plain_entry(vec![64, 32], 1.5, "a")],
            vec![
                toy_entry(&t, 64, 5, &[6, 7]),
                toy_entry(&t, 128, 7, &[]),
                plain_entry(vec![1, 2, 3], 0.25, "b"),
            ],
        ];
        for entries in sets {
            let bytes = encode(&entries).unwrap();
            assert_eq!(bytes, hand_framed(FORMAT_VERSION, &body_of(&entries)));
            assert_eq!(&bytes[..12], b"RTXTUNE\0\x01\0\0\0");
            let len = (bytes.len() - 52) as u64;
            assert_eq!(bytes[12..20], len.to_le_bytes());
            assert_eq!(decode(&bytes, Path::new("mem")).unwrap(), entries);
        }
    }

    #[test]
    fn a_well_framed_body_declaring_a_huge_string_is_corrupt_not_an_abort() {
        // One entry whose first string claims 2^44 bytes, under a valid header and checksum.
        let mut body = vec![1u8];
        body.extend_from_slice(&crate::aot::fsio::tests::huge_string_prefix());
        let bytes = hand_framed(FORMAT_VERSION, &body);
        match decode(&bytes, Path::new("crafted.db")) {
            Err(DbError::Corrupt { reason, .. }) => {
                assert!(reason.contains("undecodable"), "{reason}")
            }
            other => panic!("expected Corrupt, got {other:?}"),
        }
    }

    #[test]
    fn a_missing_file_is_an_empty_db_and_inserts_persist() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join("tuning.db");
        let mut db = TuningDb::open(&path).unwrap();
        assert!(db.is_empty());
        let t = ToyTemplate::default();
        db.insert(toy_entry(&t, 64, 5, &[6])).unwrap();
        db.insert(toy_entry(&t, 128, 7, &[])).unwrap();
        db.insert(toy_entry(&t, 64, 9, &[])).unwrap(); // same key: replaced
        let again = TuningDb::open(&path).unwrap();
        assert_eq!(again.len(), 2);
        assert_eq!(again.entries(), db.entries());
        let leftovers: Vec<_> = fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".tmp."))
            .collect();
        assert!(leftovers.is_empty(), "temp files left: {leftovers:?}");
        let key = TuneKey::new(&t, &ToyProblem { n: 64 }, Arch::Sm90a, &device()).unwrap();
        assert_eq!(again.get(&key).unwrap().winner.config["id"], json!(9));
        let mut db = again;
        assert!(db.remove(&key).unwrap());
        assert!(!db.remove(&key).unwrap());
        assert_eq!(TuningDb::open(&path).unwrap().len(), 1);
    }

    #[test]
    fn damaged_files_are_refused_not_clobbered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tuning.db");
        let good = encode(&[plain_entry(vec![1], 1.0, "a")]).unwrap();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not a database".to_vec(), "magic"),
            (good[..30].to_vec(), "truncated"),
            (
                {
                    let mut b = good.clone();
                    let last = b.len() - 1;
                    b[last] ^= 0xff;
                    b
                },
                "checksum",
            ),
            (
                {
                    let mut b = good.clone();
                    b.push(0);
                    b
                },
                "body is",
            ),
            (good[..good.len() - 1].to_vec(), "body is"),
            (good[..10].to_vec(), "truncated header (10 bytes)"),
            (Vec::new(), "truncated header (0 bytes)"),
            (
                {
                    let mut b = good.clone();
                    b[8..12].copy_from_slice(&0u32.to_le_bytes());
                    b
                },
                "format version 0",
            ),
            (
                {
                    let mut body = body_of(&[plain_entry(vec![1], 1.0, "a")]);
                    body.extend_from_slice(&[0, 0]);
                    hand_framed(FORMAT_VERSION, &body)
                },
                "2 trailing bytes",
            ),
        ];
        for (bytes, what) in cases {
            fs::write(&path, &bytes).unwrap();
            match TuningDb::open(&path) {
                Err(DbError::Corrupt { reason, .. }) => {
                    assert!(reason.contains(what), "{what}: {reason}")
                }
                other => panic!("{what}: expected Corrupt, got {other:?}"),
            }
            let mut db = TuningDb {
                path: path.clone(),
                entries: vec![],
                index: HashMap::new(),
                families: HashMap::new(),
            };
            assert!(
                db.insert(plain_entry(vec![2], 1.0, "a")).is_err(),
                "{what}: an insert must not overwrite it"
            );
            assert_eq!(fs::read(&path).unwrap(), bytes);
        }
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        fs::write(&path, &newer).unwrap();
        assert!(
            matches!(TuningDb::open(&path), Err(DbError::NewerFormat { found, .. }) if found == FORMAT_VERSION + 1)
        );
        // The version is read before the rest of the header: a newer file is never "truncated".
        assert!(matches!(
            decode(&newer[..20], &path),
            Err(DbError::NewerFormat { found, supported, .. })
                if found == FORMAT_VERSION + 1 && supported == FORMAT_VERSION
        ));
    }

    #[test]
    fn json_merge_keeps_the_faster_and_never_mixes_fingerprints() {
        let dir = tempfile::tempdir().unwrap();
        let mut a = TuningDb::open(dir.path().join("a.db")).unwrap();
        a.merge(vec![
            plain_entry(vec![64], 10.0, "fp1"),
            plain_entry(vec![128], 10.0, "fp1"),
        ])
        .unwrap();
        let mut b = TuningDb::open(dir.path().join("b.db")).unwrap();
        b.merge(vec![
            plain_entry(vec![64], 8.0, "fp1"),   // same key, faster: replaces
            plain_entry(vec![128], 12.0, "fp1"), // same key, slower: kept out
            plain_entry(vec![64], 1.0, "fp2"),   // other fingerprint: its own key
            {
                let mut e = plain_entry(vec![256], 1.0, "fp1");
                e.winner.stats.median_us = f64::NAN;
                e
            },
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.len(), 3, "the NaN entry is refused");
        let report = a.import_json(&b.export_json().unwrap()).unwrap();
        assert_eq!(
            report,
            MergeReport {
                added: 1,
                replaced: 1,
                kept: 1,
                refused: 0
            }
        );
        let med = |db: &TuningDb, shape: u64, fp: &str| {
            db.get(&plain_entry(vec![shape], 0.0, fp).key)
                .map(|e| e.winner.stats.median_us)
        };
        assert_eq!(med(&a, 64, "fp1"), Some(8.0));
        assert_eq!(med(&a, 128, "fp1"), Some(10.0));
        assert_eq!(med(&a, 64, "fp2"), Some(1.0));
        let reread = TuningDb::open(dir.path().join("a.db")).unwrap();
        assert_eq!(reread.len(), 3);
        assert!(matches!(
            a.import_json("{\"format\": \"other\", \"version\": 1, \"entries\": []}"),
            Err(DbError::Json(_))
        ));
        assert!(matches!(a.import_json("[1, 2]"), Err(DbError::Json(_))));
    }

    #[test]
    fn exports_show_configs_as_json_objects() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
        db.merge(vec![plain_entry(vec![64], 10.0, "fp1")]).unwrap();
        let v: Value = serde_json::from_str(&db.export_json().unwrap()).unwrap();
        assert_eq!(v["format"], json!(EXPORT_FORMAT));
        assert_eq!(
            v["entries"][0]["winner"]["config"],
            json!({"bm": 128}),
            "a readable object, not a string"
        );
    }

    #[test]
    fn lookup_serves_exact_then_nearest_then_default() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
        let t = ToyTemplate::default();
        db.insert(toy_entry(&t, 64, 5, &[6, 2])).unwrap();
        db.insert(toy_entry(&t, 1024, 7, &[])).unwrap();

        let exact = lookup(&db, &t, 64);
        assert_eq!(exact.source, LookupSource::Exact);
        assert_eq!(exact.config.id, 5);
        assert_eq!(
            exact.fallbacks.iter().map(|c| c.id).collect::<Vec<_>>(),
            vec![6, 2]
        );
        assert_eq!(exact.stats.unwrap().median_us, 10.0);

        let near = lookup(&db, &t, 100);
        match &near.source {
            LookupSource::NearestBucket { from, distance } => {
                assert_eq!(from, &vec![64]);
                assert!(
                    (distance - (100f64 / 64.0).log2()).abs() < 1e-12,
                    "{distance}"
                );
            }
            other => panic!("expected the nearest bucket, got {other:?}"),
        }
        assert_eq!(near.config.id, 5);

        let near_big = lookup(&db, &t, 900);
        assert!(
            matches!(near_big.source, LookupSource::NearestBucket { ref from, .. } if from == &vec![1024])
        );

        // 2^20 is 10 octaves from 1024: beyond the default 4.0 cap.
        let far = lookup(&db, &t, 1 << 20);
        assert_eq!(far.source, LookupSource::Default);
        assert_eq!(far.config, ToyTemplate::config(0));
        assert!(far.fallbacks.is_empty() && far.stats.is_none());

        let other_gpu = db
            .lookup(
                &t,
                &ToyProblem { n: 64 },
                Arch::Sm90a,
                &DeviceKey::new("NVIDIA H100", (9, 0), (13, 0)),
                &LookupPolicy::default(),
            )
            .unwrap();
        assert_eq!(
            other_gpu.source,
            LookupSource::Default,
            "never served another GPU's winner"
        );
        let other_arch = db
            .lookup(
                &t,
                &ToyProblem { n: 64 },
                Arch::Sm90,
                &device(),
                &LookupPolicy::default(),
            )
            .unwrap();
        assert_eq!(other_arch.source, LookupSource::Default);
    }

    #[test]
    fn a_changed_template_is_never_served_a_stale_winner() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
        let t = ToyTemplate::default();
        db.insert(toy_entry(&t, 64, 5, &[])).unwrap();
        // Same name and version, different generated code: the fingerprint differs.
        let changed = ToyTemplate {
            code_salt: " // v1.1".into(),
            ..Default::default()
        };
        assert_eq!(lookup(&db, &changed, 64).source, LookupSource::Default);
        let bumped = ToyTemplate {
            version: 2,
            ..Default::default()
        };
        assert_eq!(lookup(&db, &bumped, 64).source, LookupSource::Default);
        assert_eq!(lookup(&db, &t, 64).source, LookupSource::Exact);
    }

    #[test]
    fn served_configs_are_rechecked_and_fall_back_to_runners_up() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = TuningDb::open(dir.path().join("t.db")).unwrap();
        let t = ToyTemplate::default();
        // Tuned at n=64 with winner id 50: invalid for n=40 (ids must be < n), runner-up 3 is fine.
        db.insert(toy_entry(&t, 64, 50, &[3])).unwrap();
        let l = lookup(&db, &t, 40);
        assert!(matches!(l.source, LookupSource::NearestBucket { .. }));
        assert_eq!(l.config.id, 3);
        assert_eq!(l.stats.unwrap().median_us, 23.0);

        // A winner whose stored fingerprint no longer matches its emitted code is skipped.
        let mut e = toy_entry(&t, 64, 5, &[6]);
        e.winner.fingerprint = "0".repeat(64);
        db.insert(e).unwrap();
        let l = lookup(&db, &t, 64);
        assert_eq!((l.source, l.config.id), (LookupSource::Exact, 6));
        let lax = db
            .lookup(
                &t,
                &ToyProblem { n: 64 },
                Arch::Sm90a,
                &device(),
                &LookupPolicy {
                    check_fingerprints: false,
                    ..Default::default()
                },
            )
            .unwrap();
        assert_eq!(lax.config.id, 5);
    }

    #[test]
    fn default_path_honours_rtx_cache_dir() {
        // Only reads the variable when set by the environment; no mutation of the process env.
        let p = TuningDb::default_path();
        match std::env::var_os("RTX_CACHE_DIR").filter(|d| !d.is_empty()) {
            Some(d) => assert_eq!(p.unwrap(), PathBuf::from(d).join("tuning.db")),
            None => {
                if let Ok(p) = p {
                    assert!(p.ends_with("rtx/tuning.db"), "{}", p.display());
                }
            }
        }
    }

    #[test]
    fn shape_distance_is_log2() {
        assert_eq!(shape_distance(&[64, 64], &[128, 32]), Some(2.0));
        assert_eq!(shape_distance(&[64], &[64, 1]), None);
        assert_eq!(shape_distance(&[0], &[1]), None);
    }

    fn arb_entry() -> impl Strategy<Value = DbEntry> {
        (
            proptest::collection::vec(1u64..1 << 20, 0..5),
            0.0f64..1e6,
            "[a-z0-9]{0,16}",
            proptest::collection::vec(("[a-z]{1,6}", "[a-z0-9]{0,6}"), 0..4),
            proptest::collection::vec(0.0f64..1e4, 1..8),
            0u32..9,
        )
            .prop_map(|(shape, median, fp, attrs, samples, n_runners)| {
                let mut e = plain_entry(shape, median, &fp);
                e.key.op.attrs = attrs;
                e.winner.stats = TimingStats::from_samples(samples).unwrap();
                e.winner.config = json!({"fp": fp, "nested": {"x": median, "list": [1, 2, 3]}});
                e.runners_up = (0..n_runners)
                    .map(|i| StoredConfig {
                        config: json!(i),
                        ..e.winner.clone()
                    })
                    .collect();
                e
            })
    }

    proptest! {
        #[test]
        fn the_on_disk_format_round_trips(entries in proptest::collection::vec(arb_entry(), 0..6)) {
            let bytes = encode(&entries).unwrap();
            prop_assert_eq!(&bytes[..8], &MAGIC);
            let back = decode(&bytes, Path::new("mem")).unwrap();
            prop_assert_eq!(back, entries);
        }

        #[test]
        fn any_single_byte_flip_is_detected(entries in proptest::collection::vec(arb_entry(), 1..3), pos in any::<usize>(), bit in 0u8..8) {
            let mut bytes = encode(&entries).unwrap();
            let i = pos % bytes.len();
            bytes[i] ^= 1 << bit;
            // A flip in the version field may read as a newer format; everything else is corrupt.
            prop_assert!(decode(&bytes, Path::new("mem")).is_err());
        }
    }
}
