//! Content-addressed on-disk cache of compiled kernels.
//!
//! Key: blake3 of ([`KernelSource::fingerprint`], the full NVRTC option list, the architecture,
//! the NVRTC version, the template version). One file per key, `<key hex>.rtxk`, holding a
//! [`fsio`] frame (magic `RTXKERN\0`, [`ENTRY_FORMAT_VERSION`], body length, body blake3) around a
//! bincode-encoded [`CacheEntry`] that carries its own blake3 of the cubin.
//!
//! Writes are atomic (temp file + fsync + rename), so several processes filling one cache at once
//! only ever race to replace a complete, valid file with an identical one. A file that fails any
//! check (header, length, checksum, decode, cubin checksum, key) is reported with
//! `tracing::warn`, counted in [`CacheStats::corrupt_discarded`], never returned, and rebuilt.
//!
//! Hit/miss counters are kept per handle and merged into `stats.json` (under an exclusive file
//! lock) when the handle is dropped or [`KernelCache::flush_stats`] is called, so `cache stats`
//! can report lifetime totals.

use super::fsio::{self, FrameError};
use super::nvrtc::{compile, options_for, CompileError, Compiled};
use super::parallel::compile_many_refs;
use super::resources::ResourceUsage;
use super::toolchain::{Toolchain, ToolchainError};
use crate::templates::KernelSource;
use crate::Arch;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// Magic bytes at the start of every cache entry file.
pub const ENTRY_MAGIC: [u8; 8] = *b"RTXKERN\0";
/// Version of the entry file format; bump on any change to [`CacheEntry`] or the key.
pub const ENTRY_FORMAT_VERSION: u32 = 1;
/// File extension of cache entries.
pub const ENTRY_EXT: &str = "rtxk";
const STATS_FILE: &str = "stats.json";
const STATS_LOCK: &str = "stats.lock";
/// Temp files older than this are leftovers of a crashed writer.
const STALE_TEMP_AGE: Duration = Duration::from_secs(3600);

/// The cache key of `src` compiled for `arch` with `options` by NVRTC `nvrtc_version`.
pub fn cache_key_with(
    src: &KernelSource,
    arch: Arch,
    options: &[String],
    nvrtc_version: (i32, i32),
) -> blake3::Hash {
    let mut h = blake3::Hasher::new();
    h.update(b"rtx-kernel-cache-key\0");
    h.update(&ENTRY_FORMAT_VERSION.to_le_bytes());
    h.update(src.fingerprint().as_bytes());
    h.update(&(options.len() as u64).to_le_bytes());
    for o in options {
        h.update(&(o.len() as u64).to_le_bytes());
        h.update(o.as_bytes());
    }
    let sm = arch.sm_name();
    h.update(&(sm.len() as u64).to_le_bytes());
    h.update(sm.as_bytes());
    h.update(&nvrtc_version.0.to_le_bytes());
    h.update(&nvrtc_version.1.to_le_bytes());
    h.update(&src.template_version.to_le_bytes());
    h.finalize()
}

/// The cache key of `src` for `arch` with this machine's toolchain (needs NVRTC loadable, but
/// makes no NVRTC compile). The option list includes the CUDA include folder, so a cache copied
/// to a machine whose headers live elsewhere misses (use a [`crate::aot::Bundle`] to ship binaries).
pub fn cache_key(src: &KernelSource, arch: Arch) -> Result<blake3::Hash, ToolchainError> {
    let tc = Toolchain::get()?;
    Ok(cache_key_with(
        src,
        arch,
        &options_for(src, arch, tc),
        tc.nvrtc_version,
    ))
}

/// `Vec<u8>` as one serde byte string (bincode writes length + raw bytes, not one item per byte).
mod byte_vec {
    use serde::{de, Deserializer, Serializer};
    use std::fmt;

    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    struct V;
    impl<'de> de::Visitor<'de> for V {
        type Value = Vec<u8>;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a byte string")
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
            Ok(v.to_vec())
        }
        fn visit_byte_buf<E: de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(v)
        }
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<u8>, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1 << 20));
            while let Some(b) = seq.next_element()? {
                out.push(b);
            }
            Ok(out)
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        d.deserialize_byte_buf(V)
    }
}

/// The decoded body of one cache entry file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheEntry {
    /// The cache key (must match the file name).
    pub key: [u8; 32],
    /// Entry point.
    pub entry: String,
    /// Template that generated the source.
    pub template: String,
    /// Its version.
    pub template_version: u32,
    /// [`KernelSource::fingerprint`] of the source.
    pub fingerprint: [u8; 32],
    /// Target.
    pub arch: Arch,
    /// NVRTC `(major, minor)` that compiled it.
    pub nvrtc_version: (i32, i32),
    /// The full NVRTC option list.
    pub options: Vec<String>,
    /// When it was written, Unix seconds.
    pub created: u64,
    /// The cubin.
    #[serde(with = "byte_vec")]
    pub cubin: Vec<u8>,
    /// blake3 of [`CacheEntry::cubin`].
    pub cubin_blake3: [u8; 32],
    /// ptxas' per-function resource report.
    pub resources: Vec<ResourceUsage>,
    /// NVRTC's program log.
    pub log: String,
}

