"""Runs a program on both tiers of the cpu backend and compares the results bit for bit.

A program compiled with a cold kernel cache first runs every fusion op by op on the native
kernels, then on the generated kernels once the background compile swaps them in
(tiering.py). Both must give the same bits. ``run_tiers`` holds the background worker behind
a gate while it runs the first tier, so that tier is always observed; the caller points
``OPENHLO_CACHE_DIR`` at an empty folder per program (a warm cache has no first tier).

The programs: ``conformance_case`` turns a StableHLO testdata file (inputs as a constant
function) into a program with parameters plus its inputs; ``FUSED`` holds JAX-like programs
that the cpu pipeline fuses (math chains, row and column reductions, softmax, layer norm,
gelu, dot + bias + activation) for each float type.
"""
from __future__ import annotations

import re
import threading

import ml_dtypes
import numpy as np

import pjrt
import stablehlo
from pjrt.api import CompileOptions
from pjrt.plugins.cpu import tiering

ASYNC = CompileOptions(env_option_overrides={"async_codegen": True})
NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64}


class NoFirstTier(Exception):
    """The program had no kernels to compile (nothing fused, or the kernel cache was warm)."""


def run_tiers(text: str, args: list, client=None) -> tuple[list, list, int]:
    """(first-tier results, generated-kernel results, number of generated fusions)."""
    client = client or pjrt.make_client("cpu")
    gate = threading.Event()
    tiering.Upgrade(lambda: gate.wait(120), lambda _: None)  # keeps the worker busy
    try:
        exe = client.compile(text, ASYNC)
        first_program = exe.program
        first = [np.asarray(r) for r in exe(*args)]
    finally:
        gate.set()
    if not first_program.deferred:
        exe.wait_optimized()
        raise NoFirstTier("no generated kernels to wait for")
    exe.wait_optimized()
    optimized = [np.asarray(r) for r in exe(*args)]
    return first, optimized, len(exe.program.fusions_generated)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit patterns; two NaNs count as equal whatever their payload."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind not in "fcV" and a.dtype not in (NUMPY["bf16"],):
        return np.array_equal(a, b)
    width = {2: np.uint16, 4: np.uint32, 8: np.uint64, 16: np.uint64}[a.dtype.itemsize]
    if a.dtype.kind == "c":
        return same_bits(a.real, b.real) and same_bits(a.imag, b.imag)
    nan = np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
    return bool(np.all((a.view(width) == b.view(width)) | nan))


