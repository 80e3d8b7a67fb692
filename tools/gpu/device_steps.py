"""The steps of the prepared GPU run (device_checks.py runs each in its own process).

``python -m tools.gpu.device_steps NAME --out DIR`` runs one step and writes ``DIR/NAME.json``;
a step that fails raises, and whatever it measured before is still written. The bars the
issue sets (issue 22) are recorded beside the figures: conformance passes >= 99% of the cpu
backend's, geomean time <= 1.5x the better of XLA and Inductor, elementwise fusions >= 70%
of a device copy's bandwidth, bf16 GEMM >= 85% of ``torch.matmul``.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Cheapest to compile first: a step cut short by its timeout keeps the most figures.
BENCH_WORKLOADS = ("layernorm_gelu", "softmax_xent", "gpt_block_fwd", "conv_block",
                   "mlp_train")
COPY_BYTES = 256 << 20
GEMM_N = 8192


class Recorder:
    """The step's JSON, written after every figure so a failing step keeps what it had."""

    def __init__(self, out: str, name: str):
        self.path = os.path.join(out, f"{name}.json")
        self.data: dict = {}

    def __setitem__(self, key, value) -> None:
        self.data[key] = value
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(self.data, f, indent=1, default=str)

    def __getitem__(self, key):
        return self.data[key]


def _run(command: list[str], timeout: float) -> tuple[int, str]:
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=timeout)
    return done.returncode, done.stdout + done.stderr


def _tail(text: str, lines: int = 30) -> str:
    return "\n".join(text.splitlines()[-lines:])


# ---------------------------------------------------------------------------------------

def probe(rec: Recorder, args) -> None:
    if shutil.which("nvidia-smi"):
        rec["nvidia_smi"] = _run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,"
                                  "clocks.max.sm", "--format=csv,noheader"], 10)[1].strip()
    versions = {"python": sys.version.split()[0]}
    for name in ("numpy", "torch", "jax", "jaxlib", "triton", "cupy", "ml_dtypes"):
        try:
            versions[name] = getattr(__import__(name), "__version__", "?")
        except Exception as exc:  # a missing package is a fact of the machine
            versions[name] = f"unavailable: {type(exc).__name__}"
    try:
        from importlib.metadata import version
        versions["nvidia-cuda-nvrtc"] = version("nvidia-cuda-nvrtc")
    except Exception as exc:
        versions["nvidia-cuda-nvrtc"] = f"unavailable: {type(exc).__name__}"
    rec["versions"] = versions
    from pjrt.plugins.cuda import runtime
    driver = runtime.open_driver()
    version = driver.version()
    rec["driver_version"] = f"{version // 1000}.{version % 1000 // 10}"
    devices = []
    for i in range(driver.device_count()):
        device = runtime.native().Device(driver, i, runtime.cublas_path())
        devices.append({"name": device.name, "compute_capability": device.compute_capability,
                        "multiprocessors": device.multiprocessors,
                        "memory_bytes": device.total_memory()})
    rec["devices"] = devices
    rec["cublas"] = runtime.cublas_path()


def runtime_tests(rec: Recorder, args) -> None:
    # The suite's host-emulated numerics (nvcc and g++ per program) took 45 s on one core of
    # the GPU machine: spread over its cores when pytest-xdist is there (the image has it).
    import importlib.util
    workers = ["-n", str(min(8, os.cpu_count() or 1))] if importlib.util.find_spec("xdist") else []
    rc, output = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                       *workers, "pjrt/plugins/cuda/tests"], 45)
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|error)",
                                                     output)}
    rec["counts"] = counts
    rec["tail"] = _tail(output)
    if rc != 0:
        raise SystemExit(f"pytest exited with {rc}")


