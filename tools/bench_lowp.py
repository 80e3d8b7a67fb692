"""``python -m tools.bench_lowp``: the cpu backend's low-precision kernels against f32.

- int8 GEMM, at 1024^3 and at the narrow shapes of a quantized convolution's per-tap dots
  (m x k x n = N*H*W x C_in x C_out: 3136 x 576 x 64, 3136 x 64 x 64) by default: the AMX or
  VNNI kernel (weight packed once) and the cpu backend running an ``i8 x i8 -> i32``
  ``dot_general`` program, against the backend's f32 ``dot_general`` and numpy/OpenBLAS
  ``float32 @``, in operations per second;
- bf16 GEMM, the same way (AMX or AVX-512 BF16 kernel, ``bf16 x bf16 -> f32`` program);
- weight-only GEMV (batch 1, k = n = 4096 by default): f32 activations times int8 and
  group-wise int4 weights (the packed kernels on their own, and compiled programs in
  frameworks/torch's form, run as ``openhlo.weight_only_dot`` on the rows kernels), as
  weight bytes streamed per second against the machine's measured copy bandwidth (numpy
  copying a 256 MiB array: bytes read + written per second), and against numpy's f32 GEMV.
  The programs run twice: on one weight called again (16 MiB of int8 at 4096: it may stay
  in the last-level cache between calls, while the copy's arrays cannot) and on 512 MiB of
  distinct weights taken in turn, as a decode step goes through a model's layers (each
  call's weight comes from memory, as the copy's bytes do).

Contenders are timed in alternating rounds (tools/bench/timing.py), so load from elsewhere
slows all of them; the machine's CPU count and 1-minute load are printed with the figures.
Speed is reported, never asserted. Goals (issue 20): int8 >= 2x and bf16 >= 1.5x our f32
GEMM (the narrow shapes included), weight-only GEMV >= 70% of the copy bandwidth.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

from tools.bench.timing import interleaved_medians

MIB = 2 ** 20
# the weights the streamed GEMVs go through in turn, as much as the copy's two arrays, more
# than the last-level cache (300 MiB on the dev box): a layer's weight is not still cached
# from its last call, as the copy's arrays are not
_STREAMED_BYTES = 512 * MIB
# (m, k, n): a square GEMM, and two narrow ones of the sizes a quantized convolution's per-tap
# dots take (m = N*H*W = 1 x 56 x 56 pixels, k = C_in of 576 or 64, n = C_out = 64)
DEFAULT_SHAPES = ((1024, 1024, 1024), (3136, 576, 64), (3136, 64, 64))


def _dot_program(m: int, k: int, n: int, in_type: str, out_type: str) -> str:
    lhs, rhs, out = (f"tensor<{m}x{k}x{in_type}>", f"tensor<{k}x{n}x{in_type}>",
                     f"tensor<{m}x{n}x{out_type}>")
    return (f"func.func @main(%a: {lhs}, %b: {rhs}) -> {out} {{\n"
            f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : "
            f"({lhs}, {rhs}) -> {out}\n  return %0 : {out}\n}}\n")


def _backend_dot(client, m, k, n, in_type, out_type, a, b):
    """A call of the cpu backend's compiled dot on device buffers (no host copies timed)."""
    exe = client.compile(_dot_program(m, k, n, in_type, out_type))
    buffers = [client.buffer_from_numpy(a), client.buffer_from_numpy(b)]
    return lambda: [r.block_until_ready() for r in exe.execute(buffers)]


def gemm_figures(shape: tuple[int, int, int], budget: float) -> dict:
    import ml_dtypes

    import pjrt
    from pjrt.plugins.cpu.native_module import native
    lowp = native().lowp
    rng = np.random.default_rng(0)
    m, k, n = shape
    client = pjrt.make_client("cpu")
    a8, b8 = (rng.integers(-128, 128, size=s, dtype=np.int64).astype(np.int8)
              for s in ((m, k), (k, n)))
    af, bf = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
    abf, bbf = af.astype(ml_dtypes.bfloat16), bf.astype(ml_dtypes.bfloat16)
    s8 = lowp.S8Weight(b8)
    bf16 = lowp.BF16Weight(bbf.view(np.uint16))
    fns = {
        "int8 kernel": lambda: s8.matmul(a8),
        "int8 dot_general (backend)": _backend_dot(client, m, k, n, "i8", "i32", a8, b8),
        "bf16 kernel": lambda: bf16.matmul(abf.view(np.uint16)),
        "bf16 dot_general (backend)": _backend_dot(client, m, k, n, "bf16", "f32", abf, bbf),
        "f32 dot_general (backend)": _backend_dot(client, m, k, n, "f32", "f32", af, bf),
        "f32 numpy/OpenBLAS": lambda: af @ bf,
    }
    times = interleaved_medians(fns, budget)
    ops = 2.0 * m * n * k
    return {"shape": [m, k, n], "isa": lowp.active_isa(),
            "gops": {name: ops / t["median_s"] / 1e9 for name, t in times.items()},
            "times": times}


