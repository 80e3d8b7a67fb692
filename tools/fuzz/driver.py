"""The fuzzing run: engine processes, progress, minimized findings, the summary.

``fuzz(options)`` fills the corpus folder with the seed programs, starts ``jobs`` engine
processes (engine.py) on it for ``seconds``, reads libFuzzer's status lines from their stderr
(``#N NEW cov: C ft: F corp: K/...``), prints progress every ``PROGRESS_EVERY`` seconds, starts
a new engine when one dies before the time is up (its crash input is a finding), and at the
end minimizes each finding with the oracle (oracle.py, minimize.py) and writes it to the
findings folder as ``<class>-<n>.mlir`` with its description in a ``//`` first line.
"""
from __future__ import annotations

import json
import os
import re
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field

from tools.fuzz.contract import CRASH, FAILING_CLASSES, Finding
from tools.fuzz.minimize import minimize
from tools.fuzz.oracle import Oracle
from tools.fuzz.seeds import DEFAULT_MAX_SEED_BYTES, corpus_dir, fill_corpus, seed_programs

PROGRESS_EVERY = 10.0
GRACE_S = 15.0
# What libFuzzer writes when the engine process itself dies on an input.
_LIBFUZZER_ARTIFACTS = ("crash-", "oom-", "timeout-", "leak-")
_STATUS_RE = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)/")
_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclass
class Options:
    target: str
    seconds: float
    jobs: int = 1
    corpus: str | None = None
    findings: str = ""
    seeds: list[str] | None = None
    time_limit: float = 5.0
    max_seed_bytes: int = DEFAULT_MAX_SEED_BYTES
    minimize_budget: float = 30.0  # per finding
    minimize_total: float = 90.0    # for all; later findings are saved as found


@dataclass
class Summary:
    target: str
    seconds: float = 0.0
    executions: int = 0
    coverage: int = 0
    features: int = 0
    corpus_size: int = 0
    engine_restarts: int = 0
    findings: list[dict] = field(default_factory=list)

    @property
    def by_class(self) -> dict[str, int]:
        return dict(Counter(f["kind"] for f in self.findings))

    @property
    def failed(self) -> bool:
        return any(f["kind"] in FAILING_CLASSES for f in self.findings)

    def to_json(self) -> dict:
        return {"target": self.target, "seconds": round(self.seconds, 1),
                "executions": self.executions,
                "exec_per_s": round(self.executions / max(self.seconds, 1e-9), 1),
                "coverage": self.coverage, "features": self.features,
                "corpus_size": self.corpus_size, "engine_restarts": self.engine_restarts,
                "findings_by_class": self.by_class, "findings": self.findings}


class _Engine:
    """One engine process and the last status line it printed."""

    def __init__(self, command: list[str], env: dict):
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, env=env, cwd=_REPO_ROOT)
        self.executions = self.coverage = self.features = 0
        self.executions_before = 0  # of the engines this one replaced
        self.tail: list[str] = []

    def read_line(self, line: str) -> None:
        m = _STATUS_RE.match(line)
        if m:
            self.executions = int(m.group(1))
            self.coverage = max(self.coverage, int(m.group(2)))
            self.features = max(self.features, int(m.group(3)))
        self.tail = (self.tail + [line])[-20:]


def fuzz(options: Options, out=sys.stdout) -> Summary:
    programs = seed_programs(options.seeds, options.max_seed_bytes)
    if not programs:
        raise ValueError("no seed programs (give --seeds DIR, or put the conformance suites "
                         "in ../shared/conformance)")
    corpus = corpus_dir(options.target, options.corpus)
    fill_corpus(corpus, programs)
    os.makedirs(options.findings, exist_ok=True)
    raw = tempfile.mkdtemp(prefix=f"raw-{options.target}-", dir=options.findings)
    summary = Summary(options.target)
    try:
        _run_engines(options, corpus, raw, summary, out)
        summary.corpus_size = len(os.listdir(corpus))
        summary.findings = _minimize_findings(options, raw, out)
    finally:
        shutil.rmtree(raw, ignore_errors=True)
    return summary


def _engine_command(options: Options, corpus: str, raw: str, seconds: float) -> list[str]:
    command = [sys.executable, "-m", "tools.fuzz.engine", "--target", options.target,
               "--raw", raw, "--time-limit", str(options.time_limit),
               "--max-seed-bytes", str(options.max_seed_bytes)]
    for seeds in options.seeds or ():
        command += ["--seeds", os.path.abspath(seeds)]
    return command + ["--", corpus, f"-max_total_time={max(1, int(seconds))}", "-timeout=0",
                      f"-max_len={2 * options.max_seed_bytes}", "-rss_limit_mb=6144",
                      "-print_final_stats=1", f"-artifact_prefix={raw}{os.sep}"]