def backend_check(rec: Recorder, args) -> None:
    command = [sys.executable, "-m", "tools.cli", "backend-check", "cuda"]
    if args.conformance:
        command += ["--conformance", args.conformance]
    rc, output = _run(command, 38)  # within the step's 40 s
    rec["tail"] = _tail(output, 40)
    last = output.strip().splitlines()[-1] if output.strip() else ""
    rec["verdict"] = last
    if rc != 0:
        raise SystemExit(f"backend-check exited with {rc}: {last}")


def conformance(rec: Recorder, args) -> None:
    if not args.conformance:
        raise SystemExit("no conformance suites: run tools/gpu/fetch_wheels.sh before the "
                         "device run (it copies them into gpu_wheels/)")
    folder = os.path.join(args.conformance, "testdata")
    files = sorted(os.path.join(folder, f) for f in os.listdir(folder) if f.endswith(".mlir"))
    stride = max(1, math.ceil(len(files) / args.sample))
    sample = files[::stride]
    rec["sample"] = {"files": len(sample), "of": len(files), "every": stride}
    passed = {}
    # Seconds: cpu took 8 on the first GPU run. cuda compiles every program (one nvcc call,
    # about half a second) now that check ops run (host_checks.py): 8 workers, one CUDA
    # context each.
    for backend, jobs, limit in (("cpu", os.cpu_count() or 4, 18), ("cuda", 8, 38)):
        report = os.path.join(args.out, f"conformance_{backend}.tmp.json")
        try:
            _run([sys.executable, "-m", "tools.cli", "conformance", "--backend", backend,
                  "--jobs", str(jobs), "--timeout", "20", "--json", report, *sample], limit)
            with open(report, encoding="utf-8") as f:
                document = json.load(f)
        except (subprocess.TimeoutExpired, OSError, json.JSONDecodeError) as exc:
            rec[backend] = {"error": f"{type(exc).__name__}: {exc}"}
            continue
        finally:
            if os.path.exists(report):
                os.remove(report)
        passed[backend] = {(r["file"], r["case"]) for r in document["results"]
                           if r["status"] == "pass"}
        rec[backend] = document["summary"]
    if len(passed) < 2:
        raise SystemExit("a backend's conformance run did not finish")
    both = passed["cpu"] & passed["cuda"]
    ratio = len(both) / len(passed["cpu"]) if passed["cpu"] else None
    rec["cuda_passes_of_cpu_passes"] = ratio
    rec["bar"] = {"needed": 0.99, "met": ratio is not None and ratio >= 0.99}
    rec["cpu_only"] = sorted(f"{f}#{c}" for f, c in passed["cpu"] - passed["cuda"])[:40]


def _baselines(instance) -> dict:
    """Callables running ``instance`` with jax.jit and torch.compile on the GPU, each
    returning once the work is done."""
    import jax
    import numpy as np
    import torch
    gpu = jax.devices("gpu")[0]
    jitted = jax.jit(instance.jax_fn)
    jax_args = [jax.device_put(a, gpu) for a in instance.inputs]
    compiled = torch.compile(instance.torch_fn)
    torch_args = [torch.from_numpy(np.array(a)).cuda() for a in instance.inputs]

    def inductor():
        result = compiled(*torch_args)
        torch.cuda.synchronize()
        return result

    return {"xla": lambda: jax.block_until_ready(jitted(*jax_args)), "inductor": inductor}


def _openhlo(instance, client):
    """``instance`` on the openhlo cuda client: a callable returning its result buffers
    once they are ready."""
    from tools.bench.runners import lower
    executable = client.compile(lower(instance).as_text())
    buffers = [client.buffer_from_numpy(a) for a in instance.inputs]
    return lambda: [b.block_until_ready() for b in executable.execute(buffers)]


