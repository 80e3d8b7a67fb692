"""stablehlo.convolution on the cuda backend (codegen/convolution.py): each program compiled
ahead of time, its executable run on the CPU (host_emulation.py: kernels.cu by the host
compiler, GEMM steps by numpy) and compared with the reference interpreter; the backward
convolutions of a JAX training step against JAX's own gradients."""
import json

import numpy as np
import pytest

import stablehlo
from stablehlo.interpreter import evaluate
from pjrt.plugins.cuda import aot, nvcc
from pjrt.plugins.cuda.tests import host_emulation

NVCC = nvcc.find_tool("nvcc")
needs_toolkit = pytest.mark.skipif(NVCC is None or host_emulation.host_compiler() is None,
                                   reason="needs nvcc (CUDA toolkit) and g++")


def conv_program(lhs: str, rhs: str, out: str, *, n: int, c: int, o: int, spatial: list,
                 window: list, strides=None, padding=None, lhs_dilation=None,
                 rhs_dilation=None, reversal=None, groups: int = 1, batch_groups: int = 1,
                 elem: str = "f32", out_elem: str | None = None) -> str:
    """One convolution's program; ``lhs``/``rhs``/``out`` are layouts over b, f / i, o / b, f
    and the spatial dims' digits (``"b01f"`` is NHWC). The result's spatial sizes are the
    spec's."""
    s = len(spatial)
    strides, padding = strides or [1] * s, padding or [[0, 0]] * s
    lhs_dilation, rhs_dilation = lhs_dilation or [1] * s, rhs_dilation or [1] * s
    sizes = [((spatial[i] - 1) * lhs_dilation[i] + 1 + sum(padding[i])
              - (window[i] - 1) * rhs_dilation[i] - 1) // strides[i] + 1 for i in range(s)]

    def shape(layout, named, space):
        return [named[ch] if ch in named else space[int(ch)] for ch in layout]

    def tensor(dims, e):
        return "tensor<" + "x".join(map(str, dims)) + f"x{e}>"

    def array(values, kind="i64"):
        return f"array<{kind}: " + ", ".join(map(str, values)) + ">"

    x = tensor(shape(lhs, {"b": n, "f": c}, spatial), elem)
    w = tensor(shape(rhs, {"i": c // groups, "o": o}, window), elem)
    y = tensor(shape(out, {"b": n // batch_groups, "f": o}, sizes), out_elem or elem)
    pads = "dense<[" + ", ".join(f"[{a}, {b}]" for a, b in padding) + f"]> : tensor<{s}x2xi64>"
    rev = "" if reversal is None else \
        ", window_reversal = " + array(["true" if r else "false" for r in reversal], "i1")
    layouts = "x".join("[" + ", ".join(layout) + "]" for layout in (lhs, rhs)) + \
        "->[" + ", ".join(out) + "]"
    return f"""
module @m {{
  func.func public @main(%x: {x}, %w: {w}) -> {y} {{
    %y = "stablehlo.convolution"(%x, %w) <{{dimension_numbers = #stablehlo.conv<{layouts}>,
        window_strides = {array(strides)}, padding = {pads}, lhs_dilation = {array(lhs_dilation)},
        rhs_dilation = {array(rhs_dilation)}{rev}, feature_group_count = {groups} : i64,
        batch_group_count = {batch_groups} : i64}}> : ({x}, {w}) -> {y}
    return %y : {y}
  }}
}}
"""


# name -> (program arguments, the steps expected: im2col + gemm, or one direct launch)
CONFIGS = {
    "nchw_oihw_padded": (dict(lhs="bf01", rhs="oi01", out="bf01", n=2, c=3, o=4,
                              spatial=[6, 5], window=[3, 2], padding=[[1, 1], [0, 1]]),
                         ["launch", "gemm"]),
    "nhwc_hwio_strided_rhs_dilated": (dict(lhs="b01f", rhs="01io", out="b01f", n=2, c=3, o=5,
                                           spatial=[9, 7], window=[3, 3], strides=[2, 1],
                                           padding=[[1, 1], [1, 1]], rhs_dilation=[1, 2]),
                                      ["launch", "gemm"]),
    "nhwc_bf16": (dict(lhs="b01f", rhs="01io", out="b01f", n=2, c=8, o=4, spatial=[6, 6],
                       window=[3, 3], padding=[[1, 1], [1, 1]], elem="bf16"),
                  ["launch", "gemm"]),
    "nchw_f16_lhs_dilated": (dict(lhs="bf01", rhs="oi01", out="bf01", n=1, c=4, o=3,
                                  spatial=[4, 5], window=[3, 3], lhs_dilation=[2, 2],
                                  padding=[[2, 2], [1, 2]], elem="f16"),
                             ["launch", "gemm"]),
    "conv1d_negative_padding_reversed": (dict(lhs="bf0", rhs="oi0", out="bf0", n=3, c=2, o=4,
                                              spatial=[11], window=[4], strides=[3],
                                              padding=[[-1, 2]], reversal=[True]),
                                         ["launch", "gemm"]),
    "input_feature_major_reversed": (dict(lhs="f01b", rhs="i01o", out="01bf", n=3, c=2, o=4,
                                    spatial=[5, 5], window=[2, 2], reversal=[True, False]),
                               ["launch", "gemm"]),
    "kernel_repacked_feature_first_out": (dict(lhs="bf01", rhs="0io1", out="fb01", n=2, c=3,
                                               o=4, spatial=[5, 6], window=[2, 3],
                                               elem="bf16"),
                                          ["launch", "launch", "gemm"]),
    "pointwise_nhwc": (dict(lhs="b01f", rhs="01io", out="b01f", n=2, c=6, o=5, spatial=[4, 3],
                            window=[1, 1]), ["gemm"]),
    "pointwise_nchw_kernel_repacked": (dict(lhs="bf01", rhs="0io1", out="bf01", n=3, c=4, o=5,
                                            spatial=[3, 5], window=[1, 1], elem="bf16"),
                                       ["launch", "gemm"]),
    "pointwise_strided_is_im2col": (dict(lhs="bf0", rhs="oi0", out="bf0", n=2, c=3, o=2,
                                         spatial=[7], window=[1], strides=[2]),
                                    ["launch", "gemm"]),
    "conv3d": (dict(lhs="b012f", rhs="012io", out="b012f", n=1, c=2, o=3, spatial=[4, 5, 3],
                    window=[2, 3, 2], padding=[[0, 1], [1, 1], [1, 0]]), ["launch", "gemm"]),
    "depthwise_nhwc": (dict(lhs="b01f", rhs="01io", out="b01f", n=2, c=4, o=8, spatial=[6, 6],
                            window=[3, 3], padding=[[1, 1], [1, 1]], groups=4), ["launch"]),
    "grouped_1d_lhs_dilated": (dict(lhs="bf0", rhs="oi0", out="bf0", n=2, c=4, o=6,
                                    spatial=[9], window=[3], groups=2, lhs_dilation=[2],
                                    padding=[[2, -1]]), ["launch"]),
    "grouped_bf16": (dict(lhs="bf01", rhs="oi01", out="bf01", n=2, c=6, o=6, spatial=[5, 5],
                          window=[3, 3], groups=3, strides=[2, 2], elem="bf16"), ["launch"]),
    "batch_groups": (dict(lhs="bf01", rhs="io01", out="fb01", n=4, c=2, o=6, spatial=[5, 5],
                          window=[2, 2], batch_groups=2), ["launch"]),
    "bf16_to_f32": (dict(lhs="b01f", rhs="01io", out="b01f", n=2, c=3, o=4, spatial=[5, 5],
                         window=[3, 3], elem="bf16", out_elem="f32"), ["launch"]),
}


def _inputs(module, rng) -> list:
    return [rng.standard_normal(tuple(t.shape)).astype(
        host_emulation.dtype_of(str(t.element_type))) for t in module.lookup("main").type.inputs]


def _check(text: str, out_dir, tmp_path, seed: int = 0) -> dict:
    """Compile ``text``, run it host-emulated and compare with the interpreter; the
    executable description back."""
    args = _inputs(stablehlo.parse(text), np.random.default_rng(seed))
    expected = evaluate(stablehlo.parse(text), args)
    out = aot.compile_module(stablehlo.parse(text), out_dir=out_dir)
    got = host_emulation.HostExecutable(out, NVCC, tmp_path)(args)
    for g, e in zip(got, expected, strict=True):
        e = np.asarray(e)
        assert g.shape == e.shape and g.dtype == e.dtype
        # narrow results: the GEMM (float64 here, f32 on cuBLAS) and the interpreter (f32)
        # each round once, so they may differ by an ulp of the narrow type
        tol = 1e-5 if g.dtype == np.float32 else 1e-2
        scale = max(1.0, float(np.max(np.abs(e.astype(np.float64)))))
        np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64),
                                   rtol=tol, atol=tol * scale)
    ptxas = json.loads((out / "ptxas.json").read_text())
    assert not aot.spills(ptxas)
    return json.loads((out / "executable.json").read_text())


@needs_toolkit
@pytest.mark.parametrize("name", list(CONFIGS))
def test_convolution_matches_the_interpreter(name, tmp_path):
    config, steps = CONFIGS[name]
    exe = _check(conv_program(**config), tmp_path / name, tmp_path)
    assert [s["op"] for s in exe["steps"]] == steps
    if steps[0] == "launch" and "gemm" in steps:  # im2col (or the kernel's repacking) into
        scratch = exe["steps"][0]["args"][1]      # a buffer of its own, not the result's
        scratch = scratch if isinstance(scratch, int) else scratch["id"]
        assert scratch not in exe["results"]
        assert scratch not in [b["id"] for b in exe["buffers"] if b["kind"] != "temp"]


def test_integer_convolution_is_refused_with_its_place():
    text = conv_program("bf01", "oi01", "bf01", n=1, c=2, o=2, spatial=[4, 4], window=[2, 2],
                        elem="i32")
    ok, why = aot.claims(stablehlo.parse(text))
    assert not ok
    assert "'stablehlo.convolution': the cuda backend cannot run this op" in why
    assert "floating-point element types only" in why and ":4:" in why


@needs_toolkit
@pytest.mark.parametrize("layouts, window_strides, padding, groups", [
    (("NCHW", "OIHW", "NCHW"), (2, 2), ((1, 1), (1, 1)), 1),
    (("NHWC", "HWIO", "NHWC"), (2, 1), "SAME", 1),
    (("NHWC", "HWIO", "NHWC"), (1, 1), "SAME", 4),
])
def test_training_step_gradients_match_jax(layouts, window_strides, padding, groups,
                                           tmp_path):
    """The forward convolution and the two backward ones JAX emits for it (wrt the input:
    lhs-dilated by the strides, the kernel reversed; wrt the weights: the batch as the
    contracted dim, rhs-dilated by the strides; grouped: batch_group_count) against JAX's
    gradients on the CPU."""
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x_shape = {"NCHW": (2, 4, 9, 9), "NHWC": (2, 9, 8, 4)}[layouts[0]]
    w_shape = {"OIHW": (6, 4 // groups, 3, 3), "HWIO": (3, 3, 4 // groups, 8)}[layouts[1]]

    def loss(x, w):
        y = jax.lax.conv_general_dilated(x, w, window_strides, padding,
                                         dimension_numbers=layouts,
                                         feature_group_count=groups)
        return jnp.sum(jnp.tanh(y))

    step = jax.jit(jax.grad(loss, argnums=(0, 1)))
    rng = np.random.default_rng(0)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    # On JAX's CPU device even where a GPU is there: JAX's GPU convolutions default to TF32
    # (5% off here, on the H200), no reference for float32 arithmetic.
    with jax.default_device(jax.devices("cpu")[0]):
        text = step.lower(x, w).as_text()
        expected = jax.device_get(step(x, w))
    assert text.count("stablehlo.convolution") == 3
    out = aot.compile_module(stablehlo.parse(text), out_dir=tmp_path / "step")
    got = host_emulation.HostExecutable(out, NVCC, tmp_path)([x, w])
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-4)
