//! Crash- and race-safe file helpers shared by the kernel cache, bundles, the profile store and
//! the tuning database: atomic replacement (temp file in the same folder + fsync + rename), a
//! versioned, checksummed frame around a body, a size-limited decoder for bodies, and the
//! platform cache root.
//!
//! Frame layout (all integers little-endian), [`HEADER_LEN`] bytes then the body:
//!
//! | bytes  | field                          |
//! |--------|--------------------------------|
//! | 0..8   | magic (identifies the format)  |
//! | 8..12  | format version, `u32`          |
//! | 12..20 | body length, `u64`             |
//! | 20..52 | blake3 of the body             |

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Bytes before the body in a framed file.
pub const HEADER_LEN: usize = 8 + 4 + 8 + 32;

/// Environment variable overriding the cache root (kernels go to `$RTX_CACHE_DIR/kernels`,
/// profiles to `$RTX_CACHE_DIR/profiles`).
pub const CACHE_DIR_ENV: &str = "RTX_CACHE_DIR";

/// Marker in the names of in-flight temporary files.
const TEMP_MARKER: &str = ".tmp.";

/// Why a framed file was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// Shorter than the header.
    #[error("file is {len} bytes, shorter than the {HEADER_LEN}-byte header")]
    TooShort {
        /// Actual length.
        len: usize,
    },
    /// The magic bytes are not the expected format's.
    #[error("bad magic {found:02x?} (expected {expected:02x?})")]
    BadMagic {
        /// Magic found.
        found: [u8; 8],
        /// Magic expected.
        expected: [u8; 8],
    },
    /// Written by a different format version.
    #[error("format version {found} (this build reads {expected})")]
    WrongVersion {
        /// Version found.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// Written by a format version outside `1..=max` (0, or newer than this build knows).
    #[error("format version {found} (this build reads 1 to {max})")]
    UnsupportedVersion {
        /// Version found.
        found: u32,
        /// Newest version this build reads.
        max: u32,
    },
    /// The body is shorter or longer than the header says (truncated or appended to).
    #[error("body is {actual} bytes but the header says {declared}")]
    Length {
        /// Length in the header.
        declared: u64,
        /// Length on disk.
        actual: u64,
    },
    /// The body's blake3 does not match the header.
    #[error("body checksum mismatch")]
    Checksum,
}

/// Most bytes one body's strings and byte buffers may claim while decoding. bincode allocates a
/// declared length before reading it, so without a limit a well-framed file declaring a 2^44-byte
/// string aborts the process instead of failing to decode. A valid body claims at most its own
/// length (every string and byte buffer is stored inline), far below this.
pub const DECODE_LIMIT: usize = 1 << 30;

/// Decodes a bincode body (standard config, at most [`DECODE_LIMIT`] bytes claimed); returns the
/// value and the number of body bytes it used (callers reject trailing bytes).
pub fn decode_body<T: serde::de::DeserializeOwned>(
    body: &[u8],
) -> Result<(T, usize), bincode::error::DecodeError> {
    let config = bincode::config::standard().with_limit::<DECODE_LIMIT>();
    bincode::serde::decode_from_slice(body, config)
}

/// Wraps `body` in a header with `magic`, `version`, its length and blake3.
pub fn frame(magic: &[u8; 8], version: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(body.len() as u64).to_le_bytes());
    out.extend_from_slice(blake3::hash(body).as_bytes());
    out.extend_from_slice(body);
    out
}

/// Checks the header of a framed file written by exactly `version` and returns its body.
pub fn unframe<'a>(magic: &[u8; 8], version: u32, bytes: &'a [u8]) -> Result<&'a [u8], FrameError> {
    if bytes.len() < HEADER_LEN {
        return Err(FrameError::TooShort { len: bytes.len() });
    }
    let accept = |found| {
        if found == version {
            Ok(())
        } else {
            Err(FrameError::WrongVersion {
                found,
                expected: version,
            })
        }
    };
    unframe_with(magic, accept, bytes).map(|(_, body)| body)
}

/// Checks the header of a framed file written by any version in `1..=max_version` (older
/// formats stay readable) and returns that version and the body. Magic and version are checked
/// before the rest of the header, so a newer format is reported as such even if its header is
/// shorter.
pub fn unframe_versions<'a>(
    magic: &[u8; 8],
    max_version: u32,
    bytes: &'a [u8],
) -> Result<(u32, &'a [u8]), FrameError> {
    let accept = |found| {
        if (1..=max_version).contains(&found) {
            Ok(())
        } else {
            Err(FrameError::UnsupportedVersion {
                found,
                max: max_version,
            })
        }
    };
    unframe_with(magic, accept, bytes)
}

