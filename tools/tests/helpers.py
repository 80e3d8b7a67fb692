"""Running the ``openhlo`` command in tests: in-process and as a real subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.cli import main
from xla_core.spmd.tests.sharded_programs import SHARDED_DOT_PROGRAM  # noqa: F401 - for the CLI tests

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def run_cli(capsys, *argv: str) -> Outcome:
    """``openhlo ARGV`` in this process; argparse usage errors give code 2."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err)


def run_subprocess(*argv: str, stdin: str | None = None, timeout: float = 120) -> Outcome:
    """``python -m tools ARGV`` as a child process (real exit codes and streams)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-m", "tools", *map(str, argv)], input=stdin,
                          capture_output=True, text=True, cwd=REPO_ROOT, env=env,
                          timeout=timeout)
    return Outcome(proc.returncode, proc.stdout, proc.stderr)


