//! Deployment bundles: a folder of cubins plus `manifest.json`, so a deployment loads
//! precompiled kernels and never runs NVRTC.
//!
//! The manifest records the format version, the NVRTC version, and per kernel its entry name,
//! template, template version, source fingerprint, architecture, file name, size, blake3 and
//! resource report. It carries a blake3 of its own canonical (compact JSON, `checksum` empty)
//! serialization, and [`Bundle::open`] verifies that and every cubin's checksum before anything is
//! served, so a damaged bundle is refused rather than half-loaded.

use super::cache::CachedKernel;
use super::fsio;
use super::nvrtc::Compiled;
use super::resources::ResourceUsage;
use crate::templates::KernelSource;
use crate::Arch;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

/// The manifest's file name inside a bundle folder.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Version of the manifest format this build reads and writes.
pub const BUNDLE_FORMAT_VERSION: u32 = 1;

/// Anything that holds a compiled kernel binary.
pub trait KernelBinary {
    /// The cubin.
    fn cubin(&self) -> &[u8];
    /// Its target.
    fn arch(&self) -> Arch;
    /// ptxas' per-function resource report.
    fn resources(&self) -> &[ResourceUsage];
    /// NVRTC `(major, minor)` that produced it.
    fn nvrtc_version(&self) -> (i32, i32);
}

impl KernelBinary for Compiled {
    fn cubin(&self) -> &[u8] {
        &self.cubin
    }
    fn arch(&self) -> Arch {
        self.arch
    }
    fn resources(&self) -> &[ResourceUsage] {
        &self.resources
    }
    fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc_version
    }
}

impl KernelBinary for CachedKernel {
    fn cubin(&self) -> &[u8] {
        &self.cubin
    }
    fn arch(&self) -> Arch {
        self.arch
    }
    fn resources(&self) -> &[ResourceUsage] {
        &self.resources
    }
    fn nvrtc_version(&self) -> (i32, i32) {
        self.nvrtc_version
    }
}

/// One kernel in a bundle manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleEntry {
    /// Entry point.
    pub entry: String,
    /// Template that generated it.
    pub template: String,
    /// Template version.
    pub template_version: u32,
    /// [`KernelSource::fingerprint`], hex.
    pub fingerprint: String,
    /// Target.
    pub arch: Arch,
    /// The cubin's file name in the bundle folder.
    pub file: String,
    /// The cubin's size.
    pub bytes: u64,
    /// The cubin's blake3, hex.
    pub blake3: String,
    /// ptxas' per-function resource report.
    pub resources: Vec<ResourceUsage>,
}

/// The contents of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    /// [`BUNDLE_FORMAT_VERSION`] of the writer.
    pub format_version: u32,
    /// NVRTC `(major, minor)` that compiled every kernel (`None` for an empty bundle).
    pub nvrtc_version: Option<(i32, i32)>,
    /// The kernels.
    pub entries: Vec<BundleEntry>,
    /// blake3 (hex) of the compact JSON of this manifest with this field empty.
    pub checksum: String,
}

