"""Our printer against upstream MLIR (jaxlib 0.10.2, StableHLO 1.17) as the golden printer.

For each program: parse it with our parser, print it (``check.*`` ops in generic form, since
jaxlib has no check dialect), and require that MLIR accepts the text and re-prints exactly the
same text. Where the original program is already MLIR's own output (testdata, JAX lowering),
our printing must also equal MLIR's printing of the original.

Known gaps of the bundled MLIR 1.17, for programs written with newer StableHLO (1.20): no
quant dialect (quantized programs do not verify), no ``collective_reduce``, single-operand
``collective_broadcast`` only. A rejection must name one of these reasons.

One representational difference is normalized away: MLIR remembers a splat value written for
a zero-element tensor (``dense<(0.0, 0.0)> : tensor<0x3xcomplex<f32>>``) while our
DenseElementsAttr holds only the (empty) numpy array and prints ``dense<>``.

The sample (every 10th file of each folder, all interpret files) runs by default; the full
set is marked slow.
"""
from __future__ import annotations

import os
import re

import pytest

from stablehlo.text import parse_module, print_module
from stablehlo.tests.mlir_oracle import (
    ROOT,
    MlirRejected,
    conformance_chunks,
    mlir_reprint,
)

jaxlib = pytest.importorskip("jaxlib")

KNOWN_MLIR_GAPS = (
    "quant.uniform",
    "unregistered operation 'stablehlo.collective_reduce'",
    "'stablehlo.collective_broadcast' op requires a single operand",
    "'stablehlo.collective_broadcast' op requires one result",
)
_EMPTY_SPLAT = re.compile(r"dense<[^<>]+> : (tensor<(?:\d+x)*0x[^>]*>)")
DATA = os.path.join(os.path.dirname(__file__), "data")
needs_suite = pytest.mark.skipif(not os.path.isdir(ROOT), reason="conformance suite not found")


def _check_chunk(path: str, chunk: str, generic: bool, compare_original: bool) -> str | None:
    """None if MLIR accepts and reprints our text unchanged; else a description."""
    ours = print_module(parse_module(chunk, path), generic=generic, generic_dialects=("check",))
    try:
        theirs = mlir_reprint(ours, generic=generic)
    except MlirRejected as exc:
        if any(reason in str(exc) for reason in KNOWN_MLIR_GAPS):
            return None
        return f"MLIR rejects our text: {str(exc)[:400]}"
    if theirs != ours:
        return "MLIR re-prints our text differently:\n" + _first_difference(ours, theirs)
    if compare_original:
        original = _EMPTY_SPLAT.sub(r"dense<> : \1", mlir_reprint(chunk, generic=generic))
        if original != ours:
            return "differs from MLIR's printing of the source:\n" + \
                _first_difference(ours, original)
    return None


def _first_difference(ours: str, theirs: str) -> str:
    for a, b in zip(ours.splitlines(), theirs.splitlines()):
        if a != b:
            return f"  ours:   {a[:300]}\n  theirs: {b[:300]}"
    return f"  line counts {len(ours.splitlines())} vs {len(theirs.splitlines())}"


def _run(folder: str, every: int, generic: bool = False) -> list[str]:
    problems = []
    from_mlir = folder.startswith("testdata")  # these files are MLIR's own output
    for path, index, chunk in conformance_chunks(folder, every):
        problem = _check_chunk(path, chunk, generic, from_mlir and "quantized" not in folder)
        if problem:
            problems.append(f"{path}#{index}: {problem}")
    return problems


def test_all_formats_file_matches_mlir():
    """A hand-written file using every pretty format, in both printing forms."""
    with open(os.path.join(DATA, "all_formats.mlir")) as f:
        text = f.read()
    for generic in (False, True):
        ours = print_module(parse_module(text), generic=generic)
        assert ours == mlir_reprint(text, generic=generic)


@pytest.mark.parametrize("name", ["jax_sharded.mlir", "jax_shard_map.mlir"])
def test_shardy_programs_match_mlir(name):
    """JAX output for 8 devices (Shardy mesh, shardings, manual computation, locations)."""
    with open(os.path.join(DATA, name)) as f:
        text = f.read()
    for generic in (False, True):
        ours = print_module(parse_module(text, name), generic=generic)
        assert ours == mlir_reprint(text, generic=generic)
        assert print_module(parse_module(ours), generic=generic) == ours


@needs_suite
@pytest.mark.parametrize("folder,every", [
    ("interpret", 1), ("interpret/chlo", 1), ("testdata", 10), ("testdata/dynamic", 10),
    ("testdata/quantized", 10), ("testdata_chlo_legalized", 10),
])
def test_sample_matches_mlir(folder, every):
    assert _run(folder, every) == []


@needs_suite
@pytest.mark.parametrize("folder", ["interpret", "testdata", "testdata/dynamic"])
def test_sample_generic_matches_mlir(folder):
    assert _run(folder, 10, generic=True) == []


@needs_suite
@pytest.mark.slow
@pytest.mark.parametrize("folder", ["interpret", "interpret/chlo", "testdata",
                                    "testdata/dynamic", "testdata/quantized",
                                    "testdata_chlo_legalized"])
@pytest.mark.parametrize("generic", [False, True])
def test_full_suite_matches_mlir(folder, generic):
    assert _run(folder, 1, generic) == []


def _jax_programs():
    """A few JAX lowerings covering module/arg/result attributes, locations, sharding."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def argmax_tanh(x, y):
        return jnp.tanh(x @ y).sum(axis=0), jnp.argmax(x, axis=1)

    def scan_fn(xs):
        return jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, xs)

    def cond_fn(p, x):
        return jax.lax.cond(p, lambda v: v + 1, lambda v: v * 2, x)

    ones = jnp.ones
    return {
        "argmax_tanh": jax.jit(argmax_tanh).lower(ones((4, 8)), ones((8, 16))),
        "scan": jax.jit(scan_fn).lower(jnp.arange(5.0)),
        "cond": jax.jit(cond_fn).lower(True, ones(3)),
        "scatter": jax.jit(lambda a, i: a.at[i].add(1.0)).lower(ones((5, 4)), jnp.array([1, 2])),
        "sort": jax.jit(lambda a: jnp.sort(a) + jax.lax.top_k(a, 2)[0].sum()).lower(ones(5)),
        "conv": jax.jit(lambda a, b: jax.lax.conv_general_dilated(a, b, (1, 1), "SAME"))
        .lower(ones((1, 3, 8, 8)), ones((4, 3, 3, 3))),
        "types": jax.jit(lambda a, b: (a.astype(jnp.bfloat16), b.astype(jnp.float8_e4m3fn)))
        .lower(ones(3), ones(3)),
    }


@pytest.mark.parametrize("debug_info", [False, True])
def test_jax_lowerings_match_mlir(debug_info):
    for name, lowered in _jax_programs().items():
        text = lowered.as_text(debug_info=debug_info)
        for generic in (False, True):
            ours = print_module(parse_module(text, name), generic=generic)
            assert ours == mlir_reprint(text, generic=generic), (name, generic)
