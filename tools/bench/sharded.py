"""Sharded benchmark workloads: a Megatron-style MLP (w1 split on columns, w2 on rows) and a
data-parallel training step, run through JAX with ``NamedSharding`` on 8 devices on XLA (cpu,
8 host devices) and on OpenHLO (the PJRT plugin, 8 virtual devices), and written in PyTorch with
``mark_sharding`` under ``torch.compile(backend="openhlo")`` on 8 virtual devices
(``openhlo_torch``, tools/bench/sharded_torch.py; same inputs).

``python -m tools.bench.sharded [--json OUT] [--steps N] [--quick] [--no-torch]``

Per workload and stack: the median step time, whether the results equal the unsharded ones
(the function jitted on one device), and the bytes each device sends: the per-device result
bytes of the collectives (what XLA's summaries count), ours from our partitioned module (the
lowered program compiled by our cpu client for 8 partitions), XLA's from its final compiled
program (after its combiner), PyTorch's from the partitioned programs its step ran (forward,
and backward for the training step). Exit status 1 when results differ.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _stack(platform: str, out: pathlib.Path, steps: int, quick: bool) -> dict:
    env = dict(os.environ, JAX_PLATFORMS=platform, PYTHONPATH=str(ROOT))
    if platform == "cpu":
        env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    else:
        env["OPENHLO_JAX_NUM_DEVICES"] = "8"
    cmd = [sys.executable, "-m", "tools.bench.sharded_jax", str(out), "--steps", str(steps)]
    proc = subprocess.run(cmd + (["--quick"] if quick else []), cwd=ROOT, env=env,
                          capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"the {platform} run failed:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def _torch_stack(out: pathlib.Path, steps: int, quick: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OPENHLO_TORCH_NUM_DEVICES="8")
    cmd = [sys.executable, "-m", "tools.bench.sharded_torch", str(out), "--steps", str(steps)]
    proc = subprocess.run(cmd + (["--quick"] if quick else []), cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"the PyTorch run failed:\n{proc.stderr[-3000:]}")
    return json.loads(out.read_text())


def _ours(text: str) -> list:
    import pjrt
    from tools.spmd_heldout import our_collectives
    client = pjrt.make_client("cpu", num_devices=8)
    exe = client.compile(text, pjrt.CompileOptions(num_partitions=8))
    return our_collectives(exe.executable.module)


def _close(path_a: str, path_b: str) -> tuple:
    a, b = list(np.load(path_a).values()), list(np.load(path_b).values())
    err = max(float(np.max(np.abs(x - y))) if x.size else 0.0 for x, y in zip(a, b))
    ok = len(a) == len(b) and all(np.allclose(x, y, rtol=1e-4, atol=1e-4) for x, y in zip(a, b))
    return ok, err


def measure(steps: int = 10, quick: bool = False, torch: bool = True) -> list:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        xla = _stack("cpu", pathlib.Path(tmp) / "xla.json", steps, quick)
        ours = _stack("openhlo", pathlib.Path(tmp) / "openhlo.json", steps, quick)
        pt = _torch_stack(pathlib.Path(tmp) / "torch.json", steps, quick) if torch else None
        for name, x in xla["workloads"].items():
            o = ours["workloads"][name]
            mine = _ours(x["stablehlo"])
            ok_o, err_o = _close(o["results"], x["reference"])
            ok_x, err_x = _close(x["results"], x["reference"])
            rows.append({
                "workload": name, "description": x["description"],
                "openhlo": {"step_s": o["step_s"], "compile_s": o["compile_s"],
                            "results_ok": ok_o, "max_abs_err": err_o,
                            "collectives": mine,
                            "bytes_per_device": sum(c["bytes"] for c in mine)},
                "xla": {"step_s": x["step_s"], "compile_s": x["compile_s"],
                        "results_ok": ok_x, "max_abs_err": err_x,
                        "collectives": x["collectives"],
                        "bytes_per_device": sum(c["bytes"] for c in x["collectives"])}})
            if pt is not None:
                t = pt["workloads"][name]
                ok_t, err_t = _close(t["results"], x["reference"])
                rows[-1]["openhlo_torch"] = {
                    "step_s": t["step_s"], "compile_s": t["compile_s"], "results_ok": ok_t,
                    "max_abs_err": err_t, "programs": t["programs"],
                    "collectives": t["collectives"],
                    "bytes_per_device": sum(c["bytes"] for c in t["collectives"])}
    return rows


def table(rows) -> str:
    lines = [f"{'workload':<15} {'stack':<13} {'step ms':>9} {'results':<8} "
             f"{'collectives':>11} {'bytes/device':>12}"]
    for r in rows:
        for stack in ("openhlo", "openhlo_torch", "xla"):
            if stack not in r:
                continue
            s = r[stack]
            lines.append(f"{r['workload']:<15} {stack:<13} {s['step_s'] * 1e3:>9.3f} "
                         f"{'ok' if s['results_ok'] else 'DIFFER':<8} "
                         f"{len(s['collectives']):>11} {s['bytes_per_device']:>12}")
    return "\n".join(lines)


def worker_args(argv=None) -> argparse.Namespace:
    """The command line of a worker process (``sharded_jax``, ``sharded_torch``): where to
    write its JSON report, how many timed steps, quick shapes or not."""
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--quick", action="store_true")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.sharded", description=__doc__)
    parser.add_argument("--json", help="write the rows as JSON here")
    parser.add_argument("--steps", type=int, default=10, help="timed steps per stack")
    parser.add_argument("--quick", action="store_true", help="small shapes")
    parser.add_argument("--no-torch", action="store_true", help="leave out the PyTorch stack")
    opts = parser.parse_args(argv)
    rows = measure(opts.steps, opts.quick, torch=not opts.no_torch)
    print(table(rows))
    if opts.json:
        pathlib.Path(opts.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r[s]["results_ok"] for r in rows for s in ("openhlo", "openhlo_torch")
                    if s in r) else 1


if __name__ == "__main__":
    sys.exit(main())