/// Why a bundle could not be written or opened.
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    /// A filesystem operation failed.
    #[error("bundle I/O on {path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// `manifest.json` is not a manifest.
    #[error("manifest does not parse: {0}")]
    Parse(String),
    /// Written by a different format version.
    #[error("bundle format version {found} (this build reads {expected})")]
    WrongVersion {
        /// Version found.
        found: u32,
        /// Version this build reads.
        expected: u32,
    },
    /// The manifest does not match its own checksum.
    #[error("manifest checksum mismatch")]
    ManifestChecksum,
    /// A manifest file name that is not a plain name inside the folder.
    #[error("manifest names an unsafe cubin file `{0}`")]
    BadFileName(String),
    /// Two kernels with the same entry name (or fingerprint) and architecture.
    #[error("bundle has two kernels for `{key}` on {arch}")]
    Duplicate {
        /// Entry name or fingerprint.
        key: String,
        /// Architecture.
        arch: Arch,
    },
    /// Kernels compiled by different NVRTC versions.
    #[error("kernels compiled by different NVRTC versions: {a:?} and {b:?}")]
    MixedNvrtc {
        /// One version.
        a: (i32, i32),
        /// Another.
        b: (i32, i32),
    },
    /// A cubin's size or checksum does not match the manifest.
    #[error("cubin `{file}` does not match the manifest ({reason})")]
    CubinMismatch {
        /// File name.
        file: String,
        /// Size or checksum.
        reason: &'static str,
    },
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> BundleError + '_ {
    move |source| BundleError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl BundleManifest {
    fn canonical_checksum(&self) -> Result<String, BundleError> {
        let mut m = self.clone();
        m.checksum.clear();
        let bytes = serde_json::to_vec(&m).map_err(|e| BundleError::Parse(e.to_string()))?;
        Ok(blake3::hash(&bytes).to_hex().to_string())
    }

    /// Fills in the checksum and serializes to pretty JSON (what [`Bundle::write`] stores).
    pub fn encode(mut self) -> Result<Vec<u8>, BundleError> {
        self.checksum = self.canonical_checksum()?;
        serde_json::to_vec_pretty(&self).map_err(|e| BundleError::Parse(e.to_string()))
    }

    /// Parses and verifies manifest bytes: version, checksum, safe and unique file names, and
    /// unique `(entry, arch)` / `(fingerprint, arch)` pairs.
    pub fn decode(bytes: &[u8]) -> Result<BundleManifest, BundleError> {
        #[derive(Deserialize)]
        struct VersionOnly {
            format_version: u32,
        }
        let v: VersionOnly =
            serde_json::from_slice(bytes).map_err(|e| BundleError::Parse(e.to_string()))?;
        if v.format_version != BUNDLE_FORMAT_VERSION {
            return Err(BundleError::WrongVersion {
                found: v.format_version,
                expected: BUNDLE_FORMAT_VERSION,
            });
        }
        let m: BundleManifest =
            serde_json::from_slice(bytes).map_err(|e| BundleError::Parse(e.to_string()))?;
        if m.canonical_checksum()? != m.checksum {
            return Err(BundleError::ManifestChecksum);
        }
        m.validate()?;
        Ok(m)
    }

    fn validate(&self) -> Result<(), BundleError> {
        let mut files = HashSet::new();
        let mut names = HashSet::new();
        let mut prints = HashSet::new();
        for e in &self.entries {
            if !names.insert((e.entry.as_str(), e.arch)) {
                return Err(BundleError::Duplicate {
                    key: e.entry.clone(),
                    arch: e.arch,
                });
            }
            if !prints.insert((e.fingerprint.as_str(), e.arch)) {
                return Err(BundleError::Duplicate {
                    key: e.fingerprint.clone(),
                    arch: e.arch,
                });
            }
            if !is_plain_file_name(&e.file) || !files.insert(e.file.as_str()) {
                return Err(BundleError::BadFileName(e.file.clone()));
            }
        }
        Ok(())
    }
}

/// A file name with no path separators, no leading dot and nothing but `[A-Za-z0-9._-]`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 255
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// `<entry, sanitized>.<sm_xx>.<16 hex of the fingerprint>.cubin`.
fn cubin_file_name(entry: &str, arch: Arch, fingerprint: &str) -> String {
    let mut stem: String = entry
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if stem.is_empty() {
        stem.push_str("kernel");
    }
    format!(
        "{stem}.{}.{}.cubin",
        arch.sm_name(),
        &fingerprint[..16.min(fingerprint.len())]
    )
}

/// An opened, verified bundle with all cubins in memory.
#[derive(Debug, Clone)]
pub struct Bundle {
    dir: PathBuf,
    manifest: BundleManifest,
    cubins: Vec<Vec<u8>>,
}

impl Bundle {
    /// Writes `items` (source + binary) into `dir` as a bundle (cubins first, the manifest last,
    /// each atomically), removing cubins of an earlier bundle there that the new one does not use.
    pub fn write<'a, I, K>(dir: impl AsRef<Path>, items: I) -> Result<BundleManifest, BundleError>
    where
        I: IntoIterator<Item = (&'a KernelSource, &'a K)>,
        K: KernelBinary + ?Sized + 'a,
    {
        let dir = dir.as_ref();
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        let mut entries = Vec::new();
        let mut nvrtc: Option<(i32, i32)> = None;
        let mut blobs: Vec<&[u8]> = Vec::new();
        for (src, bin) in items {
            let v = bin.nvrtc_version();
            match nvrtc {
                Some(a) if a != v => return Err(BundleError::MixedNvrtc { a, b: v }),
                _ => nvrtc = Some(v),
            }
            let fingerprint = src.fingerprint().to_hex().to_string();
            let cubin = bin.cubin();
            entries.push(BundleEntry {
                entry: src.entry.clone(),
                template: src.template.clone(),
                template_version: src.template_version,
                file: cubin_file_name(&src.entry, bin.arch(), &fingerprint),
                fingerprint,
                arch: bin.arch(),
                bytes: cubin.len() as u64,
                blake3: blake3::hash(cubin).to_hex().to_string(),
                resources: bin.resources().to_vec(),
            });
            blobs.push(cubin);
        }
        let manifest = BundleManifest {
            format_version: BUNDLE_FORMAT_VERSION,
            nvrtc_version: nvrtc,
            entries,
            checksum: String::new(),
        };
        manifest.validate()?;
        for (e, blob) in manifest.entries.iter().zip(&blobs) {
            let p = dir.join(&e.file);
            fsio::write_atomic(&p, blob).map_err(io_err(&p))?;
        }
        let bytes = manifest.clone().encode()?;
        let mp = dir.join(MANIFEST_FILE);
        fsio::write_atomic(&mp, &bytes).map_err(io_err(&mp))?;
        let keep: HashSet<&str> = manifest.entries.iter().map(|e| e.file.as_str()).collect();
        if let Ok(rd) = fs::read_dir(dir) {
            for f in rd.flatten() {
                let name = f.file_name().to_string_lossy().into_owned();
                if name.ends_with(".cubin") && !keep.contains(name.as_str()) {
                    let _ = fs::remove_file(f.path());
                }
            }
        }
        BundleManifest::decode(&bytes)
    }

