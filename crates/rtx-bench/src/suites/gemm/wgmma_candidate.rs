//! The Hopper wgmma GEMM template as a benchmark candidate (launched through
//! `WgmmaGemm::enqueue`, which encodes its TMA descriptors).
//!
//! No tuner has landed yet, so the candidate runs the template's default config (label
//! `rtx-wgmma-default`); once tuned configs exist, a tuned candidate returns this one from
//! `untuned()` and the report gets the `untuned` ratio.

use super::candidate::{compile_memo, GemmCandidate, GemmOperands, PreparedGemm};
use crate::gpu::Gpu;
use rtx_runtime::{Function, Module, RuntimeError, Stream};
use rtx_synthesis::templates::gemm::wgmma::{WgmmaBuffers, WgmmaConfig, WgmmaGemm};
use rtx_synthesis::templates::gemm::GemmProblem;
use rtx_synthesis::templates::Template;

/// wgmma at its default config.
pub struct WgmmaDefault;

fn template(gpu: &Gpu) -> WgmmaGemm {
    WgmmaGemm::new(gpu.device.info().sm_count)
}

struct PreparedWgmma {
    _module: Module,
    function: Function,
    template: WgmmaGemm,
    problem: GemmProblem,
    config: WgmmaConfig,
}

impl PreparedGemm for PreparedWgmma {
    fn launch(&mut self, ops: &mut GemmOperands<'_>, stream: &Stream) -> Result<(), RuntimeError> {
        let mut bufs = WgmmaBuffers {
            a: ops.a,
            b: ops.b,
            c: &mut *ops.c,
            bias: None,
            residual: None,
        };
        self.template
            .enqueue(
                &self.function,
                &self.problem,
                &self.config,
                &mut bufs,
                stream,
            )
            .map_err(|e| RuntimeError::InvalidLaunch {
                reason: format!("wgmma enqueue: {e}"),
            })
    }

    fn describe(&self) -> String {
        format!("gemm_wgmma default config {}", self.config.tag())
    }
}

impl GemmCandidate for WgmmaDefault {
    fn label(&self) -> String {
        "rtx-wgmma-default".into()
    }

    fn supports(&self, gpu: &Gpu, p: &GemmProblem) -> Result<(), String> {
        let t = template(gpu);
        let c = t.default_config(p, gpu.arch);
        t.check(p, &c, gpu.arch).map_err(|e| e.to_string())
    }

    fn prepare(&self, gpu: &Gpu, p: &GemmProblem) -> Result<Box<dyn PreparedGemm>, String> {
        let t = template(gpu);
        let config = t.default_config(p, gpu.arch);
        let src = t.emit(p, &config, gpu.arch).map_err(|e| e.to_string())?;
        let cubin = compile_memo(&src, gpu.arch)?;
        let module = gpu.device.load_module(&cubin).map_err(|e| e.to_string())?;
        let function = module.function(&src.entry).map_err(|e| e.to_string())?;
        Ok(Box::new(PreparedWgmma {
            _module: module,
            function,
            template: t,
            problem: *p,
            config,
        }))
    }
}