def _run_engines(options: Options, corpus: str, raw: str, summary: Summary, out) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = _REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    start = time.monotonic()
    deadline = start + options.seconds
    selector = selectors.DefaultSelector()

    def launch(previous: _Engine | None = None) -> _Engine:
        command = _engine_command(options, corpus, raw, deadline - time.monotonic())
        engine = _Engine(command, env)
        if previous is not None:
            engine.executions_before = previous.executions_before + previous.executions
        selector.register(engine.process.stderr, selectors.EVENT_READ, engine)
        return engine

    engines = [launch() for _ in range(max(1, options.jobs))]
    next_report = start + PROGRESS_EVERY
    interrupted_at = None
    while any(e.process.poll() is None for e in engines):
        now = time.monotonic()
        if now >= deadline and interrupted_at is None:
            # libFuzzer checks -max_total_time only between inputs of its main loop, not
            # while it runs the initial corpus: SIGINT stops it there too (final stats
            # printed); a process that does not stop is killed after a grace period.
            interrupted_at = now
            for engine in engines:
                if engine.process.poll() is None:
                    engine.process.send_signal(signal.SIGINT)
        if interrupted_at is not None and now > interrupted_at + GRACE_S:
            break
        for key, _ in selector.select(timeout=1.0):
            line = key.fileobj.readline()
            if line:
                key.data.read_line(line.decode("utf-8", "replace").rstrip())
            else:
                selector.unregister(key.fileobj)
        for i, engine in enumerate(engines):
            if engine.process.poll() is not None and deadline - time.monotonic() > 5:
                if engine.executions == 0:  # never got going: restarting would not help
                    raise RuntimeError("the fuzzing engine did not start:\n"
                                       + "\n".join(engine.tail))
                if engine.process.returncode != 0:  # crashed: libFuzzer saved the input
                    summary.engine_restarts += 1
                    out.write("engine stopped (exit code %d): %s\n"
                              % (engine.process.returncode, " | ".join(engine.tail[-3:])))
                engines[i] = launch(engine)
        if now >= next_report:
            _tally(engines, summary, now - start)
            out.write(_progress_line(summary, corpus, raw) + "\n")
            out.flush()
            next_report = now + PROGRESS_EVERY
    for engine in engines:
        if engine.process.poll() is None:
            engine.process.kill()
        engine.process.wait()
    _tally(engines, summary, time.monotonic() - start)


def _tally(engines: list[_Engine], summary: Summary, seconds: float) -> None:
    summary.seconds = seconds
    summary.executions = sum(e.executions_before + e.executions for e in engines)
    summary.coverage = max([summary.coverage] + [e.coverage for e in engines])
    summary.features = max([summary.features] + [e.features for e in engines])


def _progress_line(summary: Summary, corpus: str, raw: str) -> str:
    findings = sum(1 for name in os.listdir(raw) if name.endswith(".json") or
                   name.startswith(_LIBFUZZER_ARTIFACTS))
    return (f"[{summary.target}] {summary.seconds:6.0f} s  execs {summary.executions}  "
            f"exec/s {summary.executions / max(summary.seconds, 1e-9):.0f}  "
            f"cov {summary.coverage}  ft {summary.features}  "
            f"corpus {len(os.listdir(corpus))}  findings {findings}")


def _minimize_findings(options: Options, raw: str, out) -> list[dict]:
    """Each raw finding minimized and saved; their descriptions."""
    found: list[tuple[Finding | None, str]] = []
    for name in sorted(os.listdir(raw)):
        path = os.path.join(raw, name)
        if name.endswith(".json"):
            with open(path, encoding="utf-8") as f:
                finding = Finding(**json.load(f)["finding"])
            with open(path[:-len(".json")] + ".mlir", encoding="utf-8") as f:
                found.append((finding, f.read()))
        elif name.startswith(_LIBFUZZER_ARTIFACTS):
            with open(path, "rb") as f:
                found.append((None, f.read().decode("utf-8", "replace")))
    saved = []
    deadline = time.monotonic() + options.minimize_total
    with Oracle(options.target, options.time_limit, 2 * options.time_limit) as oracle:
        for finding, text in found:
            if finding is None:  # the engine process died on it: ask a worker what happens
                finding = oracle.check(text) or Finding(CRASH, "engine", "engine",
                                                        "the fuzzing process died; the "
                                                        "input does not reproduce it alone")
            budget = min(options.minimize_budget, deadline - time.monotonic())
            small = minimize_finding(oracle, finding, text, budget) if budget > 0 else text
            saved.append(_save(options.findings, finding, small))
            out.write(f"finding: {finding.describe()} -> {saved[-1]['file']}\n")
    return saved


def minimize_finding(oracle: Oracle, finding: Finding, text: str, budget: float) -> str:
    """``text`` shrunk while the oracle reports a finding of the same signature."""
    def reproduces(candidate: str) -> bool:
        again = oracle.check(candidate)
        return again is not None and again.signature == finding.signature
    if not reproduces(text):
        return text  # flaky: keep the input as found
    return minimize(text, reproduces, budget)


def _save(folder: str, finding: Finding, text: str) -> dict:
    existing = [n for n in os.listdir(folder) if n.startswith(finding.kind + "-")]
    path = os.path.join(folder, f"{finding.kind}-{len(existing) + 1}.mlir")
    with open(path, "w", encoding="utf-8") as f:
        f.write(f"// {finding.describe()}\n{text}")
    return {**finding.to_json(), "file": path, "input": text}
