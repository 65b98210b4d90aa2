//! Saved device profiles: the measured ceilings of one GPU under one driver, stored so later
//! runs skip re-measuring.
//!
//! One file per (device name, driver version) under `$RTX_CACHE_DIR/profiles` (default: the
//! platform cache folder + `rtx/profiles`). The file is the shared [`fsio`] frame (magic
//! `RTXPROF\0`, [`PROFILE_FORMAT_VERSION`], length, blake3) around a bincode body (exact f64
//! round trips), written atomically. A damaged or outdated file is reported and re-measured,
//! never half-read.

use super::hwdb::HwEntry;
use crate::aot::fsio::{self, FrameError};
use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// Magic bytes at the start of a profile file.
pub const PROFILE_MAGIC: [u8; 8] = *b"RTXPROF\0";
/// Version of the profile format; bump on any change to [`DeviceProfile`] or [`Ceilings`].
pub const PROFILE_FORMAT_VERSION: u32 = 1;
/// File extension of profiles.
pub const PROFILE_EXT: &str = "rtxprof";

/// Measured ceilings; `None` where that measurement was not run (or not supported).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Ceilings {
    /// Sustained device-to-device copy bandwidth, GB/s (read + write bytes / time).
    pub copy_gbps: Option<f64>,
    /// fp32 SIMT FMA throughput, TFLOP/s.
    pub fp32_tflops: Option<f64>,
    /// tf32 tensor-core throughput, TFLOP/s.
    pub tf32_tflops: Option<f64>,
    /// f16 tensor-core throughput (fp32 accumulate), TFLOP/s.
    pub f16_tflops: Option<f64>,
    /// bf16 tensor-core throughput (fp32 accumulate), TFLOP/s.
    pub bf16_tflops: Option<f64>,
    /// Host-side cost of one empty kernel launch, microseconds.
    pub launch_overhead_us: Option<f64>,
}

/// Which device + driver a profile belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProfileKey {
    /// Driver-reported device name, e.g. `"NVIDIA H200"`.
    pub device_name: String,
    /// CUDA driver version `(major, minor)`.
    pub driver_version: (i32, i32),
}

impl ProfileKey {
    /// A key for `device_name` under driver `driver_version`.
    pub fn new(device_name: impl Into<String>, driver_version: (i32, i32)) -> Self {
        ProfileKey {
            device_name: device_name.into(),
            driver_version,
        }
    }

    /// File stem: readable name + driver + a short hash of the exact key (names that sanitize
    /// alike stay apart), e.g. `NVIDIA_H200-drv13.0-1a2b3c4d`.
    pub fn file_stem(&self) -> String {
        let readable: String = self
            .device_name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(64)
            .collect();
        let mut h = blake3::Hasher::new();
        h.update(self.device_name.as_bytes());
        h.update(&self.driver_version.0.to_le_bytes());
        h.update(&self.driver_version.1.to_le_bytes());
        let hash = h.finalize().to_hex();
        format!(
            "{readable}-drv{}.{}-{}",
            self.driver_version.0,
            self.driver_version.1,
            &hash.as_str()[..8]
        )
    }
}

/// One GPU's identity, limits, measured ceilings and datasheet figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceProfile {
    /// [`PROFILE_FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// Driver-reported device name.
    pub device_name: String,
    /// Compute capability `(major, minor)`.
    pub compute_capability: (u32, u32),
    /// CUDA driver version `(major, minor)`.
    pub driver_version: (i32, i32),
    /// Streaming multiprocessors.
    pub sm_count: u32,
    /// L2 cache, bytes.
    pub l2_bytes: u64,
    /// Largest shared memory one block may opt in to, bytes.
    pub smem_optin: u32,
    /// What was measured on this device.
    pub measured: Ceilings,
    /// When it was measured, Unix seconds.
    pub measured_at: u64,
    /// The datasheet entry for this model, if the database knows it.
    pub datasheet: Option<HwEntry>,
}

impl DeviceProfile {
    /// The key this profile is stored under.
    pub fn key(&self) -> ProfileKey {
        ProfileKey::new(self.device_name.clone(), self.driver_version)
    }

