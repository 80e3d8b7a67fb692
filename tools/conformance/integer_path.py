"""``openhlo conformance --integer-path``: which cases ran their quantized contractions on
the cpu backend's integer kernels.

A case is classed from the executable the cpu backend built, not from the program text:

* ``integer``: its optimized program holds an ``i8 x i8 -> i32`` dot_general that the
  executor runs on the native kernel (not inside a generated fusion, not an interpreter
  fallback); the native dot_general takes every such op to the int8 GEMM
  (pjrt/plugins/cpu/native/kernels_lowp_dot.cc). ``quant-lower`` makes these of the
  quantized dot_generals and convolutions it can (xla_core/quantization/
  integer_contraction.py);
* ``float``: the source holds a quantized dot_general or convolution, but no integer
  contraction ran; the reason is ``integer_contraction.refusal`` for the op, or what became
  of the program instead;
* ``none``: the source holds no quantized contraction.
"""
from __future__ import annotations

from collections import Counter

from stablehlo.interpreter.quantization import quantized_element
from stablehlo.ir.core import Module, Operation
from stablehlo.ir.types import I8, I32
from xla_core.fusion.kinds import kind_of_fusion
from xla_core.quantization.integer_contraction import CONTRACTIONS, refusal

INTEGER, FLOAT, NONE = "integer", "float", "none"
CLASSES = (INTEGER, FLOAT, NONE)


def classify(source: Module, exe) -> tuple[str, str]:
    """(class, reason) of a case whose module ``source`` compiled to the cpu executable
    ``exe``; the reason is empty except for ``float``."""
    quantized = [op for op in source.walk() if op.name in CONTRACTIONS
                 and any(quantized_element(v.type) is not None for v in op.operands)]
    if not quantized:
        return NONE, ""
    if integer_kernels(exe):
        return INTEGER, ""
    reasons = sorted({refusal(op) or _why_no_kernel(exe) for op in quantized})
    return FLOAT, "; ".join(reasons)


def integer_kernels(exe) -> int:
    """How many ``i8 x i8 -> i32`` dot_generals of ``exe`` run on the native kernel."""
    program = exe.program
    if program.whole_program_fallback is not None:
        return 0
    module = exe.optimized_module
    fused = {op.attributes["decomposition"].name for op in module.walk()
             if op.name == "stablehlo.composite" and kind_of_fusion(op) is not None}
    fallen = {f.where for f in program.fallbacks if f.op == "stablehlo.dot_general"}
    return sum(1 for func in module.functions() if func.name not in fused
               for op in func.walk() if _integer_dot(op) and op.where() not in fallen)


def _integer_dot(op: Operation) -> bool:
    return (op.name == "stablehlo.dot_general"
            and [v.type.element_type for v in op.operands] == [I8, I8]
            and op.result.type.element_type == I32)


def _why_no_kernel(exe) -> str:
    if any(quantized_element(v.type) is not None for op in exe.optimized_module.walk()
           for v in op.results):
        return ("quantized ops left to the interpreter: no quant-lower (opt level 0, a failed "
                "pipeline, or an op with regions over quantized types)")
    return "its i8 dot_general did not reach the int8 kernel (folded, fused or a fallback)"


def summary_lines(paths: list) -> list[str]:
    """The report's lines for the (class, reason) of every case that has one."""
    counts = Counter(c for c, _ in paths)
    lines = [f"integer path on the cpu backend: {counts[INTEGER]} cases ran an integer "
             f"contraction kernel (i8 x i8 -> i32), {counts[FLOAT]} ran their quantized "
             f"contractions in float, {counts[NONE]} have no quantized contraction"]
    for reason, n in sorted(Counter(r for c, r in paths if c == FLOAT).items()):
        lines.append(f"  float ({n}): {reason}")
    return lines
