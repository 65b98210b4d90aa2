//! rtx-runtime: owned CUDA devices, streams, events, a caching allocator and module loading.
//!
//! Everything is reached through `cudarc` with dynamic loading, so this crate builds and its
//! CPU-side tests run on machines without CUDA; [`Device::count`] is 0 there.
