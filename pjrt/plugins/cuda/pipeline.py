"""The cuda backend's compiler pipeline and the GPU it describes to the cost model.

``cuda_pipeline()``: xla_core's target-independent ``cpu-opt`` cleanup, priority fusion
against the ``h100`` hardware description with the cuda fusion hook (codegen/hook.py: loop
and reduction fusions, dots left to cuBLAS), dce, and the memory schedule (one device, no
collectives to overlap). The order it leaves is the order of the executable's steps.

``H100``: an H100 SXM's roofline ceilings as measured on the project's test machine
(kernels-anchors.md section 9.5: ~3.0 TB/s device copy; f32 on the tensor cores' TF32 path is
left out, so peak_flops is the f32 CUDA-core rate) and a kernel launch as the step overhead.
``openhlo calibrate`` does not measure GPUs yet, so these are datasheet-level figures.
"""
from __future__ import annotations

from dataclasses import replace

from xla_core.cost import HardwareDescription, register_hardware
from xla_core.fusion import FusionPass
from xla_core.passes import Pipeline, make_pipeline, parse_pass_list

from pjrt.plugins.cuda.codegen.hook import CUDA_CODEGEN

HARDWARE = "h100"
H100 = HardwareDescription(
    name=HARDWARE, peak_flops=60e12, memory_bandwidth=3.0e12, cores=132,
    step_overhead=4e-6, l1_cache_bytes=256 * 1024, l2_cache_bytes=50 * 1024 * 1024)

register_hardware(HARDWARE, H100)


def cuda_pipeline() -> Pipeline:
    """The passes a program goes through before its kernels are generated (module doc)."""
    passes = make_pipeline("cpu-opt").passes + parse_pass_list("fusion,dce,memory-schedule")
    passes = [replace(p, codegen=CUDA_CODEGEN, hardware=HARDWARE)
              if isinstance(p, FusionPass) else p for p in passes]
    return Pipeline("cuda", passes)
