"""Clean exit of processes that use the JAX plugin: the issue 5 soak.

    python -m tools.jax_exit_soak [--runs 100] [--timeout S] [--scenarios A,B] [--platform P]

Each run is a fresh ``python -c`` child with ``JAX_PLATFORMS=openhlo`` running one scenario
(the runs cycle through the chosen ones; default ``mix,in_flight,thread_dispatching``):

* ``mix``: jit of a few functions (a matmul layer, its ``jax.grad``, a ``lax.while_loop``),
  ``device_put`` and transfers back checked against numpy, an op our runtime rejects at
  execution (``lax.approx_max_k``: a custom_call) whose error is caught, then exit with
  arrays, jitted functions and their executables still alive;
* ``in_flight``: exits right after dispatching a long computation, without waiting for it;
* ``thread_dispatching``: exits while a daemon thread keeps dispatching a jitted matmul (large
  enough to go through the plugin's dispatch queue) in a loop; the plugin's exit hook stops
  taking executions first, so the thread's next call fails with an error saying the process
  is exiting (the thread checks the message and ends) instead of refilling the queue the hook
  waits for;
* ``thread_in_flight`` (only when named): exits while a daemon thread is inside a long
  execution. Python 3.11 ends such a thread with a forced unwind (pthread_exit) when it next
  takes the GIL, through jaxlib's C++ frames: JAX's own cpu backend aborts there too
  ("terminate called ... FATAL: exception not rethrown"), so it is no bar for the plugin;
  ``--platform cpu`` runs any scenario on JAX's cpu backend, for comparison.

A run passes when the child exits with status 0 within ``--timeout`` seconds, printed its
``SOAK-OK`` line, and wrote nothing to stderr but the known harmless lines (HARMLESS); any
line holding one of FATAL_MARKERS fails it whatever else it says. Prints a line per run and
a summary; exit status 1 on any failure.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]

# Written by JAX for a plugin platform it does not know: not an error. frameworks/jax/plugin.py
# marks openhlo as known (jax 0.10.2 prints nothing), so this shows only on a JAX without that
# hook.
HARMLESS = (("Platform 'openhlo' is experimental and not all JAX functionality may be "
             "correctly supported!"),)
FATAL_MARKERS = ("Traceback", "Exception ignored", "terminate called", "Fatal",
                 "Segmentation", "Aborted", "core dumped")
OK_MARKER = "SOAK-OK"

_PRELUDE = """
import numpy as np
import frameworks.jax.plugin as plugin
plugin.initialize()
import jax
import jax.numpy as jnp
from jax import lax
assert jax.devices()[0].platform == {platform!r}, jax.devices()
"""

_MIX = """
rng = np.random.default_rng(0)
x_host = rng.standard_normal((16, 8)).astype(np.float32)
w_host = rng.standard_normal((8, 4)).astype(np.float32)
x, w = jax.device_put(x_host), jax.device_put(w_host)


@jax.jit
def layer(w, x):
    return jnp.tanh(x @ w).sum()


grad = jax.jit(jax.grad(layer))
g = grad(w, x)
expected = x_host.T @ (1 - np.tanh(x_host @ w_host) ** 2)
np.testing.assert_allclose(np.asarray(g), expected, rtol=1e-4, atol=1e-4)
np.testing.assert_allclose(float(layer(w, x)), np.tanh(x_host @ w_host).sum(), rtol=1e-4)


@jax.jit
def collatz_steps(n):
    def body(carry):
        n, k = carry
        return jnp.where(n % 2 == 0, n // 2, 3 * n + 1), k + 1
    return lax.while_loop(lambda carry: carry[0] != 1, body, (n, 0))[1]


assert int(collatz_steps(np.int32(27))) == 111
back = np.asarray(jax.device_put(np.arange(5, dtype=np.float32)) * 2)
assert back.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0], back
rejected = jax.jit(lambda v: lax.approx_max_k(v, 2)[0])
try:
    np.asarray(rejected(jnp.ones((3, 5))))
    error = None
except Exception as exc:  # noqa: BLE001 - the error expected from the plugin
    error = exc
if jax.devices()[0].platform == "openhlo":  # our runtime has no ApproxTopK custom_call
    assert error is not None and "ApproxTopK" in str(error), error
kept = [layer(w, x), grad(w, x), jnp.ones((64, 64)) @ jnp.ones((64, 64))]  # alive at exit
print("SOAK-OK")
"""

_LONG_LOOP = """
@jax.jit
def long_loop(v):
    return lax.fori_loop(0, 200_000, lambda i, c: jnp.sin(c) * 0.5 + 0.1, v)


long_loop(jnp.zeros(256)).block_until_ready()  # compiled before the run that exits
"""

_IN_FLIGHT = _LONG_LOOP + """
pending = long_loop(jnp.ones(256))  # dispatched, never waited for
print("SOAK-OK", flush=True)
"""

_THREAD_IN_FLIGHT = _LONG_LOOP + """
import threading
import time
started = threading.Event()


