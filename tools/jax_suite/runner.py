"""Running one test file, or one shard of it, under pytest in child processes.

The child is ``python -m pytest FILE -p tools.jax_suite.plugin`` in the jax source folder
(so JAX's own ``conftest.py`` and pytest settings apply) with ``JAX_PLATFORMS`` set. The
runner follows the plugin's stream: a test that runs past the per-test timeout has its
process group killed and is marked ``timeout``; a process that dies during a test marks
that test ``crashed``. Either way a new process runs the tests not yet reached, so one bad
test costs only itself (and a restart: importing jax and collecting, a few seconds).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tools.jax_suite import selection
from tools.jax_suite.outcomes import CRASHED, NOT_RUN, TIMEOUT, Outcome, read_stream

REPO_ROOT = Path(__file__).resolve().parents[2]
MAX_RESTARTS = 100  # per shard: past this, the tests left are ``not_run``
POLL_SECONDS = 0.2
PROGRESS_SECONDS = 120.0
LOG_TAIL = 15  # lines of a child's output quoted when it fails without running a test


@dataclass
class Job:
    """One pytest run: a file (relative to ``src``) on a platform, and which of its tests."""
    src: Path
    file: str
    platform: str
    generated_cases: int
    timeout: float
    sample: int | None = None
    shard: tuple[int, int] | None = None
    select: list[str] | None = None
    test_dut: str | None = None  # JAX's jax_test_dut flag in the child (selection.TEST_DUT_ENV)


@dataclass
class JobResult:
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    error: str | None = None  # the file could not be run at all (collection failed, ...)
    restarts: int = 0
    seconds: float = 0.0


def child_env(platform: str, generated_cases: int) -> dict[str, str]:
    """The environment of a child: the platform, the number of generated cases, and this
    repository importable (the plugin, and OpenHLO for a platform that is OpenHLO)."""
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = platform
    env["JAX_NUM_GENERATED_CASES"] = str(generated_cases)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH"))
                                        if p)
    return env


def probe_platform(platform: str, timeout: float = 300) -> str | None:
    """None if JAX can start ``platform`` in a fresh process, else why not (the last line
    of the error: for a missing plugin, JAX's 'Unknown backend' or similar)."""
    code = "import jax; print(jax.devices()[0].platform)"
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                              env=child_env(platform, 1), timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"starting JAX with JAX_PLATFORMS={platform} took over {timeout:g} s"
    if proc.returncode == 0:
        return None
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    return lines[-1] if lines else f"exit status {proc.returncode}"


def run_job(job: Job) -> JobResult:
    """Run ``job`` to the end, restarting after crashes and timeouts."""
    result = JobResult()
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="openhlo-jax-suite-") as tmp:
        todo = job.select  # None: whatever the plugin selects by sample and shard
        while True:
            attempt = Path(tmp) / f"run{result.restarts}"
            finished_before = len(result.outcomes)
            collected, log, code = _run_once(job, todo, attempt, result.outcomes)
            progressed = len(result.outcomes) > finished_before
            # Nothing collected, or nothing and pytest said why not (2: a collection error;
            # 0 and 5 are "all fine" and "no tests"): a broken file or platform.
            if collected is None or (not collected and code not in (0, 5)):
                result.error = _describe_failure(log)
                break
            if todo is not None and result.restarts == 0:
                # Names of generated cases can depend on the platform (its dtypes).
                for key in sorted(set(todo) - set(collected)):
                    result.outcomes[key] = Outcome(NOT_RUN, "not collected on this platform")
            left = [k for k in collected if k not in result.outcomes]
            if not left:
                break
            if not progressed:
                # No test finished, crashed or timed out: pytest stopped before running
                # any (a collection error); another try would do the same.
                result.error = _describe_failure(log)
                for key in left:
                    result.outcomes[key] = Outcome(NOT_RUN, "pytest ran no test")
                break
            todo = left
            if result.restarts == MAX_RESTARTS:
                for key in todo:
                    result.outcomes[key] = Outcome(NOT_RUN, f"over {MAX_RESTARTS} restarts")
                break
            result.restarts += 1
    result.seconds = time.monotonic() - start
    return result


def _run_once(job: Job, todo: list[str] | None, base: Path,
              outcomes: dict[str, Outcome]) -> tuple[list[str] | None, str, int]:
    """One child process; its finished outcomes are added to ``outcomes``. Returns the
    tests it selected (None if it never got that far), its output and exit status."""
    stream, log_path = base.with_suffix(".jsonl"), base.with_suffix(".log")
    env = child_env(job.platform, job.generated_cases)
    env[selection.STREAM_ENV] = str(stream)
    for name in (selection.SAMPLE_ENV, selection.SHARD_ENV, selection.SELECT_ENV,
                 selection.TEST_DUT_ENV):
        env.pop(name, None)
    if job.test_dut:
        env[selection.TEST_DUT_ENV] = job.test_dut
    if todo is not None:
        select = base.with_suffix(".select")
        select.write_text("".join(k + "\n" for k in todo), encoding="utf-8")
        env[selection.SELECT_ENV] = str(select)
    else:
        if job.sample is not None:
            env[selection.SAMPLE_ENV] = str(job.sample)
        if job.shard is not None:
            env[selection.SHARD_ENV] = f"{job.shard[0]}/{job.shard[1]}"
    command = [sys.executable, "-m", "pytest", job.file, "-p", "tools.jax_suite.plugin",
               "-p", "no:cacheprovider", "-q", "--no-header"]
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, cwd=job.src, env=env, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        killed_for = _watch(proc, stream, job.timeout, f"{job.file} [{job.platform}]")
    state = read_stream(stream.read_text(encoding="utf-8") if stream.exists() else "")
    outcomes.update(state.outcomes)
    if state.in_flight is not None and state.in_flight not in outcomes:
        if killed_for is not None:
            outcomes[state.in_flight] = Outcome(TIMEOUT, f"ran over {job.timeout:g} s")
        else:
            outcomes[state.in_flight] = Outcome(CRASHED, _exit_text(proc.returncode))
    log = log_path.read_text(encoding="utf-8", errors="replace")
    return state.collected, log, proc.returncode


def _watch(proc: subprocess.Popen, stream: Path, timeout: float, label: str) -> str | None:
    """Wait for ``proc``; kill its process group if the stream shows no progress (a test
    starting or finishing, or collection) for ``timeout`` seconds. Returns why it was
    killed, if so. Says how far it got on stderr now and then: full runs take minutes."""
    size, last = -1, time.monotonic()
    next_note = last + PROGRESS_SECONDS
    while proc.poll() is None:
        time.sleep(POLL_SECONDS)
        if time.monotonic() > next_note:
            next_note += PROGRESS_SECONDS
            state = read_stream(stream.read_text(encoding="utf-8") if stream.exists() else "")
            sys.stderr.write(f"{label}: {len(state.outcomes)} of "
                             f"{len(state.collected or ())} tests done\n")
        now_size = stream.stat().st_size if stream.exists() else 0
        if now_size != size:
            size, last = now_size, time.monotonic()
        elif time.monotonic() - last > timeout:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return "timeout"
    return None


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"process killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"process killed by signal {-code}"
    return f"process exited with status {code} during the test"


def _describe_failure(log: str) -> str:
    lines = [ln for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("E ") or "Error" in ln]
    return "\n".join((errors or lines)[-LOG_TAIL:]) or "pytest produced no output"
