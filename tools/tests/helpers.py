"""Running the ``openhlo`` command in tests: in-process and as a real subprocess."""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.cli import main

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


# A program sharded over 4 devices whose contracting dimension is split, so the partitioner
# all-reduces (test_spmd_cli, test_run_multiprocess).
SHARDED_DOT_PROGRAM = """
sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>},
                       %b: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.tanh %0 : tensor<8x8xf32>
  return %1 : tensor<8x8xf32>
}
"""
