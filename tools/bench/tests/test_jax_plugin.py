"""The ``jax_plugin`` runner: a workload through JAX's PJRT plugin, checked against jax.jit.

A subprocess: JAX picks its platforms once per process, and this run needs ``openhlo``
among them (the bench selects them from the runners it is given).
"""
import json

import pytest

from pjrt.c_api.loader import library_path
from tools.tests.helpers import run_subprocess

pytestmark = pytest.mark.skipif(library_path() is None,
                                reason="pjrt/c_api/_openhlo_pjrt*.so is not built")


def test_while_loop_through_the_plugin_matches_jax_jit(tmp_path):
    out_json = tmp_path / "bench.json"
    outcome = run_subprocess("bench", "--quick", "--workloads", "while_loop", "--runners",
                             "openhlo,jax_plugin", "--no-cached", "--budget", "0.05",
                             "--json", out_json, timeout=300)
    assert outcome.code == 0, outcome.err     # exit status 1 on a result unlike jax.jit's
    (record,) = json.loads(out_json.read_text())["workloads"]
    result = record["results"]["jax_plugin"]
    assert result["status"] == "ok" and result["median_s"] > 0, result
    assert result["vs_openhlo"] > 0 and result["compile_cold_s"] > 0
    assert "jax_plugin over openhlo" in outcome.out
