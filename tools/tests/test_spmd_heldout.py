"""``tools.spmd_heldout``: held-out sharded programs lowered by JAX on 8 host devices, run by our
cpu client on 8 virtual devices: results equal JAX's unsharded ones, and our collectives are no
more (in count and bytes) than XLA's partitioner emitted, of the same kinds (exactly XLA's, in
kind and bytes, for the programs whose partitioning XLA settles without choices). A slice also
runs on 2 processes x 4 devices (``--num-processes 2``) with the same results. Programs named
``*_gspmd`` are lowered with Shardy off (GSPMD spellings)."""
from __future__ import annotations

import importlib.util

import pytest

from tools import spmd_heldout

pytestmark = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                                reason="jax is not installed (it lowers the held-out programs)")

NAMES = ("mlp_2d", "conv_batch", "conv_spatial_step", "reduce_scatter", "fsdp",
         "partial_manual", "pad_split", "fused_qkv", "argmax_split")
# Programs whose collectives equal XLA's exactly. XLA emits none for scan_carry (a batch-split
# carry), scan_seq (a scan over batch-split sequences), branch, embed_batch (batch-split ids),
# embed_hidden (a table split along the hidden dim), embed_vocab_grad, some_in (an
# unannotated, replicated weight) and conv_channels (split output channels); one all-reduce
# per step inside the loop for train_loop and inside the reverse scan of scan_grad, one of the
# scalar the condition of while_norm reads, one of the whole table for embed_grad
# (batch-split updates), one of the looked-up rows for embed_vocab (a table split along the
# vocabulary: masked local lookups), one after the output projection of Megatron attention,
# two for a layer norm over a split hidden dim and for a vocabulary-parallel cross-entropy,
# and two for the 2-D-mesh training step dp_tp_step, four for a transformer block's step;
# one all-gather after the loop for scan_gathered (scan_carry with a replicated result: the
# loop still runs on pieces), one before a cumsum along a split dim; none for split_rows (halves
# of a dim that is not split: local slices); two collective-permutes and an all-gather for
# slice_split (a slice of a split dim: each device fetches its part). argmax_split (NAMES) has
# XLA's two all-gathers of the partial (value, index) pairs, which all-gather-combiner merges
# into one of the same bytes (XLA's cpu pipeline leaves them apart). Lowered with Shardy off
# (GSPMD's strings: partial replication over 2-D tiles, transposed iotas,
# @SPMDFullToShardShape regions with manual subgroups): the 2-D-mesh MLP and training step, a
# 3-D-mesh contraction (and its Shardy twin), and partially manual shard_maps whose result is
# whole (an all-gather in, an all-reduce inside) or split over the manual axis (one all-gather
# in).
EXACT = ("mlp_2d_gspmd", "dp_tp_step_gspmd", "mesh3d", "mesh3d_gspmd", "partial_manual_gspmd",
         "partial_manual_out_gspmd",
         "scan_carry", "scan_gathered", "scan_seq", "scan_grad", "train_loop", "while_norm",
         "branch", "embed_batch", "embed_hidden", "embed_grad", "embed_vocab", "embed_vocab_grad",
         "some_in", "attention", "dp_tp_step", "layernorm", "conv_channels", "vocab_xent",
         "block_step", "cumsum_split", "split_rows", "slice_split")


@pytest.fixture(scope="module")
def lowered(tmp_path_factory):
    folder = tmp_path_factory.mktemp("heldout")
    spmd_heldout.lower_with_jax(folder, NAMES + EXACT)
    return folder


@pytest.mark.parametrize("name", NAMES)
def test_heldout_program(lowered, name):
    row = spmd_heldout.check(lowered / name)
    assert "error" not in row, row.get("error")
    assert row["numerics_ok"], row["max_abs_err"]
    theirs, ours = row["xla"], row["ours"]
    assert theirs, "XLA emitted no collectives: the program does not test partitioning"
    assert len(ours) <= len(theirs)
    assert row["ours_uncombined"] <= row["xla_uncombined"]
    assert sum(c["bytes"] for c in ours) <= sum(c["bytes"] for c in theirs)
    assert row["kinds_ok"], ([c["kind"] for c in ours], [c["kind"] for c in theirs])


@pytest.mark.parametrize("name", EXACT)
def test_heldout_program_collectives_equal_xla(lowered, name):
    row = spmd_heldout.check(lowered / name)
    assert "error" not in row, row.get("error")
    assert row["numerics_ok"], row["max_abs_err"]
    assert sorted((c["kind"], c["bytes"]) for c in row["ours"]) == \
        sorted((c["kind"], c["bytes"]) for c in row["xla"])


def test_reduce_scatter_output_is_all_reduced_then_sliced_as_xla_does(lowered):
    """The result split on a dim the dot contracted: XLA's CPU pipeline all-reduces the
    partial sums (16x32 f32 per device) and each device keeps its part; so do we."""
    row = spmd_heldout.check(lowered / "reduce_scatter")
    assert [(c["kind"], c["bytes"]) for c in row["ours"]] == [("all-reduce", 16 * 32 * 4)]


def test_conv_batch_matches_xla_exactly(lowered):
    """Batch-sharded convolution step: partial kernel and bias gradients all-reduced in one
    combined all-reduce, as XLA does."""
    row = spmd_heldout.check(lowered / "conv_batch")
    assert sorted((c["kind"], c["bytes"]) for c in row["ours"]) == \
        sorted((c["kind"], c["bytes"]) for c in row["xla"])


# Collectives across the processes: all-gathers, all-to-alls and an all-reduce (fsdp), the
# all-reduces of a 2-D mesh's step (dp_tp_step), collective-permutes (slice_split).
ACROSS_PROCESSES = ("fsdp", "dp_tp_step", "slice_split")


@pytest.fixture(scope="module")
def ran_across_processes(lowered):
    from pjrt.plugins.cpu.native_module import native
    if not native().HAVE_GLOO:
        pytest.skip("built without gloo")
    spmd_heldout.run_across_processes([lowered / n for n in ACROSS_PROCESSES], 2)
    return lowered


@pytest.mark.parametrize("name", ACROSS_PROCESSES)
def test_heldout_program_across_two_processes(ran_across_processes, name):
    row = spmd_heldout.check(ran_across_processes / name, across_processes=True)
    assert "error" not in row, row.get("error")
    assert row["numerics_ok"], row["max_abs_err"]
    assert row["ok"], row


def test_parse_collectives_counts_tuple_bytes():
    from tools.spmd_heldout_jax import parse_collectives
    text = ("  %a = (f32[], f32[128,32]{1,0}) all-reduce(%x, %y), channel_id=1\n"
            "  %b = bf16[4,8]{1,0} all-gather(%z), dimensions={0}\n"
            "  %c = f32[2]{0} add(%p, %q)\n")
    got = parse_collectives(text)
    assert [(c["kind"], c["bytes"]) for c in got] == [("all-reduce", 4 + 128 * 32 * 4),
                                                       ("all-gather", 64)]