def work():
    started.set()
    for _ in range(100):
        long_loop(jnp.ones(256)).block_until_ready()


threading.Thread(target=work, daemon=True).start()
started.wait()
time.sleep(0.05)  # inside an execution now
print("SOAK-OK", flush=True)
"""

_THREAD_DISPATCHING = """
import threading
import time
layer = jax.jit(lambda v: jnp.tanh(v @ v) * 0.5)
x = jnp.ones((256, 256))  # 256 KiB: more than the plugin runs inline
layer(x).block_until_ready()
started = threading.Event()


def spin():
    started.set()
    try:
        while True:
            layer(x).block_until_ready()
    except Exception as exc:  # noqa: BLE001 - the plugin's refusal once exit began
        assert "exiting" in str(exc), exc


threading.Thread(target=spin, daemon=True).start()
started.wait()
time.sleep(0.2)
print("SOAK-OK", flush=True)
"""

SCENARIOS = {"mix": _MIX, "in_flight": _IN_FLIGHT, "thread_dispatching": _THREAD_DISPATCHING,
             "thread_in_flight": _THREAD_IN_FLIGHT}
DEFAULT_SCENARIOS = ("mix", "in_flight", "thread_dispatching")


@dataclass
class RunResult:
    scenario: str
    seconds: float
    problem: str | None   # None: a clean run
    stderr: str


def check_stderr(stderr: str) -> list[str]:
    """The stderr lines that make a run fail: any with a fatal marker, any other than the
    HARMLESS ones (whole lines)."""
    bad = []
    for line in stderr.splitlines():
        if not line.strip():
            continue
        if any(marker in line for marker in FATAL_MARKERS) or line.strip() not in HARMLESS:
            bad.append(line)
    return bad


def run_once(scenario: str, timeout: float, platform: str = "openhlo") -> RunResult:
    env = dict(os.environ, JAX_PLATFORMS=platform, PYTHONPATH=str(REPO_ROOT))
    script = _PRELUDE.format(platform=platform) + SCENARIOS[scenario]
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, cwd=REPO_ROOT, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) \
            else (exc.stderr or "")
        return RunResult(scenario, time.perf_counter() - start,
                         f"no exit within {timeout:g} s (hang)", err)
    seconds = time.perf_counter() - start
    problems = []
    if proc.returncode != 0:
        problems.append(f"exit status {proc.returncode}")
    if OK_MARKER not in proc.stdout:
        problems.append(f"no {OK_MARKER} line on stdout")
    bad = check_stderr(proc.stderr)
    if bad:
        problems.append(f"{len(bad)} unexpected stderr line(s), first: {bad[0][:200]}")
    return RunResult(scenario, seconds, "; ".join(problems) or None, proc.stderr)


def soak(runs: int, timeout: float, scenarios: list[str], platform: str = "openhlo",
         log=print) -> list[RunResult]:
    results = []
    for i in range(runs):
        result = run_once(scenarios[i % len(scenarios)], timeout, platform)
        results.append(result)
        status = "ok" if result.problem is None else f"FAIL: {result.problem}"
        log(f"[{i + 1}/{runs}] {result.scenario:<16} {result.seconds:5.1f} s  {status}")
        if result.problem is not None:
            log("  stderr (last 3000 characters):\n" + result.stderr[-3000:])
    return results


def summary(results: list[RunResult], wall: float) -> str:
    failed = [r for r in results if r.problem is not None]
    lines = [f"{len(results) - len(failed)}/{len(results)} runs exited cleanly in {wall:.0f} s"]
    per = Counter(r.scenario for r in results)
    for scenario, count in per.items():
        mine = [r for r in results if r.scenario == scenario]
        bad = sum(r.problem is not None for r in mine)
        mean = sum(r.seconds for r in mine) / count
        lines.append(f"  {scenario:<16} {count - bad}/{count} clean, {mean:.1f} s per run")
    for problem, count in Counter(r.problem for r in failed).most_common():
        lines.append(f"  FAILED x{count}: {problem}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.jax_exit_soak",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds one run may take before it counts as a hang")
    parser.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS),
                        help=f"comma-separated subset of: {', '.join(SCENARIOS)} "
                             f"(default {','.join(DEFAULT_SCENARIOS)})")
    parser.add_argument("--platform", default="openhlo",
                        help="JAX_PLATFORMS of the children (cpu: JAX's own, to compare)")
    args = parser.parse_args(argv)
    scenarios = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in scenarios if s not in SCENARIOS]
    if unknown or not scenarios:
        parser.error(f"unknown scenario(s) {', '.join(unknown) or '(none given)'}; "
                     f"known: {', '.join(SCENARIOS)}")
    start = time.perf_counter()
    results = soak(args.runs, args.timeout, scenarios, args.platform,
                   log=lambda line: print(line, flush=True))
    print(summary(results, time.perf_counter() - start))
    return 1 if any(r.problem is not None for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
