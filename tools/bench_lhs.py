"""The latency-hiding scheduler on an FSDP-style transformer training step, on and off.

``python -m tools.bench_lhs [--repeat N] [--hardware NAME] [--lowered DIR]`` lowers the step
of ``tools.fsdp_step_jax`` with JAX (a subprocess with 8 host devices; ``--lowered``: takes it
from DIR, where no JAX is installed), compiles it for 8
partitions on the cpu backend twice (the ``cpu`` pipeline, and ``latency_hiding=False``:
the memory schedule alone), checks that both give the same bits, times ``N`` steps of
each, alternating between the two so that a change of the machine's load hits both alike
(median wall time of ``execute_global``, and the median CPU time of this process over a
step: what all its threads spent) and prints each schedule's estimated exposed fraction
(``xla_core.scheduling.schedule_report`` on the compiled per-device program, on the
hardware description shared by the executable's 8 devices, as the compile described it),
then the load average. Timings are printed, never asserted: the machine may be shared.
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


def compile_step(client, text: str, latency_hiding: bool, devices_per_host: int = 0):
    """The step compiled for 8 partitions; ``devices_per_host`` > 0 describes the host to
    the compiler as shared by that many devices (0: the backend fills in the 8 here)."""
    import pjrt
    # generated kernels compiled before the first run, so the timed runs use them
    overrides = {"latency_hiding": latency_hiding, "async_codegen": False}
    if devices_per_host:
        overrides["devices_per_host"] = devices_per_host
    return client.compile(text, pjrt.CompileOptions(num_partitions=8,
                                                    env_option_overrides=overrides))


def exposed_fraction(executable, hardware_name: str, devices_per_host: int = 0) -> float:
    """The schedule report's exposed fraction of the per-device program ``executable`` runs,
    on ``hardware_name`` shared by ``devices_per_host`` devices (0: as registered)."""
    from xla_core.cost import hardware
    from xla_core.scheduling import CostModelEstimator, schedule_report
    module = executable.optimized_module
    described = hardware(hardware_name, devices_per_host)
    return schedule_report(module, CostModelEstimator(described, module))["exposed_fraction"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--hardware", default="cpu")
    add_lowered_argument(parser)
    args = parser.parse_args(argv)
    import pjrt
    text, inputs = load_step(args.lowered)
    client = pjrt.make_client("cpu", num_devices=8)
    executables = {on: compile_step(client, text, on) for on in (False, True)}
    results = {on: [np.asarray(r) for r in exe.execute_global(*inputs)]
               for on, exe in executables.items()}
    laps: dict = {False: [], True: []}
    cpu: dict = {False: [], True: []}
    for k in range(args.repeat):
        for on in ((False, True) if k % 2 == 0 else (True, False)):
            start, used = time.perf_counter(), time.process_time()
            executables[on].execute_global(*inputs)
            laps[on].append(time.perf_counter() - start)
            cpu[on].append(time.process_time() - used)
    for on, exe in executables.items():
        fraction = exposed_fraction(exe, args.hardware, len(exe.addressable_devices()))
        print(f"latency hiding {'on ' if on else 'off'}: median step "
              f"{1e3 * statistics.median(laps[on]):.2f} ms (CPU "
              f"{1e3 * statistics.median(cpu[on]):.2f} ms), estimated exposed fraction "
              f"{fraction:.3f}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    same = all(np.array_equal(a, b) for a, b in zip(results[False], results[True]))
    print(f"results bit-identical: {same}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