    /// Opens the bundle in `dir`, verifying the manifest and every cubin's size and checksum.
    pub fn open(dir: impl AsRef<Path>) -> Result<Bundle, BundleError> {
        let dir = dir.as_ref();
        let mp = dir.join(MANIFEST_FILE);
        let manifest = BundleManifest::decode(&fs::read(&mp).map_err(io_err(&mp))?)?;
        let mut cubins = Vec::with_capacity(manifest.entries.len());
        for e in &manifest.entries {
            let p = dir.join(&e.file);
            let bytes = fs::read(&p).map_err(io_err(&p))?;
            if bytes.len() as u64 != e.bytes {
                return Err(BundleError::CubinMismatch {
                    file: e.file.clone(),
                    reason: "size",
                });
            }
            if blake3::hash(&bytes).to_hex().as_str() != e.blake3 {
                return Err(BundleError::CubinMismatch {
                    file: e.file.clone(),
                    reason: "checksum",
                });
            }
            cubins.push(bytes);
        }
        Ok(Bundle {
            dir: dir.to_path_buf(),
            manifest,
            cubins,
        })
    }

    fn position(&self, entry_or_fingerprint: &str, arch: Arch) -> Option<usize> {
        self.manifest.entries.iter().position(|e| {
            e.arch == arch
                && (e.entry == entry_or_fingerprint || e.fingerprint == entry_or_fingerprint)
        })
    }

    /// The cubin for an entry name (or source fingerprint, hex) on `arch`.
    pub fn get(&self, entry_or_fingerprint: &str, arch: Arch) -> Option<&[u8]> {
        self.position(entry_or_fingerprint, arch)
            .map(|i| self.cubins[i].as_slice())
    }

    /// The manifest entry for an entry name (or fingerprint) on `arch`.
    pub fn entry(&self, entry_or_fingerprint: &str, arch: Arch) -> Option<&BundleEntry> {
        self.position(entry_or_fingerprint, arch)
            .map(|i| &self.manifest.entries[i])
    }

    /// The cubin of `src` on `arch`, matched by fingerprint (so a changed source never gets a stale binary).
    pub fn get_source(&self, src: &KernelSource, arch: Arch) -> Option<&[u8]> {
        self.get(src.fingerprint().to_hex().as_str(), arch)
    }

    /// The verified manifest.
    pub fn manifest(&self) -> &BundleManifest {
        &self.manifest
    }