/// Why bytes are not a valid cache entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    /// Header, length or body checksum failed.
    #[error("bad frame: {0}")]
    Frame(#[from] FrameError),
    /// The body did not decode.
    #[error("body does not decode: {0}")]
    Decode(String),
    /// The body decoded but left bytes over.
    #[error("{0} trailing bytes after the body")]
    Trailing(usize),
    /// The cubin does not match its checksum.
    #[error("cubin checksum mismatch")]
    CubinChecksum,
    /// The entry is for a different key than the file name says.
    #[error("entry is for key {found}, expected {expected}")]
    KeyMismatch {
        /// Key inside the entry.
        found: String,
        /// Key of the file.
        expected: String,
    },
    /// The entry could not be encoded (never expected for well-formed entries).
    #[error("entry does not encode: {0}")]
    Encode(String),
}

impl CacheEntry {
    /// Builds the entry for `compiled` (from `src` with `options`) under `key`.
    pub fn new(
        key: blake3::Hash,
        src: &KernelSource,
        options: &[String],
        compiled: &Compiled,
    ) -> Self {
        CacheEntry {
            key: *key.as_bytes(),
            entry: src.entry.clone(),
            template: src.template.clone(),
            template_version: src.template_version,
            fingerprint: *src.fingerprint().as_bytes(),
            arch: compiled.arch,
            nvrtc_version: compiled.nvrtc_version,
            options: options.to_vec(),
            created: fsio::unix_now(),
            cubin: compiled.cubin.clone(),
            cubin_blake3: *blake3::hash(&compiled.cubin).as_bytes(),
            resources: compiled.resources.clone(),
            log: compiled.log.clone(),
        }
    }

    /// The file bytes: framed, bincode-encoded body.
    pub fn encode(&self) -> Result<Vec<u8>, EntryError> {
        let body = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|e| EntryError::Encode(e.to_string()))?;
        Ok(fsio::frame(&ENTRY_MAGIC, ENTRY_FORMAT_VERSION, &body))
    }

    /// Decodes and fully verifies file bytes (frame, body, cubin checksum).
    pub fn decode(bytes: &[u8]) -> Result<Self, EntryError> {
        let body = fsio::unframe(&ENTRY_MAGIC, ENTRY_FORMAT_VERSION, bytes)?;
        let (e, used): (CacheEntry, usize) =
            fsio::decode_body(body).map_err(|e| EntryError::Decode(e.to_string()))?;
        if used != body.len() {
            return Err(EntryError::Trailing(body.len() - used));
        }
        if blake3::hash(&e.cubin) != blake3::Hash::from_bytes(e.cubin_blake3) {
            return Err(EntryError::CubinChecksum);
        }
        Ok(e)
    }

    /// [`CacheEntry::decode`], also checking that the entry belongs to `key`.
    pub fn decode_for(bytes: &[u8], key: &blake3::Hash) -> Result<Self, EntryError> {
        let e = Self::decode(bytes)?;
        if e.key != *key.as_bytes() {
            return Err(EntryError::KeyMismatch {
                found: blake3::Hash::from_bytes(e.key).to_hex().to_string(),
                expected: key.to_hex().to_string(),
            });
        }
        Ok(e)
    }
}

/// A kernel binary from the cache (or just compiled into it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedKernel {
    /// Its cache key.
    pub key: blake3::Hash,
    /// Entry point.
    pub entry: String,
    /// Target.
    pub arch: Arch,
    /// The cubin.
    pub cubin: Vec<u8>,
    /// ptxas' per-function resource report.
    pub resources: Vec<ResourceUsage>,
    /// NVRTC's program log from the original compile.
    pub log: String,
    /// NVRTC `(major, minor)` that compiled it.
    pub nvrtc_version: (i32, i32),
    /// `true` when it came from disk without compiling.
    pub hit: bool,
}

impl CachedKernel {
    /// The resource report of the function named `entry`, if ptxas reported one.
    pub fn resources_for(&self, entry: &str) -> Option<&ResourceUsage> {
        self.resources.iter().find(|r| r.function == entry)
    }

    /// `entry`'s ptxas report as a [`crate::aot::ResourceReport`], or why the stored log has none.
    pub fn ptxas_report(
        &self,
        entry: &str,
    ) -> Result<crate::aot::ResourceReport, crate::aot::MissingPtxasReport> {
        crate::aot::ptxas_report_in(&self.resources, entry, &self.log)
    }

    fn from_entry(key: blake3::Hash, e: CacheEntry, hit: bool) -> Self {
        CachedKernel {
            key,
            entry: e.entry,
            arch: e.arch,
            cubin: e.cubin,
            resources: e.resources,
            log: e.log,
            nvrtc_version: e.nvrtc_version,
            hit,
        }
    }

    fn from_compiled(key: blake3::Hash, entry: &str, c: Compiled) -> Self {
        CachedKernel {
            key,
            entry: entry.to_string(),
            arch: c.arch,
            cubin: c.cubin,
            resources: c.resources,
            log: c.log,
            nvrtc_version: c.nvrtc_version,
            hit: false,
        }
    }
}

