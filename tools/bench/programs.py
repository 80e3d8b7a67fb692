"""``openhlo bench --save-programs DIR``: what the compiler made of each workload, for reading.

Per workload: ``<name>.mlir`` (the JAX function's StableHLO, as the openhlo runner compiles
it), ``<name>.optimized.mlir`` (after the cpu backend's pipeline: the fusions and the
schedule the executor runs), ``<name>.fusion.txt`` (every fusion decision and refusal with
its reason and estimated saving) and ``<name>.memory.txt`` (the buffer assignment: peak
against the sum of all intermediate buffers). Rerun a step by hand with
``openhlo opt DIR/<name>.mlir --pipeline=cpu --explain-fusion --memory-report``.
"""
from __future__ import annotations

import io
import os

from tools.bench.runners import lower
from tools.bench.workloads import WORKLOADS
from tools.opt import explaining_fusion


def save_programs(folder: str, workloads: list[str], quick: bool = False) -> list[str]:
    import stablehlo
    from stablehlo.text import print_module
    from xla_core.buffers import assign_buffers
    from pjrt.plugins.cpu.optimize import cpu_pipeline
    os.makedirs(folder, exist_ok=True)
    written = []
    for name in workloads:
        workload = WORKLOADS[name]
        instance = workload.instance(sizes={**workload.sizes, **workload.quick_sizes}
                                     if quick else None)
        text = lower(instance).as_text()
        module = stablehlo.parse(text, f"{name}.mlir")  # places name the saved file
        explain = io.StringIO()
        with explaining_fusion(explain):
            cpu_pipeline().run(module)
        memory = assign_buffers(module.lookup("main"))
        files = {f"{name}.mlir": text, f"{name}.optimized.mlir": print_module(module),
                 f"{name}.fusion.txt": explain.getvalue(), f"{name}.memory.txt": memory.report()}
        for file_name, content in files.items():
            path = os.path.join(folder, file_name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(content if content.endswith("\n") else content + "\n")
            written.append(path)
    return written