def max_ulps(a: np.ndarray, b: np.ndarray) -> int:
    """The largest distance in units in the last place between finite elements."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype.kind not in "f" and a.dtype != NUMPY["bf16"]:
        return 0 if np.array_equal(a, b) else -1
    width = {2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]
    ia, ib = a.view(width).astype(np.int64), b.view(width).astype(np.int64)
    sign = np.int64(1) << (8 * a.dtype.itemsize - 1)
    ia = np.where(ia < 0, -(ia & (sign - 1)), ia)  # sign-magnitude to a monotone line
    ib = np.where(ib < 0, -(ib & (sign - 1)), ib)
    both = np.isfinite(a.astype(np.float64)) & np.isfinite(b.astype(np.float64))
    return int(np.max(np.abs(ia - ib)[both], initial=0))


# -- StableHLO testdata ---------------------------------------------------------------------
_CALL = re.compile(r"^\s*(%\w+)(?::(\d+))? = call @inputs\(\) : \(\) -> \(?(.*?)\)?\s*$", re.M)


def _split_types(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return out


def conformance_case(text: str):
    """(program with the inputs as parameters of @main, the inputs), or None when the file
    does not have the testdata layout (one ``call @inputs()`` in a @main without
    parameters)."""
    calls = _CALL.findall(text)
    if len(calls) != 1 or "func.func public @main() ->" not in text:
        return None
    module = stablehlo.parse(text)
    inputs = [np.asarray(x) for x in stablehlo.evaluate(module, entry="inputs")]
    name, count, types = calls[0]
    types = _split_types(types)
    if len(types) != (int(count) if count else 1) or len(inputs) != len(types):
        return None
    params = ", ".join(f"%tier_in{i}: {t}" for i, t in enumerate(types))
    lines = []
    for line in text.splitlines():
        if _CALL.match(line) or "call @expected()" in line or "@check." in line:
            continue
        lines.append(line)
    body = "\n".join(lines).replace("func.func public @main() ->",
                                    f"func.func public @main({params}) ->")
    if count:
        body = re.sub(re.escape(name) + r"#(\d+)\b", lambda m: f"%tier_in{m.group(1)}", body)
    else:
        body = re.sub(re.escape(name) + r"(?![\w#])", "%tier_in0", body)
    return body, inputs


# -- JAX-like fused programs ----------------------------------------------------------------
_N, _D = 64, 300  # rows, columns (a row length with a tail after the reduction lanes)

_UNARY_CHAINS = {
    "exp_log": ["exponential", "log_plus_one", "log"],
    "tanh_logistic": ["tanh", "logistic"],
    "erf_chain": ["chlo.erf", "exponential_minus_one"],
    "erfc_chain": ["chlo.erfc", "tanh"],
    "sqrt_rsqrt": ["abs", "sqrt", "rsqrt"],
    "sin_cos": ["sine", "cosine"],
    "cbrt_tan": ["cbrt", "tan"],
}


def _t(shape, T):
    return "tensor<" + "".join(f"{d}x" for d in shape) + T + ">"


def _chain(ops: list[str], T: str) -> str:
    t = _t([_N, _D], T)
    lines, prev = [], "%x"
    for i, op in enumerate(ops):
        if "." in op:  # chlo: the generic form
            lines.append(f'  %u{i} = "{op}"({prev}) : ({t}) -> {t}')
        else:
            lines.append(f"  %u{i} = stablehlo.{op} {prev} : {t}")
        prev = f"%u{i}"
    lines.append(f"  %d = stablehlo.divide {prev}, %y : {t}")
    lines.append(f"  %p = stablehlo.power %d, %y : {t}")
    lines.append(f"  %r = stablehlo.add %p, %x : {t}")
    return (f"func.func @main(%x: {t}, %y: {t}) -> {t} {{\n" + "\n".join(lines)
            + f"\n  return %r : {t}\n}}\n")


def _reduce(T, kind: str, dim: int) -> str:
    t = _t([_N, _D], T)
    kept = _t([_D if dim == 0 else _N], T)
    init = "0.0" if kind == "add" else "0xFF800000" if T == "f32" else "-1.0e4"
    scalar = _t([], T)
    return f"""func.func @main(%x: {t}, %y: {t}) -> {kept} {{
  %init = stablehlo.constant dense<{init}> : {scalar}
  %e = stablehlo.multiply %x, %y : {t}
  %s = stablehlo.add %e, %x : {t}
  %r = stablehlo.reduce(%s init: %init) applies stablehlo.{"add" if kind == "add" else "maximum"} across dimensions = [{dim}] : ({t}, {scalar}) -> {kept}
  %o = stablehlo.exponential %r : {kept}
  return %o : {kept}
}}
"""


def _softmax(T) -> str:
    t, row, scalar = _t([_N, _D], T), _t([_N], T), _t([], T)
    return f"""func.func @main(%x: {t}, %y: {t}) -> {t} {{
  %ninf = stablehlo.constant dense<-1.0e4> : {scalar}
  %zero = stablehlo.constant dense<0.0> : {scalar}
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : ({t}, {scalar}) -> {row}
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : ({row}) -> {t}
  %s = stablehlo.subtract %x, %mb : {t}
  %e = stablehlo.exponential %s : {t}
  %z = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : ({t}, {scalar}) -> {row}
  %zb = stablehlo.broadcast_in_dim %z, dims = [0] : ({row}) -> {t}
  %p = stablehlo.divide %e, %zb : {t}
  %o = stablehlo.multiply %p, %y : {t}
  return %o : {t}
}}
"""


def _layer_norm_gelu(T) -> str:
    t, row, scalar = _t([_N, _D], T), _t([_N], T), _t([], T)
    return f"""func.func @main(%x: {t}, %y: {t}) -> {t} {{
  %zero = stablehlo.constant dense<0.0> : {scalar}
  %n = stablehlo.constant dense<{float(_D)}> : {row}
  %eps = stablehlo.constant dense<1.0e-5> : {row}
  %half = stablehlo.constant dense<0.5> : {t}
  %one = stablehlo.constant dense<1.0> : {t}
  %isq2 = stablehlo.constant dense<0.70710678118654752> : {t}
  %s = stablehlo.reduce(%x init: %zero) applies stablehlo.add across dimensions = [1] : ({t}, {scalar}) -> {row}
  %mean = stablehlo.divide %s, %n : {row}
  %mb = stablehlo.broadcast_in_dim %mean, dims = [0] : ({row}) -> {t}
  %c = stablehlo.subtract %x, %mb : {t}
  %c2 = stablehlo.multiply %c, %c : {t}
  %v = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1] : ({t}, {scalar}) -> {row}
  %var = stablehlo.divide %v, %n : {row}
  %ve = stablehlo.add %var, %eps : {row}
  %rs = stablehlo.rsqrt %ve : {row}
  %rb = stablehlo.broadcast_in_dim %rs, dims = [0] : ({row}) -> {t}
  %h = stablehlo.multiply %c, %rb : {t}
  %g = stablehlo.multiply %h, %y : {t}
  %a = stablehlo.multiply %g, %isq2 : {t}
  %ea = "chlo.erf"(%a) : ({t}) -> {t}
  %ep = stablehlo.add %ea, %one : {t}
  %gh = stablehlo.multiply %g, %half : {t}
  %o = stablehlo.multiply %gh, %ep : {t}
  return %o : {t}
}}
"""


def _dot_bias_act(T) -> str:
    t, w, b = _t([_N, _D], T), _t([_D, 96], T), _t([_N, 96], T)
    return f"""func.func @main(%x: {t}, %w: {w}, %bias: {b}) -> {b} {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : ({t}, {w}) -> {b}
  %s = stablehlo.add %d, %bias : {b}
  %a = stablehlo.tanh %s : {b}
  %l = stablehlo.logistic %a : {b}
  %o = stablehlo.multiply %s, %l : {b}
  return %o : {b}
}}
"""


def _linear_bias_act(T) -> str:
    """``_dot_bias_act`` with the weight in PyTorch's [out, in] layout, 34 rows: the output
    template computes it transposed (Note [Few-row GEMMs transposed] in
    xla_core/codegen/output.py)."""
    t, w, b = _t([34, _D], T), _t([96, _D], T), _t([34, 96], T)
    return f"""func.func @main(%x: {t}, %w: {w}, %bias: {b}) -> {b} {{
  %d = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1] : ({t}, {w}) -> {b}
  %s = stablehlo.add %d, %bias : {b}
  %a = stablehlo.tanh %s : {b}
  return %a : {b}
}}
"""


def _fused_programs() -> dict:
    out = {}
    for T in ("f32", "f64", "f16", "bf16"):
        for name, ops in _UNARY_CHAINS.items():
            out[f"{name}_{T}"] = _chain(ops, T)
        out[f"row_sum_{T}"] = _reduce(T, "add", 1)
        out[f"column_sum_{T}"] = _reduce(T, "add", 0)
        out[f"row_max_{T}"] = _reduce(T, "max", 1)
        out[f"column_max_{T}"] = _reduce(T, "max", 0)
        out[f"softmax_{T}"] = _softmax(T)
        out[f"layer_norm_gelu_{T}"] = _layer_norm_gelu(T)
        out[f"dot_bias_act_{T}"] = _dot_bias_act(T)
        out[f"linear_bias_act_{T}"] = _linear_bias_act(T)
    return out


FUSED = _fused_programs()


def fused_inputs(text: str, seed: int = 0) -> list:
    """Random arguments for @main of ``text``: normal values of mixed scale (some negative,
    for the powers of negative bases to give NaN as they should)."""
    module = stablehlo.parse(text)
    func = next(op for op in module.body.operations if op.attributes["sym_name"].value == "main")
    rng = np.random.default_rng(seed)
    args = []
    for arg in func.regions[0].blocks[0].arguments:
        shape, T = list(arg.type.shape), str(arg.type.element_type)
        values = rng.standard_normal(shape) * np.exp(rng.uniform(-2, 1, shape))
        args.append(values.astype(NUMPY[T]))
    return args
