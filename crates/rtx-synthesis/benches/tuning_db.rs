//! Tuning-database lookup cost in a database of 2,000 entries (20 shape families of 100
//! shapes): an exact hit, a nearest-bucket hit, and a miss served the default; each through
//! the full typed `lookup` (key fingerprinting, re-check and re-emit of the served configs)
//! and through the raw `candidates` index.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use rtx_synthesis::templates::{ConstraintViolation, KernelSource, LaunchDims, Template};
use rtx_synthesis::tuner::{
    DbEntry, DeviceKey, LookupPolicy, OpSignature, ProblemSignature, StoredConfig, TimingStats,
    TuneKey, TuningDb,
};
use rtx_synthesis::{Arch, DType};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
struct Cfg {
    bm: u32,
    bn: u32,
    stages: u32,
}

#[derive(Debug, Clone)]
struct Prob {
    family: u32,
    m: u32,
    n: u32,
    k: u32,
}

impl ProblemSignature for Prob {
    fn signature(&self) -> OpSignature {
        OpSignature {
            op: "bench_gemm".into(),
            dtypes: vec![DType::Bf16, DType::Bf16, DType::Bf16],
            layouts: vec!["row".into(), "col".into(), "row".into()],
            shape: vec![self.m as u64, self.n as u64, self.k as u64, 1],
            attrs: vec![("family".into(), self.family.to_string())],
        }
    }
}

struct Tpl;

impl Template for Tpl {
    type Problem = Prob;
    type Config = Cfg;
    fn name(&self) -> &'static str {
        "bench"
    }
    fn version(&self) -> u32 {
        1
    }
    fn space(&self, _p: &Prob, _a: Arch) -> Vec<Cfg> {
        vec![self.default_config(_p, _a)]
    }
    fn check(&self, _p: &Prob, _c: &Cfg, _a: Arch) -> Result<(), ConstraintViolation> {
        Ok(())
    }
    fn default_config(&self, _p: &Prob, _a: Arch) -> Cfg {
        Cfg {
            bm: 128,
            bn: 128,
            stages: 3,
        }
    }
    fn emit(&self, p: &Prob, c: &Cfg, _a: Arch) -> Result<KernelSource, ConstraintViolation> {
        // A source of realistic size (~8 KB), as the fingerprint hashes all of it.
        let body = "  acc += a[i] * b[i];\n".repeat(350);
        Ok(KernelSource {
            entry: format!("gemm_{}_{}_{}_f{}", c.bm, c.bn, c.stages, p.family),
            code: format!("// bm={} bn={} stages={}\n{body}", c.bm, c.bn, c.stages),
            template: "bench".into(),
            template_version: 1,
            options: vec![],
        })
    }
    fn launch(&self, _p: &Prob, _c: &Cfg) -> LaunchDims {
        LaunchDims {
            grid: [1, 1, 1],
            block: [128, 1, 1],
            dynamic_smem: 0,
        }
    }
}

fn build_db(dir: &std::path::Path, device: &DeviceKey) -> TuningDb {
    let mut entries = Vec::new();
    // Placeholder stats: the bench measures lookups, the stored times are never read as data.
    let stats = TimingStats::from_samples(vec![1.0]).expect("one finite sample");
    for family in 0..20 {
        for i in 0..100u32 {
            let p = Prob {
                family,
                m: 256 << (i % 6),
                n: 256 << ((i / 6) % 6),
                k: 512 << (i % 3),
            };
            let key = TuneKey::new(&Tpl, &p, Arch::Sm90a, device).expect("default emits");
            if entries.iter().any(|e: &DbEntry| e.key == key) {
                continue;
            }
            let stored = |c: Cfg| StoredConfig {
                fingerprint: Tpl
                    .emit(&p, &c, Arch::Sm90a)
                    .expect("emits")
                    .fingerprint()
                    .to_hex()
                    .to_string(),
                config: serde_json::to_value(c).expect("serialises"),
                stats: stats.clone(),
            };
            entries.push(DbEntry {
                key,
                winner: stored(Cfg {
                    bm: 128,
                    bn: 256,
                    stages: 4,
                }),
                runners_up: vec![
                    stored(Cfg {
                        bm: 128,
                        bn: 128,
                        stages: 4,
                    }),
                    stored(Cfg {
                        bm: 64,
                        bn: 256,
                        stages: 3,
                    }),
                ],
                meta: rtx_synthesis::tuner::db::EntryMeta {
                    created_unix_s: 0,
                    strategy: "bench".into(),
                    measured: 0,
                    failed: 0,
                    space: 0,
                    tuner_version: "bench".into(),
                },
            });
        }
    }
    let mut db = TuningDb::open(dir.join("tuning.db")).expect("opens");
    db.merge(entries).expect("merges");
    db
}

fn bench_lookup(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let device = DeviceKey::new("NVIDIA H200", (9, 0), (13, 0));
    let db = build_db(dir.path(), &device);
    let policy = LookupPolicy::default();
    let exact = Prob {
        family: 7,
        m: 1024,
        n: 512,
        k: 1024,
    };
    let near = Prob {
        family: 7,
        m: 1000,
        n: 520,
        k: 1100,
    };
    let miss = Prob {
        family: 99,
        m: 1024,
        n: 1024,
        k: 1024,
    };
    let key_exact = TuneKey::new(&Tpl, &exact, Arch::Sm90a, &device).expect("key");
    let key_near = TuneKey::new(&Tpl, &near, Arch::Sm90a, &device).expect("key");

    c.bench_function("tuning_db_lookup_exact", |b| {
        b.iter(|| {
            db.lookup(&Tpl, black_box(&exact), Arch::Sm90a, &device, &policy)
                .expect("lookup")
        })
    });
    c.bench_function("tuning_db_lookup_nearest_bucket", |b| {
        b.iter(|| {
            db.lookup(&Tpl, black_box(&near), Arch::Sm90a, &device, &policy)
                .expect("lookup")
        })
    });
    c.bench_function("tuning_db_lookup_miss_default", |b| {
        b.iter(|| {
            db.lookup(&Tpl, black_box(&miss), Arch::Sm90a, &device, &policy)
                .expect("lookup")
        })
    });
    c.bench_function("tuning_db_candidates_exact_key", |b| {
        b.iter(|| db.candidates(black_box(&key_exact), 4.0).len())
    });
    c.bench_function("tuning_db_candidates_nearest_key", |b| {
        b.iter(|| db.candidates(black_box(&key_near), 4.0).len())
    });
    c.bench_function("tuning_db_open_2000_entries", |b| {
        b.iter(|| TuningDb::open(db.path()).expect("opens").len())
    });
}

criterion_group!(benches, bench_lookup);
criterion_main!(benches);