    /// Measured value over datasheet value for each ceiling both have (e.g. `0.90` copy
    /// efficiency), in the order copy, fp32, tf32, f16, bf16.
    pub fn efficiency(&self) -> [Option<f64>; 5] {
        let Some(d) = &self.datasheet else {
            return [None; 5];
        };
        let m = &self.measured;
        let ratio = |got: Option<f64>, peak: f64| got.filter(|_| peak > 0.0).map(|g| g / peak);
        [
            ratio(m.copy_gbps, d.mem_bandwidth_gbps),
            ratio(m.fp32_tflops, d.fp32_tflops),
            ratio(m.tf32_tflops, d.tf32_tflops),
            ratio(m.f16_tflops, d.f16_tflops),
            ratio(m.bf16_tflops, d.bf16_tflops),
        ]
    }

    /// The file bytes: framed bincode.
    pub fn encode(&self) -> Result<Vec<u8>, ProfileError> {
        let body = bincode::serde::encode_to_vec(self, bincode::config::standard())
            .map_err(|e| ProfileError::Decode(e.to_string()))?;
        Ok(fsio::frame(&PROFILE_MAGIC, PROFILE_FORMAT_VERSION, &body))
    }

    /// Decodes and verifies file bytes.
    pub fn decode(bytes: &[u8]) -> Result<DeviceProfile, ProfileError> {
        let body = fsio::unframe(&PROFILE_MAGIC, PROFILE_FORMAT_VERSION, bytes)?;
        let (mut p, used): (DeviceProfile, usize) =
            fsio::decode_body(body).map_err(|e| ProfileError::Decode(e.to_string()))?;
        if used != body.len() {
            return Err(ProfileError::Decode(format!(
                "{} trailing bytes",
                body.len() - used
            )));
        }
        // Matching rules are not saved; take them from this build's database.
        p.datasheet = p.datasheet.map(HwEntry::with_rules_from_db);
        if p.format_version != PROFILE_FORMAT_VERSION {
            return Err(ProfileError::Frame(FrameError::WrongVersion {
                found: p.format_version,
                expected: PROFILE_FORMAT_VERSION,
            }));
        }
        Ok(p)
    }
}

