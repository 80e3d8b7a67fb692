"""The latency-hiding scheduler on an FSDP-style transformer training step, on and off.

``python -m tools.bench_lhs [--repeat N] [--hardware NAME] [--lowered DIR]`` lowers the step
of ``tools.fsdp_step_jax`` with JAX (a subprocess with 8 host devices; ``--lowered``: takes it
from DIR, where no JAX is installed), compiles it for 8
partitions on the cpu backend twice (the ``cpu`` pipeline, and ``latency_hiding=False``:
the memory schedule alone), checks that both give the same bits, times ``N`` steps of
each (median wall time of ``execute_global``) and prints each schedule's estimated exposed
fraction (``xla_core.scheduling.schedule_report`` on the compiled per-device program).
Timings are printed, never asserted: the machine may be shared.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]


def lower_step(outdir: pathlib.Path) -> None:
    """``lowered.mlir`` and ``args.npz`` of the step in ``outdir`` (tools.fsdp_step_jax)."""
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
               JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-m", "tools.fsdp_step_jax", str(outdir)],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"lowering the FSDP step with JAX failed:\n{proc.stderr}")


def add_lowered_argument(parser) -> None:
    parser.add_argument("--lowered", metavar="DIR",
                        help="the step as tools.fsdp_step_jax wrote it (lowered.mlir, args.npz) "
                             "in DIR, instead of lowering it with JAX now")


def load_step(lowered=None) -> tuple:
    """(program text, inputs) of the step: from ``lowered`` (a folder tools.fsdp_step_jax
    wrote), else lowered with JAX now."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(lowered or tmp)
        if not lowered:
            lower_step(folder)
        text = (folder / "lowered.mlir").read_text()
        inputs = list(np.load(folder / "args.npz").values())
    return text, inputs


def compile_step(client, text: str, latency_hiding: bool):
    import pjrt
    # generated kernels compiled before the first run, so the timed runs use them
    options = pjrt.CompileOptions(num_partitions=8, env_option_overrides={
        "latency_hiding": latency_hiding, "async_codegen": False})
    return client.compile(text, options)


def exposed_fraction(executable, hardware_name: str) -> float:
    """The schedule report's exposed fraction of the per-device program ``executable`` runs."""
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator, schedule_report
    module = executable.optimized_module
    return schedule_report(module, CostModelEstimator(hardware(hardware_name), module))[
        "exposed_fraction"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--hardware", default="cpu")
    add_lowered_argument(parser)
    args = parser.parse_args(argv)
    import pjrt
    text, inputs = load_step(args.lowered)
    client = pjrt.make_client("cpu", num_devices=8)
    results, times = {}, {}
    for on in (False, True):
        exe = compile_step(client, text, on)
        results[on] = [np.asarray(r) for r in exe.execute_global(*inputs)]
        laps = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            exe.execute_global(*inputs)
            laps.append(time.perf_counter() - start)
        times[on] = statistics.median(laps)
        print(f"latency hiding {'on ' if on else 'off'}: median step {1e3 * times[on]:.2f} ms, "
              f"estimated exposed fraction {exposed_fraction(exe, args.hardware):.3f}")
    same = all(np.array_equal(a, b) for a, b in zip(results[False], results[True]))
    print(f"results bit-identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
