"""Upstream MLIR (jaxlib's bundled StableHLO 1.17) as the golden printer for our printer.

``mlir_reprint(text)`` parses and verifies ``text`` with MLIR and returns MLIR's own printing
of it (pretty, or generic with ``generic=True``), without locations; it raises
``MlirRejected`` with MLIR's diagnostics when MLIR refuses the text. Unregistered dialects are
allowed so that ``check.*`` ops written in generic form pass through.

Also: ``conformance_chunks(folder)`` yields (path, index, text) for every ``// -----`` chunk of
the conformance files that contains an op, and ``ROOT`` is the conformance folder.
"""
from __future__ import annotations

import functools
import glob
import os
import re

ROOT = os.path.join(os.path.dirname(__file__), *[".."] * 4, "shared", "conformance",
                    "stablehlo")
ROOT = os.path.normpath(os.environ.get("OPENHLO_CONFORMANCE", ROOT))
_SPLIT = re.compile(r"// -----[^\n]*")


class MlirRejected(Exception):
    """MLIR could not parse or verify the text."""


@functools.lru_cache(maxsize=1)
def _context():
    """JAX's MLIR context (stablehlo, chlo, sdy, mhlo, func, ...) plus the interpreter
    dialect. Private jax/jaxlib APIs: pinned by the jax==0.10.2 test dependency."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir._mlir_libs import _stablehlo
    ctx = jax_mlir.make_ir_context()
    _stablehlo.register_interpreter_dialect(ctx)
    ctx.allow_unregistered_dialects = True
    return ctx


def mlir_reprint(text: str, generic: bool = False) -> str:
    from jaxlib.mlir import ir
    with _context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as exc:
            raise MlirRejected(str(exc)) from None
        return module.operation.get_asm(enable_debug_info=False, print_generic_op_form=generic)


def conformance_files(folder: str) -> list[str]:
    """Sorted .mlir files directly in ``ROOT/folder``."""
    return sorted(glob.glob(os.path.join(ROOT, folder, "*.mlir")))


def split_chunks(text: str) -> list[str]:
    return _SPLIT.split(text)


def conformance_chunks(folder: str, every: int = 1):
    """(path, index, text) of the chunks of every ``every``-th file of ``folder``."""
    for path in conformance_files(folder)[::every]:
        with open(path) as f:
            text = f.read()
        for index, chunk in enumerate(split_chunks(text)):
            if re.search(r"^\s*(%|func\.func|module|\"|sdy\.)", chunk, re.MULTILINE):
                yield path, index, chunk