/// The checks of [`unframe`] and [`unframe_versions`] in order (magic, version, header length,
/// body length, checksum); `accept` refuses a version with its error.
fn unframe_with<'a>(
    magic: &[u8; 8],
    accept: impl FnOnce(u32) -> Result<(), FrameError>,
    bytes: &'a [u8],
) -> Result<(u32, &'a [u8]), FrameError> {
    let too_short = FrameError::TooShort { len: bytes.len() };
    let Some((found, rest)) = bytes.split_first_chunk::<8>() else {
        return Err(too_short);
    };
    if found != magic {
        return Err(FrameError::BadMagic {
            found: *found,
            expected: *magic,
        });
    }
    let Some((v, rest)) = rest.split_first_chunk::<4>() else {
        return Err(too_short);
    };
    let version = u32::from_le_bytes(*v);
    accept(version)?;
    let Some((l, rest)) = rest.split_first_chunk::<8>() else {
        return Err(too_short);
    };
    let Some((h, body)) = rest.split_first_chunk::<32>() else {
        return Err(too_short);
    };
    let declared = u64::from_le_bytes(*l);
    if declared != body.len() as u64 {
        return Err(FrameError::Length {
            declared,
            actual: body.len() as u64,
        });
    }
    if blake3::hash(body) != blake3::Hash::from_bytes(*h) {
        return Err(FrameError::Checksum);
    }
    Ok((version, body))
}

/// Whether a file name is one of [`write_atomic`]'s in-flight temporaries.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with('.') && name.contains(TEMP_MARKER)
}

/// A temp path next to `path`, unique across processes and threads.
fn temp_path_for(path: &Path) -> PathBuf {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let base = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(
        ".{base}{TEMP_MARKER}{}.{n}.{nanos}",
        std::process::id()
    ))
}

/// Replaces `path` with `bytes` atomically: readers see the old file or the new one, never a mix,
/// and a crash leaves at most a stray temp file. The parent folder must exist.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = temp_path_for(path);
    let result = (|| {
        let mut f = OpenOptions::new().write(true).create_new(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, path)?;
        sync_parent(path);
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// [`write_atomic`], making `path`'s parent folder first when it does not exist (for files a
/// user names, such as reports and fixtures).
pub fn write_atomic_making_parent(path: &Path, bytes: &[u8]) -> io::Result<()> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent)?;
    }
    write_atomic(path, bytes)
}

