"""Upstream MLIR (jaxlib's bundled StableHLO) as a verification oracle for tests.

``mlir_verify(text)`` returns None when MLIR parses and verifies ``text`` and the
diagnostic otherwise. ``check.*`` ops are unknown to MLIR, so they are allowed
as unregistered ops when ``allow_unregistered`` is set (their text must then be
in generic form). Imported lazily by tests; skipped when jaxlib is missing.
"""
from __future__ import annotations

import functools


@functools.lru_cache(maxsize=2)
def _context(allow_unregistered: bool):
    from jaxlib.mlir import ir
    from jaxlib.mlir._mlir_libs import _chlo, _jax_mlir_ext, _stablehlo
    registry = ir.DialectRegistry()
    _jax_mlir_ext.register_dialects(registry)
    ctx = ir.Context()
    ctx.append_dialect_registry(registry)
    ctx.load_all_available_dialects()
    _stablehlo.register_dialect(ctx)
    _stablehlo.register_interpreter_dialect(ctx)
    _chlo.register_dialect(ctx)
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def mlir_verify(text: str, allow_unregistered: bool = False):
    """None if MLIR accepts ``text``; the error text otherwise."""
    from jaxlib.mlir import ir
    ctx = _context(allow_unregistered)
    with ctx, ir.Location.unknown():
        try:
            ir.Module.parse(text)
        except ir.MLIRError as exc:
            return str(exc)
    return None


def split_chunks(text: str) -> list:
    """MLIR's -split-input-file: split on the substring ``// -----``."""
    import re
    return re.split(r"// -----[^\n]*", text)
