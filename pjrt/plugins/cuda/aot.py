"""Ahead-of-time compilation for the cuda backend, on a machine without a GPU.

``compile_module(module, target="sm_90a", out_dir=DIR)`` takes a parsed module through
xla_core's compile driver with the cuda pipeline (pipeline.py), writes every kernel the
executable launches into one translation unit (codegen/source.py), compiles it with one
``nvcc -cubin`` call (nvcc.py) and writes into DIR:

* ``kernels.cu`` and ``kernels.cubin`` (none when nothing is launched: ``cubin`` is null);
* ``ptxas.json``: per kernel its kind (elementwise, reduction, indexing or convolution),
  registers, spill stores and loads, stack frame and shared memory (bytes), from ptxas's
  report;
* ``executable.json``: the buffers and steps a runtime runs (executable.py, README.md);
* ``const_<n>.bin``: the bytes of each constant buffer;
* ``checks.mlir``: the program's check ops, run on the host after the program on its last
  results (host_checks.py), when it has any.

``claims(module)`` says whether the backend takes a program, without compiling its kernels:
every op of the entry, after the pipeline, is a kernel, a GEMM, a convolution (im2col and a
GEMM, or a kernel), a byte copy (reshape, copy, bitcast_convert), a constant or the return
(else the reason names the op and its place).
"""
from __future__ import annotations

import json
import pathlib

from stablehlo.ir.core import Module
from stablehlo.ir.types import TensorType
from stablehlo.verify import verify_module
from xla_core.compile import Backend, CompileRequest, compile_module as drive

from pjrt.arguments import resolve_entry
from pjrt.errors import UnimplementedError
from pjrt.plugins.cuda import nvcc
from pjrt.plugins.cuda.executable import Description
from pjrt.plugins.cuda.host_checks import CHECKS_FILE, split_checks
from pjrt.plugins.cuda.pipeline import cuda_pipeline

TARGETS = ("sm_90a",)


def optimize(module: Module) -> tuple[Module, str]:
    """``module`` (left as given) after the cuda pipeline, through the compile driver, and
    the name of its entry (``main``, else its only function or only public one)."""
    verify_module(module)
    entry = resolve_entry(module, None)
    backend = Backend(identity="cuda aot", pipeline=lambda request: cuda_pipeline())
    return drive(module, CompileRequest(None, entry), backend).optimized, entry


def describe(module: Module, entry: str, out_dir: str | None = None) -> Description:
    """The executable description of the optimized ``module`` (constants written into
    ``out_dir`` when given); raises NotClaimed for an op it cannot express. The entry's
    check ops are moved out of ``module`` first (host_checks.py): ``description.checks``."""
    func = module.lookup(entry)
    for i, t in enumerate(func.type.inputs):
        if not isinstance(t, TensorType) or not t.is_static:
            raise UnimplementedError(f"@{entry} parameter {i}: the cuda backend takes "
                                     f"static tensors, not {t}")
    checks = split_checks(func)
    description = Description(module, func, out_dir)
    description.checks = checks
    for op in func.body.operations:
        description.add(op)
    return description


def claims(module: Module) -> tuple[bool, str]:
    """(True, "") when the cuda backend compiles ``module``, else (False, why)."""
    try:
        describe(*optimize(module))
    except UnimplementedError as exc:
        return False, str(exc)
    return True, ""


def compile_module(module: Module, *, target: str = "sm_90a", out_dir) -> pathlib.Path:
    """Compile ``module`` for ``target`` into ``out_dir`` (created; see the module doc) and
    return it."""
    check_target(target)
    return write_directory(*optimize(module), target=target, out_dir=out_dir)


def check_target(target: str) -> None:
    if target not in TARGETS:
        raise UnimplementedError(f"cuda backend: target {target!r} is not supported "
                                 f"(known: {', '.join(TARGETS)})")


def write_directory(optimized: Module, entry: str, *, target: str,
                    out_dir) -> pathlib.Path:
    """The executable directory of ``optimized`` (the cuda pipeline's output: ``optimize``
    here, or the compile driver's run for a client) in ``out_dir`` (created)."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    description = describe(optimized, entry, str(out))
    (out / "kernels.cu").write_text(description.kernels.translation_unit())
    report, cubin = {}, None  # no kernels (a program of GEMMs and copies): no cubin
    if description.kernels.kinds:
        cubin = "kernels.cubin"
        report = nvcc.compile_cubin(str(out / "kernels.cu"), str(out / cubin), target)
    ptxas = {name: {"kind": kind, **report.get(name, {})}
             for name, kind in description.kernels.kinds.items()}
    (out / "ptxas.json").write_text(json.dumps(ptxas, indent=1) + "\n")
    func = optimized.lookup(entry)
    document = description.json(target, cubin, _types(func.type.inputs),
                                _types(func.type.results))
    if description.checks is not None:
        (out / CHECKS_FILE).write_text(str(description.checks))
        document["checks"] = CHECKS_FILE
    (out / "executable.json").write_text(json.dumps(document, indent=1) + "\n")
    return out


def _types(types) -> list[dict]:
    return [{"shape": list(t.shape), "dtype": str(t.element_type)} for t in types]


def spills(ptxas: dict) -> list[str]:
    """Kernels of a ``ptxas.json`` that spill registers to local memory."""
    return [name for name, k in ptxas.items() if k.get("spill_stores") or k.get("spill_loads")]


__all__ = ["TARGETS", "check_target", "claims", "compile_module", "optimize", "spills",
           "write_directory"]
