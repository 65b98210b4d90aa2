//! TEMPORARY local parser of ptxas `-v` lines, to be replaced by
//! `rtx_synthesis::aot::parse_ptxas_log` (aot/resources.rs) once that lands in `main`.
//!
//! Reads, per entry function, the block that follows `Compiling entry function 'NAME'`:
//! `N bytes stack frame, N bytes spill stores, N bytes spill loads` and
//! `Used N registers, ..., N bytes smem, ...`.

/// Resource use of one kernel as ptxas reported it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KernelResources {
    /// Registers per thread.
    pub registers: Option<u32>,
    /// Spill stores, bytes.
    pub spill_store_bytes: Option<u32>,
    /// Spill loads, bytes.
    pub spill_load_bytes: Option<u32>,
    /// Stack frame, bytes.
    pub stack_bytes: Option<u32>,
    /// Static shared memory, bytes.
    pub smem_bytes: Option<u32>,
}

/// The number right before `unit` in `line` (e.g. `"12 registers"` with unit `registers`).
fn number_before(line: &str, unit: &str) -> Option<u32> {
    let idx = line.find(unit)?;
    line[..idx].split_whitespace().last()?.parse().ok()
}

/// Resources of entry function `entry` in an NVRTC log; `None` when ptxas said nothing about it.
pub fn resources_of(log: &str, entry: &str) -> Option<KernelResources> {
    let marker = format!("Compiling entry function '{entry}'");
    let start = log.find(&marker)? + marker.len();
    let rest = &log[start..];
    let block = rest
        .find("Compiling entry function")
        .map_or(rest, |end| &rest[..end]);
    let mut r = KernelResources::default();
    for line in block.lines() {
        if line.contains("stack frame") {
            r.stack_bytes = number_before(line, "bytes stack frame");
            r.spill_store_bytes = number_before(line, "bytes spill stores");
            r.spill_load_bytes = number_before(line, "bytes spill loads");
        }
        if line.contains("Used") && line.contains("registers") {
            r.registers = number_before(line, "registers");
            r.smem_bytes = number_before(line, "bytes smem").or(Some(0));
        }
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'a' for 'sm_90a'
ptxas info    : Function properties for a
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 16384 bytes smem, 400 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_90a'
ptxas info    : Function properties for b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 10 registers, used 0 barriers
";

    #[test]
    fn parses_each_entry_block() {
        let a = resources_of(LOG, "a").unwrap();
        assert_eq!(a.registers, Some(168));
        assert_eq!(a.smem_bytes, Some(16384));
        assert_eq!(
            (a.stack_bytes, a.spill_store_bytes, a.spill_load_bytes),
            (Some(8), Some(4), Some(12))
        );
        let b = resources_of(LOG, "b").unwrap();
        assert_eq!(b.registers, Some(10));
        assert_eq!(b.smem_bytes, Some(0));
        assert_eq!(resources_of(LOG, "c"), None);
    }
}