    /// The bundle folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    struct Fake {
        cubin: Vec<u8>,
        arch: Arch,
        resources: Vec<ResourceUsage>,
        nvrtc: (i32, i32),
    }

    impl KernelBinary for Fake {
        fn cubin(&self) -> &[u8] {
            &self.cubin
        }
        fn arch(&self) -> Arch {
            self.arch
        }
        fn resources(&self) -> &[ResourceUsage] {
            &self.resources
        }
        fn nvrtc_version(&self) -> (i32, i32) {
            self.nvrtc
        }
    }

    fn src(entry: &str) -> KernelSource {
        KernelSource {
            entry: entry.into(),
            code: format!("extern \"C\" __global__ void {entry}() {{}}\n"),
            template: "bundle_test".into(),
            template_version: 3,
            options: vec![],
        }
    }

    fn fake(arch: Arch, fill: u8, len: usize) -> Fake {
        Fake {
            cubin: vec![fill; len],
            arch,
            resources: vec![],
            nvrtc: (13, 0),
        }
    }

    fn sample(dir: &Path) -> (Vec<KernelSource>, BundleManifest) {
        let sources = vec![src("gemm_a"), src("gemm_b")];
        let bins = [
            fake(Arch::Sm90a, 1, 100),
            fake(Arch::Sm120, 2, 50),
            fake(Arch::Sm90a, 3, 70),
        ];
        let items = [
            (&sources[0], &bins[0]),
            (&sources[0], &bins[1]),
            (&sources[1], &bins[2]),
        ];
        let m = Bundle::write(dir, items).unwrap();
        (sources, m)
    }

    #[test]
    fn write_open_get_by_entry_and_fingerprint() {
        let dir = tempfile::tempdir().unwrap();
        let (sources, m) = sample(dir.path());
        assert_eq!(m.entries.len(), 3);
        assert_eq!(m.nvrtc_version, Some((13, 0)));
        let b = Bundle::open(dir.path()).unwrap();
        assert_eq!(b.manifest(), &m);
        assert_eq!(b.get("gemm_a", Arch::Sm90a), Some(&[1u8; 100][..]));
        assert_eq!(b.get("gemm_a", Arch::Sm120), Some(&[2u8; 50][..]));
        assert_eq!(b.get("gemm_b", Arch::Sm120), None);
        assert_eq!(b.get("nope", Arch::Sm90a), None);
        let fp = sources[1].fingerprint().to_hex();
        assert_eq!(b.get(fp.as_str(), Arch::Sm90a), Some(&[3u8; 70][..]));
        assert_eq!(b.get_source(&sources[1], Arch::Sm90a), Some(&[3u8; 70][..]));
        let mut changed = sources[1].clone();
        changed.code.push_str("// edited\n");
        assert_eq!(
            b.get_source(&changed, Arch::Sm90a),
            None,
            "an edited source never gets the old binary"
        );
        assert_eq!(b.entry("gemm_b", Arch::Sm90a).unwrap().template_version, 3);
    }

    #[test]
    fn damaged_bundles_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (_, m) = sample(dir.path());
        let cubin = dir.path().join(&m.entries[0].file);
        let good = fs::read(&cubin).unwrap();
        let mut bad = good.clone();
        bad[5] ^= 0x40;
        fs::write(&cubin, &bad).unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::CubinMismatch {
                reason: "checksum",
                ..
            })
        ));
        fs::write(&cubin, &good[..10]).unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::CubinMismatch { reason: "size", .. })
        ));
        fs::remove_file(&cubin).unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::Io { .. })
        ));
        fs::write(&cubin, &good).unwrap();
        assert!(Bundle::open(dir.path()).is_ok());

        let mp = dir.path().join(MANIFEST_FILE);
        let text = fs::read_to_string(&mp).unwrap();
        fs::write(&mp, text.replace("\"bytes\": 100", "\"bytes\": 101")).unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::ManifestChecksum)
        ));
        fs::write(
            &mp,
            text.replace("\"format_version\": 1", "\"format_version\": 2"),
        )
        .unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::WrongVersion {
                found: 2,
                expected: 1
            })
        ));
        fs::write(&mp, &text[..text.len() / 2]).unwrap();
        assert!(matches!(
            Bundle::open(dir.path()),
            Err(BundleError::Parse(_))
        ));
    }

    #[test]
    fn unsafe_names_duplicates_and_mixed_nvrtc_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let (_, m) = sample(dir.path());
        let mut evil = m.clone();
        evil.entries[0].file = "../../etc/passwd".into();
        let bytes = evil.encode().unwrap();
        assert!(matches!(
            BundleManifest::decode(&bytes),
            Err(BundleError::BadFileName(_))
        ));

        let s = src("dup");
        let (a, b) = (fake(Arch::Sm90a, 1, 4), fake(Arch::Sm90a, 2, 4));
        let other = tempfile::tempdir().unwrap();
        assert!(matches!(
            Bundle::write(other.path(), [(&s, &a), (&s, &b)]),
            Err(BundleError::Duplicate { .. })
        ));
        let mut c = fake(Arch::Sm120, 1, 4);
        c.nvrtc = (12, 8);
        assert!(matches!(
            Bundle::write(other.path(), [(&s, &a), (&s, &c)]),
            Err(BundleError::MixedNvrtc { .. })
        ));
        assert!(
            !other.path().join(MANIFEST_FILE).exists(),
            "a refused bundle writes no manifest"
        );
    }

    #[test]
    fn rewriting_a_bundle_drops_unused_cubins() {
        let dir = tempfile::tempdir().unwrap();
        sample(dir.path());
        let only = src("only");
        let bin = fake(Arch::Sm80, 9, 8);
        Bundle::write(dir.path(), [(&only, &bin)]).unwrap();
        let cubins = fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".cubin")
            })
            .count();
        assert_eq!(cubins, 1);
        let b = Bundle::open(dir.path()).unwrap();
        assert_eq!(b.get("only", Arch::Sm80), Some(&[9u8; 8][..]));
        assert_eq!(b.get("gemm_a", Arch::Sm90a), None);
        let empty: [(&KernelSource, &Fake); 0] = [];
        assert_eq!(
            Bundle::write(dir.path(), empty).unwrap().nvrtc_version,
            None
        );
    }

    #[test]
    fn real_compiles_bundle_without_nvrtc_at_load() {
        if !crate::aot::nvrtc_or_skip("real_compiles_bundle_without_nvrtc_at_load") {
            return;
        }
        let s = KernelSource {
            entry: "bundle_add".into(),
            code: "extern \"C\" __global__ void bundle_add(float* y) { __shared__ float t[64]; t[threadIdx.x] = y[threadIdx.x]; __syncthreads(); y[threadIdx.x] = t[63 - threadIdx.x]; }\n".into(),
            template: "bundle_test".into(),
            template_version: 1,
            options: vec![],
        };
        let c = crate::aot::compile(&s, Arch::Sm90a).unwrap();
        let dir = tempfile::tempdir().unwrap();
        Bundle::write(dir.path(), [(&s, &c)]).unwrap();
        let b = Bundle::open(dir.path()).unwrap();
        assert_eq!(b.get("bundle_add", Arch::Sm90a), Some(c.cubin.as_slice()));
        let e = b.entry("bundle_add", Arch::Sm90a).unwrap();
        assert_eq!(e.resources, c.resources);
        assert_eq!(e.resources[0].shared_bytes, 256);
        assert_eq!(b.manifest().nvrtc_version, Some(c.nvrtc_version));
    }

    fn arb_manifest() -> impl Strategy<Value = BundleManifest> {
        proptest::collection::vec(
            (
                "[a-z][a-z0-9_]{0,12}",
                proptest::sample::select(Arch::ALL.to_vec()),
                any::<u32>(),
                0u64..1 << 40,
                0u32..256,
            ),
            0..5,
        )
        .prop_map(|rows| {
            let mut seen = HashSet::new();
            let entries = rows
                .into_iter()
                .filter(|(e, a, ..)| seen.insert((e.clone(), *a)))
                .map(|(entry, arch, tv, bytes, regs)| {
                    let fp = blake3::hash(format!("{entry}{arch}").as_bytes())
                        .to_hex()
                        .to_string();
                    BundleEntry {
                        file: cubin_file_name(&entry, arch, &fp),
                        template: "t\"quoted\"".into(),
                        template_version: tv,
                        fingerprint: fp,
                        arch,
                        bytes,
                        blake3: blake3::hash(&bytes.to_le_bytes()).to_hex().to_string(),
                        resources: vec![ResourceUsage {
                            function: entry.clone(),
                            arch,
                            is_entry: true,
                            registers: regs,
                            spill_store_bytes: 0,
                            spill_load_bytes: 0,
                            stack_frame_bytes: 0,
                            cumulative_stack_bytes: None,
                            shared_bytes: regs * 16,
                            barriers: 1,
                            const_bytes: Some(regs),
                        }],
                        entry,
                    }
                })
                .collect();
            BundleManifest {
                format_version: BUNDLE_FORMAT_VERSION,
                nvrtc_version: Some((13, 0)),
                entries,
                checksum: String::new(),
            }
        })
    }

    proptest! {
        #[test]
        fn manifests_round_trip(m in arb_manifest()) {
            let bytes = m.clone().encode().unwrap();
            let back = BundleManifest::decode(&bytes).unwrap();
            prop_assert_eq!(&back.entries, &m.entries);
            prop_assert_eq!(back.nvrtc_version, m.nvrtc_version);
        }

        #[test]
        fn corrupted_manifests_never_decode_to_something_else(m in arb_manifest(), pos in any::<usize>(), xor in 1u8..=255) {
            let bytes = m.clone().encode().unwrap();
            let good = BundleManifest::decode(&bytes).unwrap();
            let mut bad = bytes.clone();
            let p = pos % bad.len();
            bad[p] ^= xor;
            // Either refused, or (a whitespace-only change) exactly the same manifest.
            if let Ok(decoded) = BundleManifest::decode(&bad) {
                prop_assert_eq!(decoded, good);
            }
        }
    }
}
