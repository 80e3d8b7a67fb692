"""The cost of one custom-kernel call inside a compiled cpu program.

    python -m tools.bench_custom_call [--calls 2000] [--repeats 20]

Builds programs that chain N calls of a one-element kernel (``openhlo_bench_add_one``, C++
source through pjrt/custom_kernels) and of the native ``stablehlo.negate`` for comparison,
and reports (time(N calls) - time(1 call)) / (N - 1): the per-call cost inside the executor
(the handler call, its call frame, the result allocation), with the executable's dispatch
subtracted out. Median of the repeats.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

KERNEL = r"""
extern "C" XLA_FFI_Error* openhlo_bench_add_one(XLA_FFI_CallFrame* frame) {
  *(float*)ohlo_ret(frame, 0)->data = *(const float*)ohlo_arg(frame, 0)->data + 1.0f;
  return 0;
}
"""


def _program(calls: int, op: str) -> str:
    lines = ["func.func @main(%v0: tensor<1xf32>) -> tensor<1xf32> {"]
    for i in range(calls):
        if op == "custom_call":
            lines.append(f"  %v{i + 1} = stablehlo.custom_call @openhlo_bench_add_one(%v{i}) : "
                         "(tensor<1xf32>) -> tensor<1xf32>")
        else:
            lines.append(f"  %v{i + 1} = stablehlo.negate %v{i} : tensor<1xf32>")
    lines.append(f"  return %v{calls} : tensor<1xf32>\n}}")
    return "\n".join(lines)


def _seconds(exe, x, repeats: int) -> float:
    exe(x)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        exe(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def per_call_seconds(op: str, calls: int, repeats: int) -> float:
    import pjrt
    client = pjrt.make_client("cpu", opt_level=0)  # the chain as written (no CSE of negates)
    x = np.zeros(1, np.float32)
    one = client.compile(_program(1, op))
    many = client.compile(_program(calls, op))
    if op == "custom_call":
        np.testing.assert_array_equal(many(x)[0], [calls])
    return (_seconds(many, x, repeats) - _seconds(one, x, repeats)) / (calls - 1)


def main(argv=None) -> int:
    from pjrt.custom_kernels import CUSTOM_KERNELS, Source, define_kernel
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args(argv)
    if "openhlo_bench_add_one" not in CUSTOM_KERNELS:
        define_kernel("openhlo_bench_add_one", Source(KERNEL, "openhlo_bench_add_one"))
    custom = per_call_seconds("custom_call", args.calls, args.repeats)
    native = per_call_seconds("negate", args.calls, args.repeats)
    print(f"custom_call inside an executable: {custom * 1e6:.3f} us per call "
          f"(native negate: {native * 1e6:.3f} us per op; {args.calls} calls, median of "
          f"{args.repeats})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
