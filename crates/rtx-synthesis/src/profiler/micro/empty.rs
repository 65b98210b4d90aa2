//! [`EmptyKernel`]: a kernel that does nothing, for the launch-overhead figure.

use super::{check_block, MicroKernel};
use crate::templates::codegen::CudaWriter;
use crate::templates::ConstraintViolation;
use crate::Arch;

/// `extern "C" __global__ void rtx_micro_empty()`: no parameters, no work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EmptyKernel;

impl MicroKernel for EmptyKernel {
    fn template(&self) -> &'static str {
        "profiler.empty"
    }

    fn entry(&self) -> String {
        "rtx_micro_empty".to_string()
    }

    fn block_threads(&self) -> u32 {
        32
    }

    fn check(&self, _arch: Arch) -> Result<(), ConstraintViolation> {
        check_block(self, self.block_threads())
    }

    fn write(&self, _arch: Arch, w: &mut CudaWriter) {
        w.line(format!(
            "extern \"C\" __global__ void {}() {{}}",
            self.entry()
        ));
    }
}