/// One entry as listed by [`KernelCache::list`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EntryInfo {
    /// Cache key (`key.to_hex()` is the file stem).
    #[serde(serialize_with = "hex_key")]
    pub key: blake3::Hash,
    /// Entry point.
    pub entry: String,
    /// Template that generated it.
    pub template: String,
    /// Target.
    pub arch: Arch,
    /// Size of the entry file.
    pub bytes: u64,
    /// When it was written, Unix seconds.
    pub created: u64,
}

fn hex_key<S: serde::Serializer>(k: &blake3::Hash, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(k.to_hex().as_str())
}

/// Hit/miss/corruption counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheCounters {
    /// Lookups served from disk.
    pub hits: u64,
    /// Lookups that had to compile.
    pub misses: u64,
    /// Entry files that failed verification and were discarded.
    pub corrupt_discarded: u64,
    /// Compiled kernels that could not be written to disk.
    pub write_failures: u64,
}

impl CacheCounters {
    /// Saturating: `stats.json` is user-editable, so a stored count may be near `u64::MAX`.
    fn add(self, o: CacheCounters) -> CacheCounters {
        CacheCounters {
            hits: self.hits.saturating_add(o.hits),
            misses: self.misses.saturating_add(o.misses),
            corrupt_discarded: self.corrupt_discarded.saturating_add(o.corrupt_discarded),
            write_failures: self.write_failures.saturating_add(o.write_failures),
        }
    }
    fn sub(self, o: CacheCounters) -> CacheCounters {
        CacheCounters {
            hits: self.hits.saturating_sub(o.hits),
            misses: self.misses.saturating_sub(o.misses),
            corrupt_discarded: self.corrupt_discarded.saturating_sub(o.corrupt_discarded),
            write_failures: self.write_failures.saturating_sub(o.write_failures),
        }
    }
}

/// What [`KernelCache::stats`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Entry files in the cache folder.
    pub entries: u64,
    /// Their total size in bytes.
    pub bytes: u64,
    /// Lifetime hits (all processes, including this handle's not yet flushed).
    pub hits: u64,
    /// Lifetime misses.
    pub misses: u64,
    /// Lifetime corrupt entries discarded.
    pub corrupt_discarded: u64,
    /// Lifetime failed writes.
    pub write_failures: u64,
    /// The counts of this handle alone.
    pub session: CacheCounters,
}

/// Why a cache operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// Neither `RTX_CACHE_DIR` nor a platform cache folder is available.
    #[error("no cache folder: set RTX_CACHE_DIR")]
    NoCacheDir,
    /// A filesystem operation failed.
    #[error("cache I/O on {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// NVRTC or the headers are missing (needed to compute keys and to compile).
    #[error(transparent)]
    Toolchain(#[from] ToolchainError),
    /// The kernel did not compile (boxed: it carries the log and the source).
    #[error(transparent)]
    Compile(Box<CompileError>),
    /// An entry could not be encoded.
    #[error("cache entry: {0}")]
    Entry(#[from] EntryError),
}

impl From<CompileError> for CacheError {
    fn from(e: CompileError) -> Self {
        CacheError::Compile(Box::new(e))
    }
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> CacheError + '_ {
    move |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    }
}

#[derive(Default)]
struct AtomicCounters {
    hits: AtomicU64,
    misses: AtomicU64,
    corrupt_discarded: AtomicU64,
    write_failures: AtomicU64,
}

impl AtomicCounters {
    fn snapshot(&self) -> CacheCounters {
        CacheCounters {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            corrupt_discarded: self.corrupt_discarded.load(Ordering::Relaxed),
            write_failures: self.write_failures.load(Ordering::Relaxed),
        }
    }
}

/// What a lookup found on disk.
enum Lookup {
    Hit(CachedKernel),
    Missing,
    /// A file was there but failed verification (already reported and counted).
    Corrupt(PathBuf),
}

/// A handle on one cache folder. Cheap to share across threads (`&KernelCache` is `Sync`).
pub struct KernelCache {
    dir: PathBuf,
    session: AtomicCounters,
    flushed: Mutex<CacheCounters>,
}

impl std::fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelCache")
            .field("dir", &self.dir)
            .field("session", &self.session.snapshot())
            .finish()
    }
}

impl KernelCache {
    /// The default folder: `$RTX_CACHE_DIR/kernels`, else the platform cache folder + `rtx/kernels`.
    pub fn default_dir() -> Result<PathBuf, CacheError> {
        fsio::cache_root()
            .map(|r| r.join("kernels"))
            .ok_or(CacheError::NoCacheDir)
    }

    /// Opens (creating if needed) the cache in [`KernelCache::default_dir`].
    pub fn open_default() -> Result<KernelCache, CacheError> {
        Self::open(Self::default_dir()?)
    }

