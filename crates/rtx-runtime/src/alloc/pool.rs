//! Size-class pool bookkeeping, pure CPU, generic over a [`RawAllocator`] backend.
//!
//! # Size classes
//! Every request is rounded up to a class (see [`size_class`]):
//! - up to 1 MiB: multiples of 512 B;
//! - above 1 MiB up to 32 MiB: four classes per power of two (`2^k * {1, 1.25, 1.5, 1.75}`),
//!   so at most 25 % is wasted;
//! - above 32 MiB: multiples of 2 MiB.
//!
//! A freed block is cached under `(stream, class)` and handed out again only for a request of
//! the same class *on the same stream*: work queued on one stream is ordered, so reuse there needs
//! no synchronization (using a buffer on a second stream and then dropping it is the caller's
//! responsibility, as with any stream-ordered allocator). [`Pool::empty_cache`] synchronizes the
//! backend and returns every cached block. When the backend reports out-of-memory the pool
//! empties its cache and retries once before returning [`RuntimeError::OutOfMemory`].

use crate::error::RuntimeError;
use std::collections::HashMap;

/// Identifies a stream for stream-ordered reuse (unique per stream over the process lifetime).
pub type StreamId = u64;

/// Granularity of the small classes.
pub const SMALL_GRANULE: usize = 512;
/// Largest request served by the 512 B classes.
pub const SMALL_LIMIT: usize = 1 << 20;
/// Largest request served by the quarter-power-of-two classes.
pub const MEDIUM_LIMIT: usize = 32 << 20;
/// Granularity of the large classes.
pub const LARGE_GRANULE: usize = 2 << 20;

fn round_up(v: usize, to: usize) -> Option<usize> {
    v.checked_add(to - 1).map(|x| x / to * to)
}

/// The class (bytes actually reserved) for a request of `bytes`; `None` if it overflows.
/// A request of 0 bytes gets the smallest class so that every buffer has a valid address.
pub fn size_class(bytes: usize) -> Option<usize> {
    let b = bytes.max(1);
    if b <= SMALL_LIMIT {
        round_up(b, SMALL_GRANULE)
    } else if b <= MEDIUM_LIMIT {
        let pow = 1usize << (usize::BITS - 1 - b.leading_zeros());
        round_up(b, pow / 4)
    } else {
        round_up(b, LARGE_GRANULE)
    }
}

/// The memory source a [`Pool`] draws from (the CUDA driver, or a fake in tests).
pub trait RawAllocator {
    /// Reserves exactly `bytes` and returns its address. Out-of-memory must be reported as
    /// [`RuntimeError::OutOfMemory`] so that the pool can empty its cache and retry.
    fn alloc(&mut self, bytes: usize) -> Result<u64, RuntimeError>;
    /// Returns a block obtained from [`RawAllocator::alloc`] with the same size.
    fn free(&mut self, ptr: u64, bytes: usize) -> Result<(), RuntimeError>;
    /// Waits until no queued work can still touch cached blocks (called before freeing them).
    fn synchronize(&mut self) -> Result<(), RuntimeError> {
        Ok(())
    }
    /// (free, total) bytes of the underlying memory, for error reports.
    fn mem_info(&mut self) -> Result<(usize, usize), RuntimeError>;
}

/// Allocator counters; all byte counts are in class-rounded bytes unless noted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllocStats {
    /// Bytes in blocks currently handed out.
    pub in_use: usize,
    /// Bytes the callers asked for in the blocks currently handed out (before rounding).
    pub requested_in_use: usize,
    /// Bytes in freed blocks kept for reuse.
    pub cached: usize,
    /// Highest `in_use` seen (since creation or [`Pool::reset_peak`]).
    pub peak: usize,
    /// Highest `in_use + cached` (memory reserved from the backend) seen.
    pub peak_reserved: usize,
    /// Requests served from the cache.
    pub hits: u64,
    /// Requests that went to the backend.
    pub misses: u64,
    /// Successful backend allocations.
    pub backend_allocs: u64,
    /// Backend frees.
    pub backend_frees: u64,
    /// Times an out-of-memory made the pool empty its cache and retry.
    pub oom_retries: u64,
    /// Blocks currently handed out.
    pub live_blocks: usize,
    /// Blocks currently cached.
    pub cached_blocks: usize,
}

