"""The prepared GPU run: every check of the cuda backend that needs the device, in order,
within a time budget, each step's outcome recorded as JSON and none stopping the next.

Run by tools/gpu/device_run.sh on the GPU machine (after it has built the extensions)::

    python -m tools.gpu.device_checks --out $OUT [--budget 300] [--only probe,bench]

Each step runs in its own process with its own timeout (a hang or a crash of the driver is
that step's failure), trimmed to what is left of the budget; a step that no longer fits is
recorded as skipped. ``$OUT/results.json`` is rewritten after every step (a run killed from
outside keeps what it had); ``$OUT/steps.log`` holds every step's output. ``--dry-run``
plans and validates the steps without running them (no GPU needed): the CPU tests run it so
the script cannot rot.
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_BUDGET_S = 300
MIN_STEP_S = 10  # a step with less time left than this is skipped, not started
CONFORMANCE_CANDIDATES = ("gpu_wheels/conformance/stablehlo", "../shared/conformance/stablehlo")


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    timeout_s: int
    what: str

    def command(self, out: str, conformance: str | None, sample: int) -> list[str]:
        """The step's process: ``python -m tools.gpu.device_steps NAME`` with the options."""
        command = [sys.executable, "-m", "tools.gpu.device_steps", self.name, "--out", out,
                   "--sample", str(sample)]
        if conformance is not None:
            command += ["--conformance", conformance]
        return command


STEPS = (
    # The first GPU run's times: probe 10 s, runtime_tests 32, backend_check 12,
    # conformance 11 (when cuda refused every program), bench 80 (its figures all written
    # by then), roofline 11.
    Step("probe", 20, "nvidia-smi, driver and library versions, the runtime's device facts"),
    Step("runtime_tests", 50, "pytest pjrt/plugins/cuda/tests (fake driver and real GPU)"),
    Step("backend_check", 40, "openhlo backend-check cuda (runtime contract + conformance)"),
    Step("conformance", 60, "a sample of testdata on cpu and cuda, pass counts compared"),
    Step("bench", 100, "bench workloads: openhlo cuda vs jax.jit and torch.compile on the GPU"),
    Step("roofline", 30, "elementwise GB/s vs a device copy; bf16 GEMM TFLOP/s vs torch"),
)


def conformance_dir() -> str | None:
    for candidate in CONFORMANCE_CANDIDATES:
        path = os.path.normpath(os.path.join(REPOSITORY, candidate))
        if os.path.isdir(os.path.join(path, "testdata")):
            return path
    return None


def plan(names: list[str], budget: float) -> list[dict]:
    """The steps to run, in order, with their timeouts; raises SystemExit on an unknown name
    or a step whose code cannot be found (what --dry-run checks)."""
    known = {s.name: s for s in STEPS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown step(s) {', '.join(unknown)}; known: {', '.join(known)}")
    steps_module = importlib.import_module("tools.gpu.device_steps")
    planned = []
    for step in STEPS:
        if step.name not in names:
            continue
        if not callable(getattr(steps_module, step.name, None)):
            raise SystemExit(f"tools/gpu/device_steps.py has no function {step.name}")
        planned.append({"name": step.name, "timeout_s": step.timeout_s, "what": step.what})
    total = sum(p["timeout_s"] for p in planned)
    if total > budget:
        raise SystemExit(f"the steps' timeouts add up to {total} s, over the budget of "
                         f"{budget} s")
    return planned


def run_step(step: Step, out: str, timeout: float, conformance: str | None, sample: int,
             log) -> dict:
    start = time.monotonic()
    record = {"name": step.name, "timeout_s": round(timeout)}
    log.write(f"\n===== {step.name} (timeout {timeout:.0f} s) =====\n")
    log.flush()
    try:
        done = subprocess.run(step.command(out, conformance, sample), cwd=REPOSITORY,
                              stdout=log, stderr=subprocess.STDOUT, timeout=timeout)
        record["rc"] = done.returncode
        record["status"] = "ok" if done.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        record["rc"] = None
        record["status"] = "timed out"
    record["seconds"] = round(time.monotonic() - start, 1)
    result_file = os.path.join(out, f"{step.name}.json")
    if os.path.exists(result_file):
        with open(result_file, encoding="utf-8") as f:
            record["result"] = json.load(f)
        os.remove(result_file)  # merged into results.json: $OUT brings back 8 files at most
    return record


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gpu.device_checks",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="folder for results.json and steps.log")
    parser.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S,
                        help=f"seconds for all steps (default {DEFAULT_BUDGET_S})")
    parser.add_argument("--only", default=",".join(s.name for s in STEPS),
                        help="comma-separated steps (default: all, in order)")
    parser.add_argument("--sample", type=int, default=150,
                        help="conformance: at most this many testdata files (every k-th)")
    parser.add_argument("--dry-run", action="store_true",
                        help="plan and validate the steps, run none (no GPU needed)")
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    names = [n for n in args.only.split(",") if n]
    planned = plan(names, args.budget)
    conformance = conformance_dir()
    results = {"budget_s": args.budget, "conformance_dir": conformance, "plan": planned,
               "steps": []}
    results_path = os.path.join(args.out, "results.json")
    if args.dry_run:
        results["dry_run"] = True
        _write(results_path, results)
        print(f"planned {len(planned)} step(s), {sum(p['timeout_s'] for p in planned)} s of "
              f"{args.budget:.0f} s; conformance suites: {conformance or 'not found'}")
        return 0
    deadline = time.monotonic() + args.budget
    by_name = {s.name: s for s in STEPS}
    with open(os.path.join(args.out, "steps.log"), "a", encoding="utf-8") as log:
        for entry in planned:
            left = deadline - time.monotonic()
            if left < MIN_STEP_S:
                results["steps"].append({"name": entry["name"], "status": "skipped",
                                         "reason": f"{left:.0f} s of the budget left"})
                continue
            step = by_name[entry["name"]]
            results["steps"].append(run_step(step, args.out, min(step.timeout_s, left),
                                             conformance, args.sample, log))
            _write(results_path, results)
    _write(results_path, results)
    print(f"{'step':<15}{'status':<12}{'seconds':>8}")
    for record in results["steps"]:
        print(f"{record['name']:<15}{record['status']:<12}{record.get('seconds', 0):>8}")
    return 0 if all(r["status"] == "ok" for r in results["steps"]) else 1


def _write(path: str, results: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, default=str)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