    /// Opens (creating if needed) the cache in `dir`; removes temp files crashed writers left.
    pub fn open(dir: impl Into<PathBuf>) -> Result<KernelCache, CacheError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let stale = fsio::remove_stale_temps(&dir, STALE_TEMP_AGE);
        if stale > 0 {
            tracing::debug!(dir = %dir.display(), stale, "removed stale temp files");
        }
        Ok(KernelCache {
            dir,
            session: AtomicCounters::default(),
            flushed: Mutex::new(CacheCounters::default()),
        })
    }

    /// The cache folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The entry file path for `key`.
    pub fn entry_path(&self, key: &blake3::Hash) -> PathBuf {
        self.dir.join(format!("{}.{ENTRY_EXT}", key.to_hex()))
    }

    fn lookup(&self, key: &blake3::Hash, src: &KernelSource, arch: Arch) -> Lookup {
        let path = self.entry_path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Lookup::Missing,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cache entry unreadable; recompiling");
                return Lookup::Missing;
            }
        };
        let checked = CacheEntry::decode_for(&bytes, key).and_then(|e| {
            if e.arch != arch
                || e.entry != src.entry
                || e.fingerprint != *src.fingerprint().as_bytes()
            {
                Err(EntryError::KeyMismatch {
                    found: format!("{} for {}", e.entry, e.arch),
                    expected: format!("{} for {arch}", src.entry),
                })
            } else {
                Ok(e)
            }
        });
        match checked {
            Ok(e) => Lookup::Hit(CachedKernel::from_entry(*key, e, true)),
            Err(err) => {
                self.session
                    .corrupt_discarded
                    .fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %path.display(), error = %err, entry = %src.entry, "discarding corrupt cache entry");
                Lookup::Corrupt(path)
            }
        }
    }

    /// Looks `src` for `arch` up without compiling; `Ok(None)` on a miss (or a discarded corrupt
    /// entry). Counts a hit, not a miss.
    pub fn get(&self, src: &KernelSource, arch: Arch) -> Result<Option<CachedKernel>, CacheError> {
        let key = cache_key(src, arch)?;
        Ok(match self.lookup(&key, src, arch) {
            Lookup::Hit(k) => {
                self.session.hits.fetch_add(1, Ordering::Relaxed);
                Some(k)
            }
            Lookup::Missing => None,
            Lookup::Corrupt(path) => {
                let _ = fs::remove_file(path);
                None
            }
        })
    }

    /// Writes `compiled` (built from `src`) under its key, replacing any entry atomically.
    pub fn insert(
        &self,
        src: &KernelSource,
        compiled: &Compiled,
    ) -> Result<blake3::Hash, CacheError> {
        let tc = Toolchain::get()?;
        let options = options_for(src, compiled.arch, tc);
        let key = cache_key_with(src, compiled.arch, &options, tc.nvrtc_version);
        let bytes = CacheEntry::new(key, src, &options, compiled).encode()?;
        let path = self.entry_path(&key);
        fsio::write_atomic(&path, &bytes).map_err(io_err(&path))?;
        Ok(key)
    }

    /// Stores a fresh compile; a failed write is counted and logged, not returned (the kernel is
    /// still usable, only the next process will recompile it).
    fn store(&self, src: &KernelSource, compiled: &Compiled) {
        if let Err(e) = self.insert(src, compiled) {
            self.session.write_failures.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(entry = %src.entry, error = %e, "could not write cache entry");
        }
    }

    /// The cached binary of `src` for `arch`, compiling (one NVRTC call) and storing it on a miss.
    pub fn get_or_compile(
        &self,
        src: &KernelSource,
        arch: Arch,
    ) -> Result<CachedKernel, CacheError> {
        let key = cache_key(src, arch)?;
        let corrupt = match self.lookup(&key, src, arch) {
            Lookup::Hit(k) => {
                self.session.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(k);
            }
            Lookup::Missing => None,
            Lookup::Corrupt(p) => Some(p),
        };
        self.session.misses.fetch_add(1, Ordering::Relaxed);
        match compile(src, arch) {
            Ok(c) => {
                self.store(src, &c);
                Ok(CachedKernel::from_compiled(key, &src.entry, c))
            }
            Err(e) => {
                if let Some(p) = corrupt {
                    let _ = fs::remove_file(p);
                }
                Err(e.into())
            }
        }
    }

    /// [`KernelCache::get_or_compile`] for many kernels: hits are read from disk, the misses are
    /// compiled in parallel with at most `jobs` NVRTC instances (`None`: the default bound).
    /// Duplicate `(source, arch)` pairs are compiled once. Results are in input order.
    pub fn get_or_compile_many(
        &self,
        items: &[(KernelSource, Arch)],
        jobs: Option<usize>,
    ) -> Vec<Result<CachedKernel, CacheError>> {
        enum Slot {
            Done(Result<CachedKernel, CacheError>),
            Job(usize),
        }
        struct Job<'a> {
            src: &'a KernelSource,
            arch: Arch,
            key: blake3::Hash,
            corrupt: Option<PathBuf>,
        }
        let mut jobs_list: Vec<Job<'_>> = Vec::new();
        let mut job_of_key: HashMap<blake3::Hash, usize> = HashMap::new();
        let mut slots = Vec::with_capacity(items.len());
        for (src, arch) in items {
            let key = match cache_key(src, *arch) {
                Ok(k) => k,
                Err(e) => {
                    slots.push(Slot::Done(Err(e.into())));
                    continue;
                }
            };
            if let Some(&j) = job_of_key.get(&key) {
                slots.push(Slot::Job(j));
                continue;
            }
            let corrupt = match self.lookup(&key, src, *arch) {
                Lookup::Hit(k) => {
                    self.session.hits.fetch_add(1, Ordering::Relaxed);
                    slots.push(Slot::Done(Ok(k)));
                    continue;
                }
                Lookup::Missing => None,
                Lookup::Corrupt(p) => Some(p),
            };
            self.session.misses.fetch_add(1, Ordering::Relaxed);
            job_of_key.insert(key, jobs_list.len());
            slots.push(Slot::Job(jobs_list.len()));
            jobs_list.push(Job {
                src,
                arch: *arch,
                key,
                corrupt,
            });
        }
        let refs: Vec<(&KernelSource, Arch)> = jobs_list.iter().map(|j| (j.src, j.arch)).collect();
        let done: Vec<Result<CachedKernel, CompileError>> = compile_many_refs(&refs, jobs)
            .into_iter()
            .zip(&jobs_list)
            .map(|(r, job)| match r {
                Ok(c) => {
                    self.store(job.src, &c);
                    Ok(CachedKernel::from_compiled(job.key, &job.src.entry, c))
                }
                Err(e) => {
                    if let Some(p) = &job.corrupt {
                        let _ = fs::remove_file(p);
                    }
                    Err(e)
                }
            })
            .collect();
        slots
            .into_iter()
            .map(|slot| match slot {
                Slot::Done(r) => r,
                Slot::Job(j) => done[j].clone().map_err(CacheError::from),
            })
            .collect()
    }

    /// Every valid entry, oldest first. Files that fail verification are skipped with a warning.
    pub fn list(&self) -> Result<Vec<EntryInfo>, CacheError> {
        let mut out = Vec::new();
        for (path, key) in self.entry_files()? {
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cache entry unreadable");
                    continue;
                }
            };
            match CacheEntry::decode_for(&bytes, &key) {
                Ok(e) => out.push(EntryInfo {
                    key,
                    entry: e.entry,
                    template: e.template,
                    arch: e.arch,
                    bytes: bytes.len() as u64,
                    created: e.created,
                }),
                Err(err) => {
                    tracing::warn!(path = %path.display(), error = %err, "skipping corrupt cache entry")
                }
            }
        }
        out.sort_by(|a, b| (a.created, a.key.as_bytes()).cmp(&(b.created, b.key.as_bytes())));
        Ok(out)
    }

    /// `(path, key)` of every file named like an entry.
    fn entry_files(&self) -> Result<Vec<(PathBuf, blake3::Hash)>, CacheError> {
        let mut out = Vec::new();
        for e in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let e = e.map_err(io_err(&self.dir))?;
            let path = e.path();
            if path.extension().and_then(|x| x.to_str()) != Some(ENTRY_EXT) {
                continue;
            }
            let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
                continue;
            };
            if let Ok(key) = blake3::Hash::from_hex(stem) {
                out.push((path, key));
            }
        }
        Ok(out)
    }

    /// Removes every entry, temp file and the saved counters; returns how many entries went.
    pub fn clear(&self) -> Result<usize, CacheError> {
        let mut flushed = self.flushed.lock().unwrap_or_else(|e| e.into_inner());
        let mut removed = 0;
        for e in fs::read_dir(&self.dir).map_err(io_err(&self.dir))? {
            let e = e.map_err(io_err(&self.dir))?;
            let name = e.file_name().to_string_lossy().into_owned();
            let path = e.path();
            let is_entry = path.extension().and_then(|x| x.to_str()) == Some(ENTRY_EXT);
            if is_entry || fsio::is_temp_name(&name) || name == STATS_FILE {
                match fs::remove_file(&path) {
                    Ok(()) => removed += usize::from(is_entry),
                    Err(err) if err.kind() == io::ErrorKind::NotFound => {}
                    Err(err) => return Err(io_err(&path)(err)),
                }
            }
        }
        // Counts before the clear are not carried into the fresh stats file.
        *flushed = self.session.snapshot();
        Ok(removed)
    }

    /// Counts of this handle only (not yet merged with other processes).
    pub fn session_counters(&self) -> CacheCounters {
        self.session.snapshot()
    }

    fn persisted(&self) -> CacheCounters {
        let path = self.dir.join(STATS_FILE);
        match fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).unwrap_or_else(|e| {
                tracing::warn!(path = %path.display(), error = %e, "unreadable cache stats; starting from zero");
                CacheCounters::default()
            }),
            Err(_) => CacheCounters::default(),
        }
    }

    /// Entries and bytes on disk, lifetime counters and this handle's counters.
    pub fn stats(&self) -> Result<CacheStats, CacheError> {
        let mut entries = 0;
        let mut bytes = 0;
        for (path, _) in self.entry_files()? {
            if let Ok(m) = fs::metadata(&path) {
                entries += 1;
                bytes += m.len();
            }
        }
        let session = self.session.snapshot();
        let unflushed = session.sub(*self.flushed.lock().unwrap_or_else(|e| e.into_inner()));
        let life = self.persisted().add(unflushed);
        Ok(CacheStats {
            entries,
            bytes,
            hits: life.hits,
            misses: life.misses,
            corrupt_discarded: life.corrupt_discarded,
            write_failures: life.write_failures,
            session,
        })
    }

    /// Merges this handle's new counts into `stats.json` under an exclusive lock (also done on drop).
    pub fn flush_stats(&self) -> Result<(), CacheError> {
        use fs4::fs_std::FileExt;
        let mut flushed = self.flushed.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.session.snapshot();
        let delta = now.sub(*flushed);
        if delta == CacheCounters::default() {
            return Ok(());
        }
        let lock_path = self.dir.join(STATS_LOCK);
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        lock.lock_exclusive().map_err(io_err(&lock_path))?;
        let total = self.persisted().add(delta);
        let path = self.dir.join(STATS_FILE);
        let json =
            serde_json::to_vec_pretty(&total).map_err(|e| io_err(&path)(io::Error::other(e)))?;
        let written = fsio::write_atomic(&path, &json).map_err(io_err(&path));
        // Closing the file releases the lock.
        drop(lock);
        written?;
        *flushed = now;
        Ok(())
    }
}