impl AllocStats {
    /// Bytes held from the backend (`in_use + cached`).
    pub fn reserved(&self) -> usize {
        self.in_use + self.cached
    }
}

/// A block handed out by the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Device address.
    pub ptr: u64,
    /// Class size actually reserved.
    pub size: usize,
    /// Bytes requested.
    pub requested: usize,
    /// Stream the block belongs to.
    pub stream: StreamId,
}

/// Size-class caching pool over a backend.
#[derive(Debug)]
pub struct Pool<A: RawAllocator> {
    backend: A,
    free: HashMap<(StreamId, usize), Vec<u64>>,
    live: HashMap<u64, Block>,
    live_per_stream: HashMap<StreamId, usize>,
    retired: std::collections::HashSet<StreamId>,
    stats: AllocStats,
}

impl<A: RawAllocator> Pool<A> {
    /// An empty pool over `backend`.
    pub fn new(backend: A) -> Self {
        Pool {
            backend,
            free: HashMap::new(),
            live: HashMap::new(),
            live_per_stream: HashMap::new(),
            retired: Default::default(),
            stats: AllocStats::default(),
        }
    }

    /// The backend (e.g. for a fake's counters in tests).
    pub fn backend(&self) -> &A {
        &self.backend
    }

    /// Current counters.
    pub fn stats(&self) -> AllocStats {
        self.stats
    }

    /// Resets `peak` and `peak_reserved` to the current values.
    pub fn reset_peak(&mut self) {
        self.stats.peak = self.stats.in_use;
        self.stats.peak_reserved = self.stats.reserved();
    }

    fn oom(&mut self, requested: usize) -> RuntimeError {
        let (free, total) = self.backend.mem_info().unwrap_or((0, 0));
        RuntimeError::OutOfMemory {
            requested,
            free,
            total,
        }
    }

    /// Hands out a block of at least `bytes` for use on `stream`.
    pub fn allocate(&mut self, bytes: usize, stream: StreamId) -> Result<Block, RuntimeError> {
        if self.retired.contains(&stream) {
            return Err(RuntimeError::InvalidArgument {
                op: "allocate",
                reason: format!("stream {stream} was destroyed"),
            });
        }
        let Some(size) = size_class(bytes) else {
            return Err(self.oom(bytes));
        };
        let cached = self.free.get_mut(&(stream, size)).and_then(|v| v.pop());
        let ptr = match cached {
            Some(p) => {
                self.stats.hits += 1;
                self.stats.cached -= size;
                self.stats.cached_blocks -= 1;
                p
            }
            None => {
                self.stats.misses += 1;
                let p = match self.backend.alloc(size) {
                    Ok(p) => p,
                    Err(e) if e.is_out_of_memory() => {
                        self.stats.oom_retries += 1;
                        tracing::debug!(bytes, size, "out of memory: emptying cache and retrying");
                        self.empty_cache()?;
                        match self.backend.alloc(size) {
                            Ok(p) => p,
                            Err(e) if e.is_out_of_memory() => return Err(self.oom(bytes)),
                            Err(e) => return Err(e),
                        }
                    }
                    Err(e) => return Err(e),
                };
                self.stats.backend_allocs += 1;
                p
            }
        };
        let block = Block {
            ptr,
            size,
            requested: bytes,
            stream,
        };
        if self.live.insert(ptr, block).is_some() {
            // Only possible with a broken backend; keep the books consistent and refuse.
            return Err(RuntimeError::InvalidArgument {
                op: "allocate",
                reason: format!("backend returned address {ptr:#x} that is already in use"),
            });
        }
        *self.live_per_stream.entry(stream).or_insert(0) += 1;
        self.stats.in_use += size;
        self.stats.requested_in_use += bytes;
        self.stats.live_blocks += 1;
        self.stats.peak = self.stats.peak.max(self.stats.in_use);
        self.stats.peak_reserved = self.stats.peak_reserved.max(self.stats.reserved());
        Ok(block)
    }