/// Flushes the folder entry of a rename to disk (best effort; a no-op where unsupported).
fn sync_parent(path: &Path) {
    #[cfg(unix)]
    if let Some(parent) = path.parent() {
        if let Ok(d) = File::open(parent) {
            let _ = d.sync_all();
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

/// Removes temp files in `dir` older than `max_age` (left behind by crashed writers); returns
/// how many were removed.
pub fn remove_stale_temps(dir: &Path, max_age: std::time::Duration) -> usize {
    let Ok(rd) = fs::read_dir(dir) else { return 0 };
    let now = SystemTime::now();
    let mut removed = 0;
    for e in rd.flatten() {
        let name = e.file_name();
        if !is_temp_name(&name.to_string_lossy()) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|m| now.duration_since(m).ok())
            .is_some_and(|age| age >= max_age);
        if old && fs::remove_file(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The rtx cache root: `$RTX_CACHE_DIR` if set, else the platform cache folder + `rtx`
/// (`~/.cache/rtx` on Linux, `~/Library/Caches/rtx` on macOS, `%LOCALAPPDATA%\rtx` on Windows).
pub fn cache_root() -> Option<PathBuf> {
    match std::env::var_os(CACHE_DIR_ENV) {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => dirs::cache_dir().map(|d| d.join("rtx")),
    }
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    const MAGIC: &[u8; 8] = b"RTXTEST\0";

    /// A body declaring a 2^44-byte string (bincode's varint: marker 253, then a u64).
    pub(crate) fn huge_string_prefix() -> Vec<u8> {
        let mut b = vec![253u8];
        b.extend_from_slice(&(1u64 << 44).to_le_bytes());
        b
    }

    #[test]
    fn decode_body_refuses_a_huge_declared_length_without_allocating_it() {
        // Without the limit this allocates 16 TiB and aborts the test process.
        let r = decode_body::<String>(&huge_string_prefix());
        assert!(
            matches!(r, Err(bincode::error::DecodeError::LimitExceeded)),
            "{r:?}"
        );
        let mut ok = vec![5u8];
        ok.extend_from_slice(b"hello");
        assert_eq!(
            decode_body::<String>(&ok).unwrap(),
            ("hello".to_string(), 6)
        );
    }

    #[test]
    fn frame_round_trips_and_rejects_damage() {
        let f = frame(MAGIC, 3, b"hello body");
        assert_eq!(unframe(MAGIC, 3, &f).unwrap(), b"hello body");
        assert_eq!(
            unframe(MAGIC, 4, &f),
            Err(FrameError::WrongVersion {
                found: 3,
                expected: 4
            })
        );
        assert!(matches!(
            unframe(b"OTHERMAG", 3, &f),
            Err(FrameError::BadMagic { .. })
        ));
        assert!(matches!(
            unframe(MAGIC, 3, &f[..f.len() - 1]),
            Err(FrameError::Length { .. })
        ));
        assert!(matches!(
            unframe(MAGIC, 3, &f[..10]),
            Err(FrameError::TooShort { len: 10 })
        ));
        let mut flipped = f.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert_eq!(unframe(MAGIC, 3, &flipped), Err(FrameError::Checksum));
    }

    #[test]
    fn unframe_versions_reads_every_version_up_to_max() {
        for v in 1..=3 {
            let f = frame(MAGIC, v, b"body");
            assert_eq!(unframe_versions(MAGIC, 3, &f), Ok((v, &b"body"[..])));
        }
        for v in [0, 4, u32::MAX] {
            assert_eq!(
                unframe_versions(MAGIC, 3, &frame(MAGIC, v, b"body")),
                Err(FrameError::UnsupportedVersion { found: v, max: 3 })
            );
        }
        // The same damage is refused the same way as by `unframe`.
        let f = frame(MAGIC, 2, b"hello body");
        let mut flipped = f.clone();
        *flipped.last_mut().unwrap() ^= 1;
        let mut appended = f.clone();
        appended.push(0);
        for bad in [&f[..f.len() - 1], &appended[..], &flipped[..], &f[..30]] {
            let err = unframe(MAGIC, 2, bad).unwrap_err();
            assert_eq!(unframe_versions(MAGIC, 2, bad), Err(err));
        }
        assert_eq!(
            unframe_versions(MAGIC, 2, &f[..f.len() - 1]),
            Err(FrameError::Length {
                declared: 10,
                actual: 9
            })
        );
        assert_eq!(
            unframe_versions(MAGIC, 2, &flipped),
            Err(FrameError::Checksum)
        );
        assert!(matches!(
            unframe_versions(b"OTHERMAG", 2, &f),
            Err(FrameError::BadMagic { .. })
        ));
        // Magic and version come before the header length; a short header is too short.
        assert!(matches!(
            unframe_versions(b"OTHERMAG", 2, &f[..20]),
            Err(FrameError::BadMagic { .. })
        ));
        assert_eq!(
            unframe_versions(MAGIC, 1, &f[..20]),
            Err(FrameError::UnsupportedVersion { found: 2, max: 1 })
        );
        for len in [0, 7, 10, 30, HEADER_LEN - 1] {
            assert_eq!(
                unframe_versions(MAGIC, 2, &f[..len]),
                Err(FrameError::TooShort { len })
            );
        }
        // `unframe` still reports any short file as too short, whatever its first bytes.
        assert_eq!(
            unframe(b"OTHERMAG", 2, &f[..20]),
            Err(FrameError::TooShort { len: 20 })
        );
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.bin");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<String> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.bin".to_string()]);
        assert!(is_temp_name(
            &temp_path_for(&p).file_name().unwrap().to_string_lossy()
        ));
        assert!(!is_temp_name("x.bin"));
    }

    #[test]
    fn stale_temps_are_removed_fresh_files_kept() {
        let dir = tempfile::tempdir().unwrap();
        let tmp = temp_path_for(&dir.path().join("a.rtxk"));
        fs::write(&tmp, b"partial").unwrap();
        fs::write(dir.path().join("a.rtxk"), b"real").unwrap();
        assert_eq!(
            remove_stale_temps(dir.path(), std::time::Duration::from_secs(3600)),
            0
        );
        assert_eq!(remove_stale_temps(dir.path(), std::time::Duration::ZERO), 1);
        assert!(!tmp.exists() && dir.path().join("a.rtxk").exists());
    }

    proptest::proptest! {
        #[test]
        fn any_single_byte_change_is_rejected(body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
                                              pos in 0usize..1000, xor in 1u8..=255) {
            let mut f = frame(MAGIC, 1, &body);
            let pos = pos % f.len();
            f[pos] ^= xor;
            proptest::prop_assert!(unframe(MAGIC, 1, &f).is_err());
            // The checksum covers the body only: a flip of the version field to another
            // readable version is accepted (the body's decoder then decides).
            let older = u32::from_le_bytes(f[8..12].try_into().unwrap());
            if (8..12).contains(&pos) && (1..=5).contains(&older) {
                proptest::prop_assert!(unframe_versions(MAGIC, 5, &f).is_ok());
            } else {
                proptest::prop_assert!(unframe_versions(MAGIC, 5, &f).is_err());
            }
        }
    }
}