impl Drop for KernelCache {
    fn drop(&mut self) {
        if let Err(e) = self.flush_stats() {
            tracing::warn!(error = %e, "could not save cache stats");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::aot::nvrtc_or_skip;
    use proptest::prelude::*;

    fn kernel(i: usize) -> KernelSource {
        KernelSource {
            entry: format!("cache_k{i}"),
            code: format!(
                "extern \"C\" __global__ void cache_k{i}(float* y) {{ y[threadIdx.x] += {i}.0f; }}\n"
            ),
            template: "cache_test".into(),
            template_version: 1,
            options: vec![],
        }
    }

    fn entry_file(cache: &KernelCache, src: &KernelSource, arch: Arch) -> PathBuf {
        cache.entry_path(&cache_key(src, arch).unwrap())
    }

    #[test]
    fn counters_saturate_instead_of_overflowing() {
        // stats.json is a plain file: a count near u64::MAX must not panic in stats() or Drop.
        let full = CacheCounters {
            hits: u64::MAX,
            misses: u64::MAX - 1,
            corrupt_discarded: u64::MAX,
            write_failures: 7,
        };
        let one = CacheCounters {
            hits: 1,
            misses: 5,
            corrupt_discarded: 1,
            write_failures: 1,
        };
        let sum = full.add(one);
        assert_eq!(
            (
                sum.hits,
                sum.misses,
                sum.corrupt_discarded,
                sum.write_failures
            ),
            (u64::MAX, u64::MAX, u64::MAX, 8)
        );
    }

    #[test]
    fn a_well_framed_entry_declaring_a_huge_string_is_a_decode_error_not_an_abort() {
        // The 32-byte key, then the entry name claiming 2^44 bytes.
        let mut body = vec![0u8; 32];
        body.extend_from_slice(&crate::aot::fsio::tests::huge_string_prefix());
        let bytes = fsio::frame(&ENTRY_MAGIC, ENTRY_FORMAT_VERSION, &body);
        assert!(
            matches!(CacheEntry::decode(&bytes), Err(EntryError::Decode(_))),
            "{:?}",
            CacheEntry::decode(&bytes).map(|e| e.entry)
        );
    }

    #[test]
    fn miss_then_hit_returns_the_same_binary() {
        if !nvrtc_or_skip("miss_then_hit_returns_the_same_binary") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::open(dir.path()).unwrap();
        let src = kernel(0);
        let a = cache.get_or_compile(&src, Arch::Sm90a).unwrap();
        let b = cache.get_or_compile(&src, Arch::Sm90a).unwrap();
        assert!(!a.hit && b.hit);
        assert_eq!(a.cubin, b.cubin);
        assert_eq!(a.resources, b.resources);
        match b.ptxas_report("cache_k0") {
            Ok(r) => assert!(r.registers > 0),
            Err(why) => eprintln!("SKIP miss_then_hit resource check: {why}"),
        }
        assert_eq!(a.key, b.key);
        let s = cache.stats().unwrap();
        assert_eq!(
            (s.entries, s.hits, s.misses, s.corrupt_discarded),
            (1, 1, 1, 0)
        );
        assert!(s.bytes > a.cubin.len() as u64);
        let l = cache.list().unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(
            (l[0].entry.as_str(), l[0].arch, l[0].key),
            ("cache_k0", Arch::Sm90a, a.key)
        );
        assert_eq!(
            cache.get(&src, Arch::Sm120).unwrap(),
            None,
            "another arch is another key"
        );
        assert!(cache.get(&src, Arch::Sm90a).unwrap().is_some_and(|k| k.hit));
    }

    #[test]
    fn keys_separate_arch_options_versions_and_sources() {
        let src = kernel(1);
        let opts = vec!["--gpu-architecture=sm_90a".to_string()];
        let base = cache_key_with(&src, Arch::Sm90a, &opts, (13, 0));
        assert_eq!(base, cache_key_with(&src, Arch::Sm90a, &opts, (13, 0)));
        assert_ne!(base, cache_key_with(&src, Arch::Sm120, &opts, (13, 0)));
        assert_ne!(base, cache_key_with(&src, Arch::Sm90a, &opts, (13, 1)));
        let more = vec![opts[0].clone(), "-lineinfo".to_string()];
        assert_ne!(base, cache_key_with(&src, Arch::Sm90a, &more, (13, 0)));
        let mut v2 = src.clone();
        v2.template_version = 2;
        assert_ne!(base, cache_key_with(&v2, Arch::Sm90a, &opts, (13, 0)));
        assert_ne!(
            base,
            cache_key_with(&kernel(2), Arch::Sm90a, &opts, (13, 0))
        );
    }

    #[test]
    fn truncated_flipped_and_wrong_version_entries_are_discarded_and_rebuilt() {
        if !nvrtc_or_skip("truncated_flipped_and_wrong_version_entries_are_discarded_and_rebuilt") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::open(dir.path()).unwrap();
        let src = kernel(3);
        let good = cache.get_or_compile(&src, Arch::Sm120).unwrap();
        let path = entry_file(&cache, &src, Arch::Sm120);
        let original = fs::read(&path).unwrap();
        let damages: Vec<(&str, Vec<u8>)> = vec![
            ("truncated body", original[..original.len() / 2].to_vec()),
            ("truncated header", original[..10].to_vec()),
            ("empty", Vec::new()),
            ("bit flip in cubin", {
                let mut b = original.clone();
                let n = b.len();
                b[n - 200] ^= 0x10;
                b
            }),
            ("bit flip in header checksum", {
                let mut b = original.clone();
                b[30] ^= 1;
                b
            }),
            ("wrong version", {
                let mut b = original.clone();
                b[8..12].copy_from_slice(&(ENTRY_FORMAT_VERSION + 1).to_le_bytes());
                b
            }),
            ("wrong magic", {
                let mut b = original.clone();
                b[0] = b'X';
                b
            }),
        ];
        for (i, (what, bytes)) in damages.iter().enumerate() {
            fs::write(&path, bytes).unwrap();
            let before = crate::aot::nvrtc_calls();
            let k = cache.get_or_compile(&src, Arch::Sm120).unwrap();
            assert!(!k.hit, "{what}: a damaged entry is never served");
            assert!(crate::aot::nvrtc_calls() > before, "{what}: it was rebuilt");
            assert_eq!(k.cubin, good.cubin, "{what}");
            assert_eq!(
                cache.session_counters().corrupt_discarded,
                i as u64 + 1,
                "{what}: counted"
            );
            // The rebuilt file verifies again (its `created` may differ from the original).
            let rebuilt = CacheEntry::decode(&fs::read(&path).unwrap()).unwrap();
            assert_eq!(rebuilt.cubin, good.cubin, "{what}");
            assert!(
                cache.get_or_compile(&src, Arch::Sm120).unwrap().hit,
                "{what}: hit after rebuild"
            );
        }
        // `get` (no compile) drops a corrupt file instead of serving it.
        fs::write(&path, &original[..original.len() - 1]).unwrap();
        assert_eq!(cache.get(&src, Arch::Sm120).unwrap(), None);
        assert!(!path.exists());
        assert_eq!(
            cache.stats().unwrap().corrupt_discarded,
            damages.len() as u64 + 1
        );
    }

    #[test]
    fn entry_for_another_key_is_rejected() {
        if !nvrtc_or_skip("entry_for_another_key_is_rejected") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::open(dir.path()).unwrap();
        let (a, b) = (kernel(4), kernel(5));
        cache.get_or_compile(&a, Arch::Sm90a).unwrap();
        // A valid entry copied under the wrong name must not be served for `b`.
        fs::copy(
            entry_file(&cache, &a, Arch::Sm90a),
            entry_file(&cache, &b, Arch::Sm90a),
        )
        .unwrap();
        let k = cache.get_or_compile(&b, Arch::Sm90a).unwrap();
        assert!(!k.hit);
        assert_eq!(cache.session_counters().corrupt_discarded, 1);
        assert_eq!(k.entry, "cache_k5");
    }

    #[test]
    fn many_dedupes_compiles_and_keeps_order_and_errors() {
        if !nvrtc_or_skip("many_dedupes_compiles_and_keeps_order_and_errors") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let cache = KernelCache::open(dir.path()).unwrap();
        cache.get_or_compile(&kernel(6), Arch::Sm90a).unwrap();
        let mut bad = kernel(7);
        bad.code.push_str("syntax error here\n");
        let items = vec![
            (kernel(6), Arch::Sm90a),
            (kernel(8), Arch::Sm90a),
            (bad, Arch::Sm90a),
            (kernel(8), Arch::Sm90a),
            (kernel(8), Arch::Sm120),
        ];
        let r = cache.get_or_compile_many(&items, Some(2));
        let c = cache.session_counters();
        // The warm-up miss, then one miss (= one compile job) each for k8/sm90a, bad and
        // k8/sm120; the repeated k8/sm90a shares its job.
        assert_eq!((c.hits, c.misses), (1, 4));
        assert!(r[0].as_ref().unwrap().hit);
        assert!(
            matches!(&r[2], Err(CacheError::Compile(e)) if matches!(&**e, CompileError::Nvrtc { entry, .. } if entry == "cache_k7"))
        );
        let (k1, k3) = (r[1].as_ref().unwrap(), r[3].as_ref().unwrap());
        assert_eq!(k1.cubin, k3.cubin);
        assert_eq!(r[4].as_ref().unwrap().arch, Arch::Sm120);
        assert_eq!(cache.stats().unwrap().entries, 3);
        let again = cache.get_or_compile_many(&items, None);
        assert!(again
            .iter()
            .enumerate()
            .all(|(i, r)| i == 2 || r.as_ref().unwrap().hit));
    }

    #[test]
    fn clear_and_lifetime_stats() {
        if !nvrtc_or_skip("clear_and_lifetime_stats") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        {
            let cache = KernelCache::open(dir.path()).unwrap();
            cache.get_or_compile(&kernel(9), Arch::Sm90a).unwrap();
            cache.get_or_compile(&kernel(9), Arch::Sm90a).unwrap();
        }
        let cache = KernelCache::open(dir.path()).unwrap();
        cache.get_or_compile(&kernel(9), Arch::Sm90a).unwrap();
        let s = cache.stats().unwrap();
        assert_eq!(
            (s.hits, s.misses),
            (2, 1),
            "lifetime counts include the dropped handle"
        );
        assert_eq!((s.session.hits, s.session.misses), (1, 0));
        cache.flush_stats().unwrap();
        assert_eq!(
            cache.stats().unwrap().hits,
            2,
            "flushing does not double count"
        );
        fs::write(dir.path().join(".x.rtxk.tmp.1.2.3"), b"partial").unwrap();
        assert_eq!(cache.clear().unwrap(), 1);
        let s = cache.stats().unwrap();
        assert_eq!((s.entries, s.bytes, s.hits, s.misses), (0, 0, 0, 0));
        assert!(cache.list().unwrap().is_empty());
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(names.iter().all(|n| n == STATS_LOCK), "left: {names:?}");
    }

    fn arb_entry() -> impl Strategy<Value = CacheEntry> {
        (
            any::<[u8; 32]>(),
            "[a-z_][a-z0-9_]{0,20}",
            any::<u32>(),
            proptest::sample::select(Arch::ALL.to_vec()),
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec("[ -~]{0,12}", 0..4),
            ".{0,40}",
            (0u32..256, 0u32..5000, 0u32..100000),
        )
            .prop_map(
                |(key, entry, tv, arch, cubin, options, log, (regs, spill, smem))| CacheEntry {
                    key,
                    entry: entry.clone(),
                    template: "t".into(),
                    template_version: tv,
                    fingerprint: *blake3::hash(entry.as_bytes()).as_bytes(),
                    arch,
                    nvrtc_version: (13, 0),
                    options,
                    created: 1_700_000_000,
                    cubin_blake3: *blake3::hash(&cubin).as_bytes(),
                    cubin,
                    resources: vec![ResourceUsage {
                        function: entry,
                        arch,
                        is_entry: true,
                        registers: regs,
                        spill_store_bytes: spill,
                        spill_load_bytes: spill,
                        stack_frame_bytes: spill,
                        cumulative_stack_bytes: Some(spill),
                        shared_bytes: smem,
                        barriers: 1,
                        const_bytes: None,
                    }],
                    log,
                },
            )
    }

    proptest! {
        #[test]
        fn entries_round_trip(e in arb_entry()) {
            let bytes = e.encode().unwrap();
            prop_assert_eq!(CacheEntry::decode(&bytes).unwrap(), e.clone());
            prop_assert!(CacheEntry::decode_for(&bytes, &blake3::Hash::from_bytes(e.key)).is_ok());
        }

        #[test]
        fn corrupted_entries_never_decode(e in arb_entry(), pos in any::<usize>(), xor in 1u8..=255, cut in any::<usize>()) {
            let bytes = e.encode().unwrap();
            let mut flipped = bytes.clone();
            let p = pos % flipped.len();
            flipped[p] ^= xor;
            prop_assert!(CacheEntry::decode(&flipped).is_err(), "byte {} ^ {:#x} decoded", p, xor);
            let cut = cut % bytes.len();
            prop_assert!(CacheEntry::decode(&bytes[..cut]).is_err());
            let mut longer = bytes.clone();
            longer.push(0);
            prop_assert!(CacheEntry::decode(&longer).is_err());
        }

        #[test]
        fn a_bad_cubin_checksum_is_caught_even_in_a_valid_frame(e in arb_entry(), xor in 1u8..=255) {
            let mut bad = e.clone();
            bad.cubin_blake3[0] ^= xor;
            let bytes = bad.encode().unwrap();
            prop_assert_eq!(CacheEntry::decode(&bytes), Err(EntryError::CubinChecksum));
        }
    }
}