def _bench_one(instance, client) -> dict:
    """Times and checks of one workload; the baselines are timed even when openhlo cannot
    compile the workload (the figures a later run compares with)."""
    import numpy as np
    from tools.bench.suite import check_outputs
    from tools.bench.timing import interleaved_medians
    contenders = _baselines(instance)
    figure: dict = {}
    try:
        contenders["openhlo"] = _openhlo(instance, client)
        reference = [np.asarray(o) for o in contenders["xla"]()]
        figure["wrong"] = check_outputs([b.to_numpy() for b in contenders["openhlo"]()],
                                        reference)
    except Exception as exc:  # recorded; the baselines are still timed
        figure["openhlo_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        contenders.pop("openhlo", None)
    times = interleaved_medians(contenders, budget=1.0, rounds=3)
    figure["median_s"] = {k: v["median_s"] for k, v in times.items()}
    if "openhlo" in times:
        best = min(times["xla"]["median_s"], times["inductor"]["median_s"])
        figure["ratio_to_best"] = times["openhlo"]["median_s"] / best
    return figure


def bench(rec: Recorder, args) -> None:
    import jax
    import pjrt
    from tools.bench.workloads import WORKLOADS
    # Full float32 products on every side: cuBLAS's COMPUTE_32F is what openhlo runs.
    jax.config.update("jax_default_matmul_precision", "highest")
    client = pjrt.make_client("cuda")
    figures, ratios = {}, []
    for name in BENCH_WORKLOADS:
        try:
            figures[name] = _bench_one(WORKLOADS[name].instance(), client)
        except Exception as exc:  # one workload's failure is recorded; the others run
            figures[name] = {"error": f"{type(exc).__name__}: {str(exc)[:400]}"}
        if figures[name].get("wrong", "") is None and "ratio_to_best" in figures[name]:
            ratios.append(figures[name]["ratio_to_best"])
        rec["workloads"] = figures
    client.close()
    geomean = math.exp(statistics.fmean(math.log(r) for r in ratios)) if ratios else None
    rec["geomean_ratio_to_best"] = geomean
    rec["bar"] = {"needed": "<= 1.5", "met": geomean is not None and geomean <= 1.5 and
                  len(ratios) == len(BENCH_WORKLOADS)}


def _event_ms(fn, repeats: int) -> float:
    """Median milliseconds of ``fn`` (torch CUDA events around each call)."""
    import torch
    fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return statistics.median(samples)


def _openhlo_ms(executable, buffers, repeats: int) -> float:
    """Median milliseconds of one execution: ``repeats`` queued back to back, timed on the
    host around the last completion (dispatch overlaps the previous execution)."""
    executable.execute(buffers)[0].block_until_ready()
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(repeats):
            outputs = executable.execute(buffers)
        outputs[0].block_until_ready()
        samples.append((time.perf_counter() - start) * 1e3 / repeats)
    return statistics.median(samples)


def roofline(rec: Recorder, args) -> None:
    """The ceilings (torch on the same GPU) first, then openhlo's figures against them."""
    import torch
    n = COPY_BYTES // 4
    x = torch.randn(n, device="cuda")
    y = torch.empty_like(x)
    copy_gbs = 2 * COPY_BYTES / _event_ms(lambda: y.copy_(x), 20) / 1e6
    rec["device_copy_GBps"] = copy_gbs
    a = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(GEMM_N, GEMM_N, device="cuda", dtype=torch.bfloat16)
    torch_tflops = 2 * GEMM_N ** 3 / _event_ms(lambda: torch.matmul(a, b), 10) / 1e9
    rec["torch_matmul_TFLOPs"] = torch_tflops
    import pjrt
    client = pjrt.make_client("cuda")
    failures = []
    for name, measure in (("elementwise", lambda: _elementwise(rec, client, copy_gbs)),
                          ("gemm", lambda: _gemm(rec, client, torch_tflops, a, b))):
        try:
            measure()
        except Exception as exc:  # recorded; the other measure still runs
            rec[f"{name}_error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
            failures.append(name)
    if failures:
        raise SystemExit(f"openhlo failed: {', '.join(failures)}")


def _elementwise(rec: Recorder, client, copy_gbs: float) -> None:
    """x * 2 + 1 over 256 MiB: one read and one write per element, as a copy."""
    import numpy as np
    n = COPY_BYTES // 4
    program = (f"func.func @main(%x: tensor<{n}xf32>) -> tensor<{n}xf32> {{\n"
               f"  %c = stablehlo.constant dense<2.0> : tensor<{n}xf32>\n"
               f"  %o = stablehlo.constant dense<1.0> : tensor<{n}xf32>\n"
               f"  %m = stablehlo.multiply %x, %c : tensor<{n}xf32>\n"
               f"  %r = stablehlo.add %m, %o : tensor<{n}xf32>\n"
               f"  return %r : tensor<{n}xf32>\n}}\n")
    host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    buffers = [client.buffer_from_numpy(host)]
    executable = client.compile(program)
    got = executable.execute(buffers)[0].to_numpy()
    rec["elementwise_wrong"] = None if np.allclose(got, 2 * host + 1) else \
        "x * 2 + 1 differs from numpy"
    fused_gbs = 2 * COPY_BYTES / _openhlo_ms(executable, buffers, 20) / 1e6
    rec["elementwise_GBps"] = fused_gbs
    rec["elementwise_fraction_of_copy"] = fused_gbs / copy_gbs
    rec["elementwise_bar"] = {"needed": 0.70, "met": fused_gbs / copy_gbs >= 0.70}


def _gemm(rec: Recorder, client, torch_tflops: float, a, b) -> None:
    """The bf16 product of torch's operands ``a @ b``, checked against torch's."""
    import ml_dtypes
    import numpy as np
    import torch
    t = f"tensor<{GEMM_N}x{GEMM_N}xbf16>"
    gemm = client.compile(
        f"func.func @main(%a: {t}, %b: {t}) -> {t} {{\n"
        f"  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0]\n"
        f"      : ({t}, {t}) -> {t}\n"
        f"  return %0 : {t}\n}}\n")
    operands = [client.buffer_from_numpy(m.float().cpu().numpy().astype(ml_dtypes.bfloat16))
                for m in (a, b)]
    result = gemm.execute(operands)[0].to_numpy().astype(np.float32)
    reference = torch.matmul(a, b).float().cpu().numpy()
    error = float(np.linalg.norm(result - reference) / np.linalg.norm(reference))
    rec["gemm_relative_l2_error"] = error
    ours = 2 * GEMM_N ** 3 / _openhlo_ms(gemm, operands, 10) / 1e9
    rec["openhlo_gemm_TFLOPs"] = ours
    rec["gemm_fraction_of_torch"] = ours / torch_tflops
    rec["gemm_bar"] = {"needed": 0.85, "met": ours / torch_tflops >= 0.85 and error < 1e-2}


STEP_FUNCTIONS = {f.__name__: f for f in (probe, runtime_tests, backend_check, conformance,
                                          bench, roofline)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu.device_steps")
    parser.add_argument("step", choices=sorted(STEP_FUNCTIONS))
    parser.add_argument("--out", required=True)
    parser.add_argument("--conformance", default=None)
    parser.add_argument("--sample", type=int, default=150)
    args = parser.parse_args(argv)
    rec = Recorder(args.out, args.step)
    rec["started"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    STEP_FUNCTIONS[args.step](rec, args)
    return 0


def exit_now(code: int) -> None:
    """Ends the process without the interpreter's teardown. With jax, torch and our CUDA
    client in one process, that teardown (their atexit hooks and driver contexts released
    in some order) hung past the bench step's timeout on the first GPU run, after its JSON
    was complete: the Recorder has written every figure by now, so flush and leave."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    try:
        status = main()
    except SystemExit as exc:  # argparse, or a step's own verdict
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except BaseException:  # the traceback goes to the step's log, as an uncaught one would
        import traceback
        traceback.print_exc()
        status = 1
    exit_now(status)
