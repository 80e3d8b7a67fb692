"""Output fusions of general dot_generals (several free dims, batch dims, transposed operands)
against the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.plugins.cpu.codegen import build
from pjrt.plugins.cpu.tests.fusion_cases import fusion_module
from stablehlo.interpreter import evaluate

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C++ compiler")
_NP = {"f32": np.float32, "f64": np.float64}


def _t(shape, T) -> str:
    return "tensor<" + "x".join(str(d) for d in shape) + f"x{T}>"


def _dot_module(lshape, rshape, dims: str, out, T, epilogue=True):
    """A fusion of ``dot_general`` (dims: its dimension text) scaled by 0.5 and added to a
    bias broadcast along the last result dim, then tanh; results: the epilogue value and the
    raw dot."""
    o = _t(out, T)
    body = f"""
  %d = stablehlo.dot_general %p0, %p1, {dims} : ({_t(lshape, T)}, {_t(rshape, T)}) -> {o}
  %h = stablehlo.constant dense<0.5> : {o}
  %s = stablehlo.multiply %d, %h : {o}
  %bb = stablehlo.broadcast_in_dim %p2, dims = [{len(out) - 1}] : ({_t(out[-1:], T)}) -> {o}
  %a = stablehlo.add %s, %bb : {o}
  %y = stablehlo.tanh %a : {o}
  return %y, %d : {o}, {o}"""
    return fusion_module("output", [_t(lshape, T), _t(rshape, T), _t(out[-1:], T)], [o, o], body)


def _run(text, shapes, T, generated=True):
    rng = np.random.default_rng(0)
    args = [(rng.standard_normal(s) * 0.3).astype(_NP[T]) for s in shapes]
    exe = pjrt.make_client("cpu").compile(text)
    prog = exe.program
    if generated:
        assert prog.fusions_generated and not prog.fusions_inlined, prog.fusions_inlined
    else:
        assert prog.fusions_inlined and not prog.fusions_generated
    got = exe(*args)
    want = evaluate(stablehlo.parse(text), args)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return prog


CASES = [
    # lhs with two free dims ([2,5] rows), as in a transformer's projections.
    ([2, 5, 7], [7, 9], "contracting_dims = [2] x [0]", [2, 5, 9]),
    # rhs transposed (contracting its last dim), lhs with leading free dims.
    ([3, 4, 7], [9, 7], "contracting_dims = [2] x [1]", [3, 4, 9]),
    # both transposed: lhs [K,M], rhs [N,K].
    ([7, 5], [9, 7], "contracting_dims = [0] x [1]", [5, 9]),
    # rhs with two free dims (N = 3*4, contiguous).
    ([5, 7], [7, 3, 4], "contracting_dims = [1] x [0]", [5, 3, 4]),
    # attention scores: [B,S,H,D] x [B,S,H,D], batch (B,H), contracting D.
    ([2, 6, 3, 4], [2, 6, 3, 4],
     "batching_dims = [0, 2] x [0, 2], contracting_dims = [3] x [3]", [2, 3, 6, 6]),
    # attention values: [B,H,S,S] x [B,S,H,D], batch (B,H), contracting S.
    ([2, 3, 6, 6], [2, 6, 3, 4],
     "batching_dims = [0, 1] x [0, 2], contracting_dims = [3] x [1]", [2, 3, 6, 4]),
    # batch first, lhs transposed ([B,K,M]); two contracting dims collapsed.
    ([2, 3, 5, 4], [2, 3, 5, 6],
     "batching_dims = [0] x [0], contracting_dims = [1, 2] x [1, 2]", [2, 4, 6]),
    # several tiles in both directions, per batch element.
    ([2, 300, 16], [2, 16, 600],
     "batching_dims = [0] x [0], contracting_dims = [2] x [1]", [2, 300, 600]),
    # size-1 dims everywhere.
    ([1, 1, 3], [3, 1], "contracting_dims = [2] x [0]", [1, 1, 1]),
    # a small ViT's qkv projection: one tile's rows, columns cut for threads (the last tile
    # narrower than the others).
    ([2, 17, 192], [576, 192], "contracting_dims = [2] x [1]", [2, 17, 576]),
]


@pytest.mark.parametrize("T", ["f32", "f64"])
@pytest.mark.parametrize("lshape,rshape,dims,out", CASES)
def test_general_dot_epilogue(T, lshape, rshape, dims, out):
    text = _dot_module(lshape, rshape, dims, out, T)
    _run(text, [lshape, rshape, out[-1:]], T)


@pytest.mark.parametrize("batches,m,n,k,tile", [
    (1, 34, 192, 192, (34, 96)),     # whole width would leave a 2-thread pool half idle
    (1, 34, 576, 192, (34, 144)),    # 512-column tiles would split it 512 : 64
    (1, 34, 768, 192, (34, 96)),     # tiles of task_macs at least
    (1, 34, 768, 768, (34, 48)),     # at most max_tiles tiles
    (1, 4, 8, 8, (4, 8)),            # too little work to cut
    (16, 34, 192, 192, (34, 192)),   # the batch gives the tasks already
    (1, 600, 40, 512, (50, 40)),     # columns too few to cut: rows are cut
])
def test_output_tiles_give_the_pool_tasks(batches, m, n, k, tile):
    from pjrt.plugins.cpu.codegen.target import CPU_TARGET
    from xla_core.codegen.output import _tile_shape
    assert _tile_shape(CPU_TARGET, batches, m, n, k, "f32") == tile


def test_free_dims_not_one_strided_run_fall_back():
    # lhs free dims 0 and 2 are not adjacent (contracting dim 1 sits between): no GEMM view.
    text = _dot_module([4, 7, 5], [7, 9], "contracting_dims = [1] x [0]", [4, 5, 9], "f32")
    prog = _run(text, [[4, 7, 5], [7, 9], [9]], "f32", generated=False)
    assert "strided run" in prog.fusions_inlined[0][1]


def test_chlo_square_in_a_loop_fusion():
    body = """
  %s = chlo.square %p0 : tensor<4x33xf32> -> tensor<4x33xf32>
  return %s : tensor<4x33xf32>"""
    text = fusion_module("loop", ["tensor<4x33xf32>"], ["tensor<4x33xf32>"], body)
    _run(text, [[4, 33]], "f32")