/// Why a profile could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// Neither `RTX_CACHE_DIR` nor a platform cache folder is available.
    #[error("no cache folder for profiles: set RTX_CACHE_DIR")]
    NoCacheDir,
    /// A filesystem operation failed.
    #[error("profile I/O on {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// Bad header, length or checksum (damaged or written by another format version).
    #[error("profile file damaged or outdated: {0}")]
    Frame(#[from] FrameError),
    /// The body is not a profile.
    #[error("profile does not decode: {0}")]
    Decode(String),
    /// The file holds another device's profile.
    #[error("profile file is for {found:?}, expected {expected:?}")]
    KeyMismatch {
        /// Key inside the file.
        found: ProfileKey,
        /// Key asked for.
        expected: ProfileKey,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ProfileError + '_ {
    move |source| ProfileError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The folder of saved profiles.
#[derive(Debug, Clone)]
pub struct ProfileStore {
    dir: PathBuf,
}

impl ProfileStore {
    /// The default folder: `$RTX_CACHE_DIR/profiles`, else the platform cache folder + `rtx/profiles`.
    pub fn default_dir() -> Result<PathBuf, ProfileError> {
        fsio::cache_root()
            .map(|r| r.join("profiles"))
            .ok_or(ProfileError::NoCacheDir)
    }

    /// Opens (creating if needed) the store in [`ProfileStore::default_dir`].
    pub fn open_default() -> Result<ProfileStore, ProfileError> {
        Self::open(Self::default_dir()?)
    }

    /// Opens (creating if needed) the store in `dir`.
    pub fn open(dir: impl Into<PathBuf>) -> Result<ProfileStore, ProfileError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        Ok(ProfileStore { dir })
    }

    /// The store folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file for `key`.
    pub fn path(&self, key: &ProfileKey) -> PathBuf {
        self.dir.join(format!("{}.{PROFILE_EXT}", key.file_stem()))
    }

    /// The saved profile for `key`; `Ok(None)` if there is none; an error if the file is damaged,
    /// outdated or another device's.
    pub fn load(&self, key: &ProfileKey) -> Result<Option<DeviceProfile>, ProfileError> {
        let path = self.path(key);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_err(&path)(e)),
        };
        let p = DeviceProfile::decode(&bytes)?;
        if &p.key() != key {
            return Err(ProfileError::KeyMismatch {
                found: p.key(),
                expected: key.clone(),
            });
        }
        Ok(Some(p))
    }

    /// Saves `profile` under its own key, atomically replacing an older one; returns the path.
    pub fn save(&self, profile: &DeviceProfile) -> Result<PathBuf, ProfileError> {
        let path = self.path(&profile.key());
        fsio::write_atomic(&path, &profile.encode()?).map_err(io_err(&path))?;
        Ok(path)
    }

    /// The saved profile for `key`, or a fresh one from `measure` (then saved) when there is none,
    /// when `reprofile` is set, or when the saved one cannot be used (reported with a warning).
    /// A failed save is logged and the measured profile still returned.
    pub fn load_or_measure<E>(
        &self,
        key: &ProfileKey,
        reprofile: bool,
        measure: impl FnOnce() -> Result<DeviceProfile, E>,
    ) -> Result<DeviceProfile, E> {
        if !reprofile {
            match self.load(key) {
                Ok(Some(p)) => return Ok(p),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(path = %self.path(key).display(), error = %e, "saved profile unusable; re-measuring")
                }
            }
        }
        let p = measure()?;
        if &p.key() != key {
            tracing::warn!(asked = ?key, measured = ?p.key(), "measured profile is for another key; saving under its own");
        }
        if let Err(e) = self.save(&p) {
            tracing::warn!(error = %e, "could not save the device profile");
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profiler::hwdb;
    use proptest::prelude::*;

    fn h200(copy: f64) -> DeviceProfile {
        DeviceProfile {
            format_version: PROFILE_FORMAT_VERSION,
            device_name: "NVIDIA H200".into(),
            compute_capability: (9, 0),
            driver_version: (13, 0),
            sm_count: 132,
            l2_bytes: 50 * 1024 * 1024,
            smem_optin: 232_448,
            measured: Ceilings {
                copy_gbps: Some(copy),
                bf16_tflops: Some(700.0),
                ..Ceilings::default()
            },
            measured_at: 1_750_000_000,
            datasheet: hwdb::lookup("NVIDIA H200", (9, 0)).cloned(),
        }
    }

    #[test]
    fn a_well_framed_profile_declaring_a_huge_name_is_a_decode_error_not_an_abort() {
        // format_version (varint 1), then the device name claiming 2^44 bytes.
        let mut body = vec![PROFILE_FORMAT_VERSION as u8];
        body.extend_from_slice(&crate::aot::fsio::tests::huge_string_prefix());
        let bytes = fsio::frame(&PROFILE_MAGIC, PROFILE_FORMAT_VERSION, &body);
        let r = DeviceProfile::decode(&bytes);
        assert!(matches!(r, Err(ProfileError::Decode(_))), "{r:?}");
    }

    #[test]
    fn save_load_and_keys() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(dir.path().join("profiles")).unwrap();
        let p = h200(4300.0);
        let key = p.key();
        assert_eq!(store.load(&key).unwrap(), None);
        let path = store.save(&p).unwrap();
        assert!(path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("NVIDIA_H200-drv13.0-"));
        assert_eq!(store.load(&key).unwrap(), Some(p.clone()));
        // Another driver is another profile.
        assert_eq!(
            store
                .load(&ProfileKey::new("NVIDIA H200", (13, 1)))
                .unwrap(),
            None
        );
        assert_ne!(
            ProfileKey::new("a b", (1, 0)).file_stem(),
            ProfileKey::new("a_b", (1, 0)).file_stem()
        );
        let eff = p.efficiency();
        assert!((eff[0].unwrap() - 4300.0 / 4800.0).abs() < 1e-12);
        assert_eq!(eff[1], None, "fp32 was not measured");
    }

    #[test]
    fn load_or_measure_caches_reprofiles_and_recovers_from_damage() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(dir.path()).unwrap();
        let key = ProfileKey::new("NVIDIA H200", (13, 0));
        let mut calls = 0;
        let mut measure = |copy: f64| {
            calls += 1;
            Ok::<_, String>(h200(copy))
        };
        let a = store
            .load_or_measure(&key, false, || measure(4300.0))
            .unwrap();
        let b = store.load_or_measure(&key, false, || measure(1.0)).unwrap();
        assert_eq!(a, b, "second call is served from disk");
        let c = store
            .load_or_measure(&key, true, || measure(4250.0))
            .unwrap();
        assert_eq!(c.measured.copy_gbps, Some(4250.0));
        assert_eq!(
            store.load(&key).unwrap().unwrap().measured.copy_gbps,
            Some(4250.0)
        );
        // Damage the file: load reports it, load_or_measure re-measures and repairs it.
        let path = store.path(&key);
        let mut bytes = fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x20;
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            store.load(&key),
            Err(ProfileError::Frame(FrameError::Checksum))
        ));
        let d = store
            .load_or_measure(&key, false, || measure(4200.0))
            .unwrap();
        assert_eq!(d.measured.copy_gbps, Some(4200.0));
        assert!(store.load(&key).unwrap().is_some());
        assert_eq!(calls, 3);
        let err =
            store.load_or_measure(&key, true, || Err::<DeviceProfile, _>("no GPU".to_string()));
        assert_eq!(err, Err("no GPU".to_string()));
        assert_eq!(
            store.load(&key).unwrap().unwrap().measured.copy_gbps,
            Some(4200.0),
            "a failed measure keeps the old profile"
        );
    }

    #[test]
    fn wrong_version_and_wrong_device_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = ProfileStore::open(dir.path()).unwrap();
        let p = h200(4300.0);
        let path = store.save(&p).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        bytes[8..12].copy_from_slice(&(PROFILE_FORMAT_VERSION + 1).to_le_bytes());
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            store.load(&p.key()),
            Err(ProfileError::Frame(FrameError::WrongVersion { .. }))
        ));
        // A valid file for another device placed under this key's name.
        let mut other = p.clone();
        other.device_name = "NVIDIA H100 80GB HBM3".into();
        fs::write(&path, other.encode().unwrap()).unwrap();
        assert!(matches!(
            store.load(&p.key()),
            Err(ProfileError::KeyMismatch { .. })
        ));
    }

    fn arb_opt() -> impl Strategy<Value = Option<f64>> {
        proptest::option::of(0.0f64..1e5)
    }

    proptest! {
        #[test]
        fn profiles_round_trip_and_corruption_is_refused(
            name in "[ -~]{1,30}", cc in (5u32..13, 0u32..10), drv in (10i32..14, 0i32..10),
            sms in 1u32..300, copy in arb_opt(), fp32 in arb_opt(), bf16 in arb_opt(), launch in arb_opt(),
            pos in any::<usize>(), xor in 1u8..=255,
        ) {
            let p = DeviceProfile {
                format_version: PROFILE_FORMAT_VERSION,
                datasheet: hwdb::lookup(&name, cc).cloned(),
                device_name: name,
                compute_capability: cc,
                driver_version: drv,
                sm_count: sms,
                l2_bytes: sms as u64 * 4096,
                smem_optin: 101_376,
                measured: Ceilings { copy_gbps: copy, fp32_tflops: fp32, bf16_tflops: bf16, launch_overhead_us: launch, ..Ceilings::default() },
                measured_at: 1,
            };
            let bytes = p.encode().unwrap();
            prop_assert_eq!(DeviceProfile::decode(&bytes).unwrap(), p);
            let mut bad = bytes.clone();
            let i = pos % bad.len();
            bad[i] ^= xor;
            prop_assert!(DeviceProfile::decode(&bad).is_err());
        }
    }
}
