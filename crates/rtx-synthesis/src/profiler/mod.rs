//! profiler (in progress).
