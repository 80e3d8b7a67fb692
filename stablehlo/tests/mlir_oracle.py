"""Upstream MLIR (jaxlib's bundled StableHLO) as the oracle of tests: verifier and printer.

* ``mlir_verify(text)`` returns None when MLIR parses and verifies ``text`` and the diagnostic
  otherwise;
* ``mlir_reprint(text)`` returns MLIR's own printing of ``text`` (pretty, or generic with
  ``generic=True``), without locations; it raises ``MlirRejected`` with MLIR's diagnostics
  when MLIR refuses the text;
* ``mlir_context(allow_unregistered)`` is the shared context both use.

* ``mlir_verify_quantized(text)`` is ``mlir_verify`` for programs with ``!quant.uniform``
  types, which jaxlib's MLIR cannot read (it has no quant dialect): it asks the upstream MLIR
  bundled with IREE's compiler (PyPI ``iree-base-compiler``, a test dependency), which
  registers StableHLO and the quant dialect with their verifiers.

``check.*`` ops are unknown to MLIR: with ``allow_unregistered`` they pass as unregistered
ops (their text must then be in generic form). ``mlir_reprint`` always allows them.

Also: ``ROOT`` is the conformance folder, ``conformance_files(folder)`` its ``.mlir`` files and
``conformance_chunks(folder)`` yields (path, index, text) for every ``// -----`` chunk of them
that contains an op.

jax/jaxlib are imported lazily, so this module imports without them; tests guard with
``pytest.importorskip("jaxlib")`` before calling into MLIR.
"""
from __future__ import annotations

import functools
import glob
import os
import re

from stablehlo.text import split_input_file

ROOT = os.path.join(os.path.dirname(__file__), *[".."] * 3, "shared", "conformance",
                    "stablehlo")
ROOT = os.path.normpath(os.environ.get("OPENHLO_CONFORMANCE", ROOT))


class MlirRejected(Exception):
    """MLIR could not parse or verify the text."""


def mlir_context(allow_unregistered: bool = False):
    """JAX's MLIR context (stablehlo, chlo, sdy, mhlo, func, ...) plus the interpreter
    dialect; one per process for each value of ``allow_unregistered``."""
    return _context(bool(allow_unregistered))


@functools.lru_cache(maxsize=2)
def _context(allow_unregistered: bool):
    """Private jax API: pinned by the jax==0.10.2 test dependency."""
    from jax._src.interpreters import mlir as jax_mlir
    from jaxlib.mlir._mlir_libs import _stablehlo
    ctx = jax_mlir.make_ir_context()
    _stablehlo.register_interpreter_dialect(ctx)
    ctx.allow_unregistered_dialects = allow_unregistered
    return ctx


def _parse(text: str):
    """``text`` parsed and verified by MLIR, or ``MlirRejected``. Call inside a context."""
    from jaxlib.mlir import ir
    try:
        return ir.Module.parse(text)
    except ir.MLIRError as exc:
        raise MlirRejected(str(exc)) from None


def mlir_verify(text: str, allow_unregistered: bool = False):
    """None if MLIR accepts ``text``; the error text otherwise."""
    from jaxlib.mlir import ir
    with mlir_context(allow_unregistered), ir.Location.unknown():
        try:
            _parse(text)
        except MlirRejected as exc:
            return str(exc)
    return None


def mlir_reprint(text: str, generic: bool = False) -> str:
    """MLIR's printing of ``text``; ``MlirRejected`` when MLIR refuses it."""
    from jaxlib.mlir import ir
    with mlir_context(allow_unregistered=True), ir.Location.unknown():
        module = _parse(text)
        return module.operation.get_asm(enable_debug_info=False, print_generic_op_form=generic)


def mlir_verify_quantized(text: str):
    """None if upstream MLIR with the quant dialect (IREE's) parses and verifies ``text``;
    the error text otherwise. Tests guard with ``pytest.importorskip("iree.compiler")``."""
    from iree.compiler import ir
    with ir.Context(), ir.Location.unknown():
        try:
            module = ir.Module.parse(text)
        except ir.MLIRError as exc:
            return str(exc)
        if not module.operation.verify():
            return "the module does not verify"
    return None


def conformance_files(folder: str) -> list[str]:
    """Sorted .mlir files directly in ``ROOT/folder``."""
    return sorted(glob.glob(os.path.join(ROOT, folder, "*.mlir")))


def conformance_chunks(folder: str, every: int = 1):
    """(path, index, text) of the chunks of every ``every``-th file of ``folder``."""
    for path in conformance_files(folder)[::every]:
        with open(path) as f:
            text = f.read()
        for index, _, chunk in split_input_file(text):
            if re.search(r"^\s*(%|func\.func|module|\"|sdy\.)", chunk, re.MULTILINE):
                yield path, index, chunk
