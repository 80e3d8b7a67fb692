"""The cpu backend: a C++ executor with native and BLAS kernels (see README.md)."""
from xla_core.passes import PIPELINES

# The backend's own pipeline, in xla_core's registry beside the generic ones, so the compile
# driver and ``openhlo opt --pipeline=cpu`` find it by name (lazy: nothing else is imported).
PIPELINES.register("cpu", "pjrt.plugins.cpu.optimize:cpu_pipeline")
PIPELINES.register("cpu-memory-schedule",
                   "pjrt.plugins.cpu.optimize:cpu_memory_schedule_pipeline")
