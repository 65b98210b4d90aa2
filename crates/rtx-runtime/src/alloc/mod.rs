//! Device memory: a size-class caching allocator ([`CachingAllocator`]) and the buffers it hands
//! out ([`DeviceBuffer`]). The bookkeeping ([`Pool`]) is pure CPU code, generic over a
//! [`RawAllocator`], so it is property-tested without a GPU.

mod buffer;
mod cuda;
mod pool;

pub use buffer::DeviceBuffer;
pub use cuda::CachingAllocator;
pub use pool::{
    size_class, AllocStats, Block, Pool, RawAllocator, StreamId, LARGE_GRANULE, MEDIUM_LIMIT,
    SMALL_GRANULE, SMALL_LIMIT,
};
