"""``tools.bench.sharded``: the Megatron MLP and the data-parallel step on 8 devices through
JAX on XLA and on the openhlo plugin: our results equal the unsharded ones, and our
collectives are XLA's final ones (the step's three all-reduces combined into one) moving as
many bytes per device; the same workloads written in PyTorch with mark_sharding under
torch.compile(openhlo) too."""
import importlib.util

import pytest

from pjrt.c_api.loader import library_path
from tools.bench import sharded

pytestmark = [
    pytest.mark.skipif(library_path() is None, reason="pjrt/c_api/_openhlo_pjrt*.so is not built"),
    pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="jax is not installed")]


def test_quick_sharded_bench():
    rows = {r["workload"]: r for r in sharded.measure(steps=2, quick=True)}
    assert set(rows) == {"megatron_mlp", "dp_train_step"}
    for row in rows.values():
        ours, xla = row["openhlo"], row["xla"]
        assert ours["results_ok"], ours["max_abs_err"]
        assert xla["results_ok"]
        assert ours["step_s"] > 0 and xla["step_s"] > 0
        assert {c["kind"] for c in ours["collectives"]} == {"all-reduce"}
        assert ours["bytes_per_device"] == xla["bytes_per_device"]
    # megatron: one all-reduce of the [batch, d] output, as XLA. dp: the loss and two
    # gradients, which XLA's final program combines into one; our combiners leave a gradient
    # apart where merging would take away the overlap the scheduler gives it (the `spmd`
    # pipeline's overlap-hardware, xla_core/spmd/combiner.py): the same bytes in at most the
    # three all-reduces the partitioner emits
    megatron, dp = rows["megatron_mlp"], rows["dp_train_step"]
    assert len(megatron["openhlo"]["collectives"]) == len(megatron["xla"]["collectives"]) == 1
    assert len(dp["xla"]["collectives"]) == 1
    assert 1 <= len(dp["openhlo"]["collectives"]) <= 3
    # the PyTorch side (mark_sharding under torch.compile): the same collectives and bytes
    for row in rows.values():
        pt = row["openhlo_torch"]
        assert pt["results_ok"], pt["max_abs_err"]
        assert pt["step_s"] > 0
        assert {c["kind"] for c in pt["collectives"]} == {"all-reduce"}
        assert pt["bytes_per_device"] == row["xla"]["bytes_per_device"]
    assert len(rows["megatron_mlp"]["openhlo_torch"]["collectives"]) == 1
    # the loss in the forward program, the combined gradients in the backward one
    assert len(rows["dp_train_step"]["openhlo_torch"]["collectives"]) == 2
    assert "megatron_mlp" in sharded.table(list(rows.values()))
