"""Partitioned convolutions on virtual cpu devices, against the unsharded program on the
reference interpreter: batch and feature splits run locally, a split spatial dim with "same"
padding exchanges halos (collective_permute) with the neighbouring pieces, a kernel gradient
(window spanning the split dim) sums partial results, and halos wider than a piece fall back
to whole values."""
import numpy as np
import pytest

from pjrt.tests.spmd_support import random_args, reference, run_partitioned
from xla_core.spmd.summary import collectives


def conv_program(lhs, rhs, out, dnums, pad, lhs_sharding, rhs_sharding, out_sharding,
                 reverse=("false", "false")):
    def t(shape):
        return "tensor<" + "x".join(map(str, shape)) + "xf32>"
    return f"""sdy.mesh @mesh = <["x"=4]>
func.func public @main(%a: {t(lhs)} {{sdy.sharding = #sdy.sharding<@mesh, {lhs_sharding}>}},
                       %k: {t(rhs)} {{sdy.sharding = #sdy.sharding<@mesh, {rhs_sharding}>}})
    -> ({t(out)} {{sdy.sharding = #sdy.sharding<@mesh, {out_sharding}>}}) {{
  %0 = stablehlo.convolution(%a, %k) dim_numbers = {dnums}, window = {{stride = [1, 1],
      pad = {pad}, lhs_dilate = [1, 1], rhs_dilate = [1, 1], reverse = [{reverse[0]}, {reverse[1]}]}}
      {{batch_group_count = 1 : i64, feature_group_count = 1 : i64}} : ({t(lhs)}, {t(rhs)}) -> {t(out)}
  return %0 : {t(out)}
}}
"""


FORWARD = "[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]"
KERNEL_GRAD = "[f, 0, 1, b]x[i, 0, 1, o]->[0, 1, b, f]"


def _check(text):
    args = random_args(text)
    (got,), exe = run_partitioned(text, args, 4)
    (want,) = reference(text, args)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    return collectives(exe.executable.module)


def test_batch_split_runs_locally():
    text = conv_program((8, 6, 6, 2), (3, 3, 2, 3), (8, 6, 6, 3), FORWARD, "[[1, 1], [1, 1]]",
                        '[{"x"}, {}, {}, {}]', "[{}, {}, {}, {}]", '[{"x"}, {}, {}, {}]')
    assert _check(text) == []


def test_output_feature_split_runs_locally():
    text = conv_program((2, 6, 6, 2), (3, 3, 2, 8), (2, 6, 6, 8), FORWARD, "[[1, 1], [1, 1]]",
                        "[{}, {}, {}, {}]", '[{}, {}, {}, {"x"}]', '[{}, {}, {}, {"x"}]')
    assert _check(text) == []


def test_input_feature_split_sums_partials():
    text = conv_program((2, 6, 6, 8), (3, 3, 8, 3), (2, 6, 6, 3), FORWARD, "[[1, 1], [1, 1]]",
                        '[{}, {}, {}, {"x"}]', '[{}, {}, {"x"}, {}]', "[{}, {}, {}, {}]")
    assert [kind for kind, _, _ in _check(text)] == ["all-reduce"]


@pytest.mark.parametrize("pad", ["[[1, 1], [1, 1]]", "[[2, 0], [1, 1]]", "[[0, 2], [1, 1]]"])
def test_spatial_split_exchanges_halos(pad):
    text = conv_program((2, 8, 5, 2), (3, 3, 2, 3), (2, 8, 5, 3), FORWARD, pad,
                        '[{}, {"x"}, {}, {}]', "[{}, {}, {}, {}]", '[{}, {"x"}, {}, {}]')
    got = _check(text)
    lo, hi = (int(n) for n in pad[2:6].split(","))
    # one permute per non-empty halo, carrying lo (hi) rows of a [2, 2, 5, 2] piece
    assert got == [("collective-permute", (2, rows, 5, 2), 2 * rows * 5 * 2 * 4)
                   for rows in (lo, hi) if rows]


def test_kernel_gradient_sums_over_the_split_window():
    text = conv_program((2, 8, 5, 2), (2, 8, 5, 3), (3, 3, 2, 3), KERNEL_GRAD,
                        "[[1, 1], [1, 1]]", '[{}, {"x"}, {}, {}]', '[{}, {"x"}, {}, {}]',
                        "[{}, {}, {}, {}]")
    kinds = [kind for kind, _, _ in _check(text)]
    assert kinds == ["collective-permute", "collective-permute", "all-reduce"]


def test_reversed_window_is_not_summed_in_pieces():
    text = conv_program((2, 8, 5, 2), (2, 8, 5, 3), (3, 3, 2, 3), KERNEL_GRAD,
                        "[[1, 1], [1, 1]]", '[{}, {"x"}, {}, {}]', '[{}, {"x"}, {}, {}]',
                        "[{}, {}, {}, {}]", reverse=("true", "false"))
    assert "collective-permute" not in [kind for kind, _, _ in _check(text)]


def test_halo_wider_than_a_piece_computes_whole():
    # 4 pieces of 1 row, a window of 5 rows needs 2 rows from each side: gathered instead
    text = conv_program((2, 4, 5, 2), (5, 3, 2, 3), (2, 4, 5, 3), FORWARD, "[[2, 2], [1, 1]]",
                        '[{}, {"x"}, {}, {}]', "[{}, {}, {}, {}]", '[{}, {"x"}, {}, {}]')
    assert "collective-permute" not in [kind for kind, _, _ in _check(text)]