def _bandwidth_gbs(budget: float) -> float:
    """Copy bandwidth: bytes read plus written per second copying a 256 MiB array."""
    src = np.ones(256 * MIB // 4, np.float32)
    dst = np.empty_like(src)
    t = interleaved_medians({"copy": lambda: np.copyto(dst, src)}, budget)["copy"]["median_s"]
    return 2 * src.nbytes / t / 1e9


def _weight_only_program(k: int, n: int, bits: int, group: int, rng, layers: int = 1):
    """``(call, weight bytes)``: the cpu backend's compiled ``x @ dequantize(w).T`` for one
    row of x as frameworks/torch's lowering writes it (int8 ``[n, k]`` with ``[n]`` scales;
    int4 packed ``[n, k/2]`` bytes with ``[n * k/group]`` scales), which runs as an
    ``openhlo.weight_only_dot``, called on device buffers. With ``layers`` > 1 each call
    takes the next of that many distinct weights, as a decode step goes through a model's
    layers, so no call finds its weight in a cache that the previous call filled."""
    import pjrt
    from stablehlo.builder import Builder
    from stablehlo.ir.types import F32, I8, UI8, IntegerType, TensorType, tensor
    b = Builder()
    rows = n * k // group
    w_shape = (n, k) if bits == 8 else (n, k // 2)
    s_shape = (n,) if bits == 8 else (rows,)
    with b.function("main", [tensor((1, k), F32), TensorType(w_shape, I8 if bits == 8 else UI8),
                             tensor(s_shape, F32)]) as (_, (xv, wv, sv)):
        if bits == 8:
            deq = b.multiply(b.convert(wv, F32), b.broadcast_in_dim(sv, (n, k), [0]))
        else:
            nibbles = b.bitcast_convert(wv, TensorType((n, k // 2, 2), IntegerType(4)))
            grouped = b.reshape(nibbles, (rows, group))
            deq = b.reshape(b.multiply(b.convert(grouped, F32),
                                       b.broadcast_in_dim(sv, (rows, group), [0])), (n, k))
        b.return_(b.dot_general(xv, deq, contracting=((1,), (1,))))
    client = pjrt.make_client("cpu")
    exe = client.compile(b.module)
    x = client.buffer_from_numpy(rng.standard_normal((1, k)).astype(np.float32))
    calls = []
    for _ in range(layers):
        if bits == 8:
            w = rng.integers(-127, 128, size=w_shape, dtype=np.int8)
        else:
            w = rng.integers(0, 256, size=w_shape, dtype=np.uint8)
        s = rng.uniform(1e-3, 1e-2, s_shape).astype(np.float32)
        calls.append([x, client.buffer_from_numpy(w), client.buffer_from_numpy(s)])
    turn = iter(range(2 ** 62))
    return ((lambda: [r.block_until_ready()
                      for r in exe.execute(calls[next(turn) % layers])]),
            w.nbytes + s.nbytes)


def gemv_figures(k: int, n: int, group: int, budget: float) -> dict:
    from pjrt.plugins.cpu.native_module import native
    lowp = native().lowp
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, k)).astype(np.float32)
    w8 = rng.integers(-127, 128, size=(k, n)).astype(np.int8)
    w4 = rng.integers(-8, 8, size=(k, n)).astype(np.int8)
    int8 = lowp.QuantizedWeight(w8, rng.uniform(1e-3, 1e-2, (1, n)).astype(np.float32), 8, k)
    int4 = lowp.QuantizedWeight(w4, rng.uniform(1e-3, 1e-2, (k // group, n)).astype(np.float32),
                                4, group)
    wf = rng.standard_normal((k, n)).astype(np.float32)
    fns = {"int8 weight-only": lambda: int8.matmul(x), "int4 weight-only": lambda: int4.matmul(x)}
    nbytes = {"int8 weight-only": int8.nbytes, "int4 weight-only": int4.nbytes}
    for bits in (8, 4):
        # one weight called again (cache-resident when it fits), and layers of 512 MiB in all
        layer_bytes = n * k * bits // 8
        for layers in (1, -(-_STREAMED_BYTES // layer_bytes)):
            name = f"int{bits} weight_only_dot (program" + (
                ")" if layers == 1 else f", {layers} layers in turn)")
            fns[name], nbytes[name] = _weight_only_program(k, n, bits, k if bits == 8 else group,
                                                           rng, layers)
    fns["f32 numpy/OpenBLAS"], nbytes["f32 numpy/OpenBLAS"] = (lambda: x @ wf), wf.nbytes
    times = interleaved_medians(fns, budget)
    copy = _bandwidth_gbs(budget)
    return {"k": k, "n": n, "group": group, "copy_gbs": copy, "times": times,
            "weight_gbs": {name: nbytes[name] / t["median_s"] / 1e9 for name, t in times.items()}}


def report(gemms: list[dict], gemv: dict, load: tuple) -> str:
    lines = [f"machine: {os.cpu_count()} CPUs, 1-minute load {load[0]:.2f} before, "
             f"{load[1]:.2f} after; kernels use {gemms[0]['isa']}"]
    for gemm in gemms:
        g = gemm["gops"]
        ours, blas = g["f32 dot_general (backend)"], g["f32 numpy/OpenBLAS"]
        m, k, n = gemm["shape"]
        lines += [f"GEMM m x k x n = {m} x {k} x {n} (medians; GOP/s = 2*m*n*k / s):",
                  "| contender | GOP/s | time (ms) | vs our f32 | vs numpy f32 |",
                  "|---|---|---|---|---|"]
        for name, value in g.items():
            lines.append(f"| {name} | {value:.1f} | {1e3 * gemm['times'][name]['median_s']:.3f} | "
                         f"{value / ours:.2f}x | {value / blas:.2f}x |")
    lines += [f"GEMV 1x{gemv['k']} @ {gemv['k']}x{gemv['n']} (int4 groups of {gemv['group']}); "
              f"copy bandwidth {gemv['copy_gbs']:.1f} GB/s (read + write):",
              "| contender | weight GB/s | % of copy bandwidth | time (ms) |", "|---|---|---|---|"]
    for name, value in gemv["weight_gbs"].items():
        lines.append(f"| {name} | {value:.1f} | {100 * value / gemv['copy_gbs']:.0f}% | "
                     f"{1e3 * gemv['times'][name]['median_s']:.3f} |")
    return "\n".join(lines)


def _shapes(text: str) -> list[tuple[int, int, int]]:
    try:
        shapes = [tuple(int(d) for d in s.split("x")) for s in text.split(",")]
    except ValueError:
        shapes = []
    if not shapes or any(len(s) != 3 or min(s) < 1 for s in shapes):
        raise argparse.ArgumentTypeError(f"shapes are m x k x n, comma-separated: {text!r}")
    return shapes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_lowp", description=__doc__
                                     .split("\n\n")[0])
    parser.add_argument("--shapes", type=_shapes, default=list(DEFAULT_SHAPES),
                        help="the GEMMs' m x k x n, comma-separated (default: "
                        + ",".join("x".join(map(str, s)) for s in DEFAULT_SHAPES) + ")")
    parser.add_argument("--gemv", type=int, default=4096, help="k = n of the GEMVs")
    parser.add_argument("--group", type=int, default=128, help="int4 group size")
    parser.add_argument("--budget", type=float, default=2.0, help="seconds per contender")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    gemms = [gemm_figures(shape, args.budget) for shape in args.shapes]
    gemv = gemv_figures(args.gemv, args.gemv, args.group, args.budget)
    load = (load_before, os.getloadavg()[0])
    print(report(gemms, gemv, load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gemm": gemms, "gemv": gemv, "cpus": os.cpu_count(),
                       "load_1min_before": load[0], "load_1min_after": load[1]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
