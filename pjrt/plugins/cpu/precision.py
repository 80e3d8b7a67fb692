"""The warning, once per process and precision, that a program asks for a precision this CPU
cannot run fast (issue 20; pytorch/pytorch#118499 asked the same of PyTorch).

int8 and bf16 products run fast on AMX tiles, else int8 ones with AVX-512 VNNI and bf16
ones with AVX-512 BF16 (native/cpu_isa.h reads cpuid). Without them the int8 kernel runs its
portable loop (same integers, a few times slower) and bf16 is widened to f32 for BLAS (no faster than f32), so
the lowering says so on the ``openhlo.cpu`` logger when it lowers such a contraction.
"""
from __future__ import annotations

import logging

from pjrt.plugins.cpu.native_module import native

LOG = logging.getLogger("openhlo.cpu")

_CONTRACTIONS = frozenset({"stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"})
# operand element type -> (cpuid features of which a fast kernel needs one, their names,
# what runs without them)
_NEEDS = {"i8": (("amx", "vnni"), "AMX or AVX-512 VNNI",
                 "a portable int8 loop (same results, slower)"),
          "bf16": (("amx", "bf16"), "AMX or AVX-512 BF16",
                   "f32 GEMMs on widened operands (no faster than f32)")}
_warned: set = set()


def runs_fast(element: str) -> bool:
    """Whether contractions of ``element`` operands (``"i8"``, ``"bf16"``) run on a fast
    kernel of this CPU (and the portable loops are not forced)."""
    isa = native().lowp.active_isa()
    return any(isa[feature] for feature in _NEEDS[element][0])


def warn_if_slow(op) -> None:
    """Log a warning (once per element type) when ``op`` is a contraction on an element
    type whose fast kernel this CPU cannot run (or the portable loops are forced)."""
    if op.name not in _CONTRACTIONS or not op.operands:
        return
    element = str(getattr(op.operands[0].type, "element_type", ""))
    if element not in _NEEDS or element in _warned:
        return
    _, isa_name, instead = _NEEDS[element]
    if runs_fast(element):
        return
    _warned.add(element)
    LOG.warning("%s asks for %s arithmetic, which this CPU cannot run fast (no %s, or "
                "OPENHLO_CPU_PORTABLE_LOWP is set): it runs as %s", op.where(), element,
                isa_name, instead)