    /// Takes back a block handed out by [`Pool::allocate`] and caches it for its stream (or
    /// frees it at once if its stream was retired).
    pub fn release(&mut self, ptr: u64) -> Result<(), RuntimeError> {
        let b = self
            .live
            .remove(&ptr)
            .ok_or_else(|| RuntimeError::InvalidArgument {
                op: "release",
                reason: format!("address {ptr:#x} was not handed out by this pool"),
            })?;
        self.stats.in_use -= b.size;
        self.stats.requested_in_use -= b.requested;
        self.stats.live_blocks -= 1;
        let remaining = match self.live_per_stream.get_mut(&b.stream) {
            Some(n) => {
                *n -= 1;
                *n
            }
            None => 0,
        };
        if remaining == 0 {
            self.live_per_stream.remove(&b.stream);
        }
        if self.retired.contains(&b.stream) {
            if remaining == 0 {
                self.retired.remove(&b.stream);
            }
            self.stats.backend_frees += 1;
            return self.backend.free(b.ptr, b.size);
        }
        self.free.entry((b.stream, b.size)).or_default().push(b.ptr);
        self.stats.cached += b.size;
        self.stats.cached_blocks += 1;
        Ok(())
    }

    fn free_cached_where(
        &mut self,
        keep: impl Fn(&(StreamId, usize)) -> bool,
    ) -> Result<usize, RuntimeError> {
        let keys: Vec<_> = self.free.keys().copied().filter(|k| !keep(k)).collect();
        let mut first_err = None;
        let mut freed = 0;
        for key in keys {
            let ptrs = self.free.remove(&key).unwrap_or_default();
            for p in ptrs {
                self.stats.cached -= key.1;
                self.stats.cached_blocks -= 1;
                self.stats.backend_frees += 1;
                freed += key.1;
                if let Err(e) = self.backend.free(p, key.1) {
                    tracing::warn!(ptr = p, bytes = key.1, "freeing cached block failed: {e}");
                    first_err.get_or_insert(e);
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(freed),
        }
    }

    /// Synchronizes the backend and returns every cached block to it; returns the bytes freed.
    pub fn empty_cache(&mut self) -> Result<usize, RuntimeError> {
        if self.stats.cached_blocks == 0 {
            return Ok(0);
        }
        self.backend.synchronize()?;
        self.free_cached_where(|_| false)
    }

    /// Marks `stream` as destroyed: its cached blocks go back to the backend now and its live
    /// blocks when they are released. The caller must have synchronized the stream.
    pub fn retire_stream(&mut self, stream: StreamId) -> Result<(), RuntimeError> {
        if self.live_per_stream.contains_key(&stream) {
            self.retired.insert(stream);
        }
        self.free_cached_where(|k| k.0 != stream).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    /// A fake device heap with a capacity; hands out unique, never-reused addresses.
    #[derive(Debug, Default)]
    struct Fake {
        capacity: usize,
        held: HashMap<u64, usize>,
        next: u64,
        syncs: u64,
        bad_frees: u64,
    }

    impl Fake {
        fn new(capacity: usize) -> Self {
            Fake {
                capacity,
                next: 0x1000,
                ..Default::default()
            }
        }
        fn held_bytes(&self) -> usize {
            self.held.values().sum()
        }
    }

    impl RawAllocator for Fake {
        fn alloc(&mut self, bytes: usize) -> Result<u64, RuntimeError> {
            if self.held_bytes() + bytes > self.capacity {
                return Err(RuntimeError::OutOfMemory {
                    requested: bytes,
                    free: self.capacity - self.held_bytes(),
                    total: self.capacity,
                });
            }
            let p = self.next;
            self.next += bytes as u64;
            self.held.insert(p, bytes);
            Ok(p)
        }
        fn free(&mut self, ptr: u64, bytes: usize) -> Result<(), RuntimeError> {
            match self.held.remove(&ptr) {
                Some(b) if b == bytes => Ok(()),
                _ => {
                    self.bad_frees += 1;
                    Err(RuntimeError::InvalidArgument {
                        op: "fake free",
                        reason: format!("{ptr:#x}/{bytes}"),
                    })
                }
            }
        }
        fn synchronize(&mut self) -> Result<(), RuntimeError> {
            self.syncs += 1;
            Ok(())
        }
        fn mem_info(&mut self) -> Result<(usize, usize), RuntimeError> {
            Ok((self.capacity - self.held_bytes(), self.capacity))
        }
    }

    #[test]
    fn size_classes_documented_examples() {
        assert_eq!(size_class(0), Some(512));
        assert_eq!(size_class(1), Some(512));
        assert_eq!(size_class(512), Some(512));
        assert_eq!(size_class(513), Some(1024));
        assert_eq!(size_class(1 << 20), Some(1 << 20));
        assert_eq!(size_class((1 << 20) + 1), Some(1_310_720)); // 1.25 MiB
        assert_eq!(size_class(3 << 20), Some(3 << 20)); // 1.5 * 2 MiB
        assert_eq!(size_class(32 << 20), Some(32 << 20));
        assert_eq!(size_class((32 << 20) + 1), Some(34 << 20));
        assert_eq!(size_class(usize::MAX), None);
    }

    proptest! {
        #[test]
        fn size_class_properties(bytes in 0usize..(1usize << 40)) {
            let c = size_class(bytes).unwrap();
            prop_assert!(c >= bytes.max(1));
            prop_assert_eq!(c % SMALL_GRANULE, 0);
            // Waste bound: 512 B small, 25 % medium, 2 MiB large.
            if bytes <= SMALL_LIMIT {
                prop_assert!(c - bytes.max(1) < SMALL_GRANULE);
            } else if bytes <= MEDIUM_LIMIT {
                prop_assert!((c - bytes) * 4 <= bytes);
            } else {
                prop_assert!(c - bytes < LARGE_GRANULE);
            }
            // Idempotent: a class is its own class.
            prop_assert_eq!(size_class(c), Some(c));
        }
    }

    #[test]
    fn reuse_same_stream_counts_hit() {
        let mut p = Pool::new(Fake::new(1 << 30));
        let a = p.allocate(1000, 1).unwrap();
        p.release(a.ptr).unwrap();
        let b = p.allocate(900, 1).unwrap(); // same 1024-byte class
        assert_eq!(a.ptr, b.ptr);
        let s = p.stats();
        assert_eq!((s.hits, s.misses), (1, 1));
        assert_eq!(s.in_use, 1024);
        assert_eq!(s.requested_in_use, 900);
        // Other stream: no reuse.
        p.release(b.ptr).unwrap();
        let c = p.allocate(1000, 2).unwrap();
        assert_ne!(c.ptr, a.ptr);
        assert_eq!(p.stats().misses, 2);
    }

    #[test]
    fn oom_empties_cache_and_retries_once() {
        let mut p = Pool::new(Fake::new(4096));
        let a = p.allocate(2048, 1).unwrap();
        let b = p.allocate(2048, 1).unwrap();
        p.release(a.ptr).unwrap();
        p.release(b.ptr).unwrap();
        // 4096 B cached in the 2048 class; a 4096 request only fits after emptying.
        let c = p.allocate(4096, 1).unwrap();
        let s = p.stats();
        assert_eq!(s.oom_retries, 1);
        assert_eq!(s.cached, 0);
        assert_eq!(s.in_use, 4096);
        assert!(
            p.backend().syncs >= 1,
            "cache must be synchronized before freeing"
        );
        // Now a request that cannot fit at all reports the caller's size and the free bytes.
        match p.allocate(100, 1) {
            Err(RuntimeError::OutOfMemory {
                requested,
                free,
                total,
            }) => {
                assert_eq!((requested, free, total), (100, 0, 4096));
            }
            other => panic!("expected OutOfMemory, got {other:?}"),
        }
        p.release(c.ptr).unwrap();
        assert_eq!(p.stats().oom_retries, 2);
    }

    #[test]
    fn overflowing_request_is_oom_not_panic() {
        let mut p = Pool::new(Fake::new(4096));
        assert!(matches!(
            p.allocate(usize::MAX, 0),
            Err(RuntimeError::OutOfMemory {
                requested: usize::MAX,
                ..
            })
        ));
    }

    #[test]
    fn double_release_is_an_error() {
        let mut p = Pool::new(Fake::new(1 << 20));
        let a = p.allocate(10, 0).unwrap();
        p.release(a.ptr).unwrap();
        assert!(matches!(
            p.release(a.ptr),
            Err(RuntimeError::InvalidArgument { .. })
        ));
        assert_eq!(p.stats().cached_blocks, 1);
    }

    #[test]
    fn retire_stream_frees_cached_and_later_releases() {
        let mut p = Pool::new(Fake::new(1 << 20));
        let a = p.allocate(10, 7).unwrap();
        let b = p.allocate(10, 7).unwrap();
        let keep = p.allocate(10, 8).unwrap();
        p.release(keep.ptr).unwrap();
        p.release(a.ptr).unwrap();
        p.retire_stream(7).unwrap();
        assert_eq!(p.stats().cached, 512, "only stream 8's block stays cached");
        p.release(b.ptr).unwrap();
        assert_eq!(p.backend().held_bytes(), 512);
        assert!(
            p.allocate(10, 7).is_ok(),
            "retired entry dropped once no live blocks remain"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Alloc { bytes: usize, stream: u64 },
        Free { idx: usize },
        Empty,
        Retire { stream: u64 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (prop_oneof![0usize..4096, 0usize..(3 << 20), (30usize << 20)..(40 << 20)], 0u64..3)
                .prop_map(|(bytes, stream)| Op::Alloc { bytes, stream }),
            5 => any::<usize>().prop_map(|idx| Op::Free { idx }),
            1 => Just(Op::Empty),
            1 => (0u64..3).prop_map(|stream| Op::Retire { stream }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn pool_invariants(ops in proptest::collection::vec(op(), 1..120),
                           capacity in prop_oneof![Just(64usize << 20), Just(256usize << 20)]) {
            let mut p = Pool::new(Fake::new(capacity));
            let mut live: Vec<Block> = Vec::new();
            // Which stream each cached (released) address belongs to.
            let mut released_on: HashMap<u64, u64> = HashMap::new();
            let mut retired: HashSet<u64> = HashSet::new();
            for op in ops {
                match op {
                    Op::Alloc { bytes, stream } => {
                        match p.allocate(bytes, stream) {
                            Ok(b) => {
                                prop_assert!(!retired.contains(&stream), "allocation on a retired stream");
                                prop_assert!(b.size >= bytes);
                                prop_assert!(!live.iter().any(|l| l.ptr == b.ptr), "block handed out twice");
                                if let Some(s) = released_on.remove(&b.ptr) {
                                    prop_assert_eq!(s, stream, "cached block crossed streams");
                                }
                                live.push(b);
                            }
                            Err(RuntimeError::OutOfMemory { requested, total, .. }) => {
                                prop_assert_eq!(requested, bytes);
                                prop_assert_eq!(total, capacity);
                                prop_assert_eq!(p.stats().cached, 0, "OOM must first empty the cache");
                            }
                            Err(RuntimeError::InvalidArgument { .. }) => {
                                prop_assert!(retired.contains(&stream));
                            }
                            Err(e) => prop_assert!(false, "unexpected error {e}"),
                        }
                    }
                    Op::Free { idx } => {
                        if !live.is_empty() {
                            let b = live.swap_remove(idx % live.len());
                            p.release(b.ptr).unwrap();
                            if !retired.contains(&b.stream) {
                                released_on.insert(b.ptr, b.stream);
                            } else if !live.iter().any(|l| l.stream == b.stream) {
                                retired.remove(&b.stream);
                            }
                        }
                    }
                    Op::Empty => {
                        p.empty_cache().unwrap();
                        prop_assert_eq!(p.stats().cached, 0);
                        released_on.clear();
                    }
                    Op::Retire { stream } => {
                        p.retire_stream(stream).unwrap();
                        released_on.retain(|_, s| *s != stream);
                        if live.iter().any(|l| l.stream == stream) {
                            retired.insert(stream);
                        }
                    }
                }
                let s = p.stats();
                prop_assert_eq!(s.in_use + s.cached, p.backend().held_bytes(),
                    "in_use + cached must equal what the backend holds");
                prop_assert_eq!(s.in_use, live.iter().map(|b| b.size).sum::<usize>());
                prop_assert_eq!(s.live_blocks, live.len());
                prop_assert!(s.peak >= s.in_use);
                prop_assert!(s.peak_reserved >= s.reserved());
                prop_assert_eq!(p.backend().bad_frees, 0);
            }
            for b in live.drain(..) {
                p.release(b.ptr).unwrap();
            }
            p.empty_cache().unwrap();
            prop_assert_eq!(p.backend().held_bytes(), 0);
        }
    }
}
