"""Hand-written modules with ``openhlo.fusion`` composites (fusion_contract.md), for the
generated-kernel tests. ``fusion_module(kind, params, results, body)`` wraps a body (ops on
%p0.., returning its results) as one fusion called by @main."""
from __future__ import annotations

from stablehlo.interpreter import evaluate

import stablehlo

import pjrt

import numpy as np


def fusion_module(kind: str, params: list[str], results: list[str], body: str,
                  name: str = "fused_0") -> str:
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(params))
    operands = ", ".join(f"%a{i}" for i in range(len(params)))
    ptypes, rtypes = ", ".join(params), ", ".join(results)
    rsig = rtypes if len(results) == 1 else f"({rtypes})"
    n = len(results)
    res = "%0" if n == 1 else f"%0:{n}"
    outs = ", ".join("%0" if n == 1 else f"%0#{i}" for i in range(n))
    pargs = ", ".join(f"%p{i}: {t}" for i, t in enumerate(params))
    return f"""
func.func @main({args}) -> {rsig} {{
  {res} = stablehlo.composite "openhlo.fusion" {operands} {{composite_attributes = {{kind = "{kind}"}}, decomposition = @{name}}} : ({ptypes}) -> {rsig}
  return {outs} : {rtypes}
}}
func.func private @{name}({pargs}) -> {rsig} {{
{body}
}}
"""


SOFTMAX = fusion_module("reduction", ["tensor<{N}x{D}x{T}>"], ["tensor<{N}x{D}x{T}>"], """
  %ninf = stablehlo.constant dense<{NINF}> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%p0 init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<{N}x{D}xf32>, tensor<f32>) -> tensor<{N}xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<{N}xf32>) -> tensor<{N}x{D}xf32>
  %s = stablehlo.subtract %p0, %mb : tensor<{N}x{D}xf32>
  %e = stablehlo.exponential %s : tensor<{N}x{D}xf32>
  %z = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{N}x{D}xf32>, tensor<f32>) -> tensor<{N}xf32>
  %zr = stablehlo.reshape %z : (tensor<{N}xf32>) -> tensor<{N}x1xf32>
  %zb = stablehlo.broadcast_in_dim %zr, dims = [0, 1] : (tensor<{N}x1xf32>) -> tensor<{N}x{D}xf32>
  %y = stablehlo.divide %e, %zb : tensor<{N}x{D}xf32>
  return %y : tensor<{N}x{D}xf32>""".replace("xf32>", "x{T}>").replace("tensor<f32>", "tensor<{T}>"))


NINF = {"f32": "0xFF800000", "f64": "0xFFF0000000000000"}


def fill(text: str, **subs) -> str:
    """Substitutes {NAME} placeholders (str.format would trip on the MLIR's braces)."""
    if "T" in subs:
        subs.setdefault("NINF", NINF.get(subs["T"], ""))
    for key, value in subs.items():
        text = text.replace("{" + key + "}", str(value))
    return text


LAYERNORM_GELU = fusion_module(
    "reduction", ["tensor<{N}x{D}x{T}>", "tensor<{D}x{T}>", "tensor<{D}x{T}>", "tensor<{N}x{D}x{T}>"],
    ["tensor<{N}x{D}x{T}>", "tensor<{N}x{T}>"], """
  %zero = stablehlo.constant dense<0.0> : tensor<{T}>
  %invd = stablehlo.constant dense<{INVD}> : tensor<{N}x{D}x{T}>
  %invn = stablehlo.constant dense<{INVD}> : tensor<{N}x{T}>
  %eps = stablehlo.constant dense<1.0e-5> : tensor<{N}x{D}x{T}>
  %half = stablehlo.constant dense<0.5> : tensor<{N}x{D}x{T}>
  %one = stablehlo.constant dense<1.0> : tensor<{N}x{D}x{T}>
  %rs2 = stablehlo.constant dense<0.70710678118654752> : tensor<{N}x{D}x{T}>
  %s = stablehlo.reduce(%p0 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{N}x{D}x{T}>, tensor<{T}>) -> tensor<{N}x{T}>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<{N}x{T}>) -> tensor<{N}x{D}x{T}>
  %mean = stablehlo.multiply %sb, %invd : tensor<{N}x{D}x{T}>
  %c = stablehlo.subtract %p0, %mean : tensor<{N}x{D}x{T}>
  %c2 = stablehlo.multiply %c, %c : tensor<{N}x{D}x{T}>
  %v = stablehlo.reduce(%c2 init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{N}x{D}x{T}>, tensor<{T}>) -> tensor<{N}x{T}>
  %vb = stablehlo.broadcast_in_dim %v, dims = [0] : (tensor<{N}x{T}>) -> tensor<{N}x{D}x{T}>
  %var = stablehlo.multiply %vb, %invd : tensor<{N}x{D}x{T}>
  %ve = stablehlo.add %var, %eps : tensor<{N}x{D}x{T}>
  %r = stablehlo.rsqrt %ve : tensor<{N}x{D}x{T}>
  %n = stablehlo.multiply %c, %r : tensor<{N}x{D}x{T}>
  %gb = stablehlo.broadcast_in_dim %p1, dims = [1] : (tensor<{D}x{T}>) -> tensor<{N}x{D}x{T}>
  %bb = stablehlo.broadcast_in_dim %p2, dims = [1] : (tensor<{D}x{T}>) -> tensor<{N}x{D}x{T}>
  %g = stablehlo.multiply %n, %gb : tensor<{N}x{D}x{T}>
  %h = stablehlo.add %g, %bb : tensor<{N}x{D}x{T}>
  %hs = stablehlo.multiply %h, %rs2 : tensor<{N}x{D}x{T}>
  %er = chlo.erf %hs : tensor<{N}x{D}x{T}> -> tensor<{N}x{D}x{T}>
  %e1 = stablehlo.add %er, %one : tensor<{N}x{D}x{T}>
  %hh = stablehlo.multiply %h, %half : tensor<{N}x{D}x{T}>
  %gelu = stablehlo.multiply %hh, %e1 : tensor<{N}x{D}x{T}>
  %y = stablehlo.add %gelu, %p3 : tensor<{N}x{D}x{T}>
  %mean_row = stablehlo.multiply %s, %invn : tensor<{N}x{T}>
  return %y, %mean_row : tensor<{N}x{D}x{T}>, tensor<{N}x{T}>""")

# Softmax cross-entropy forward (loss per row) and gradient, labels as one-hot.
XENT = fusion_module(
    "reduction", ["tensor<{N}x{D}xf32>", "tensor<{N}xi32>"], ["tensor<{N}xf32>", "tensor<{N}x{D}xf32>"], """
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %zeros = stablehlo.constant dense<0.0> : tensor<{N}x{D}xf32>
  %m = stablehlo.reduce(%p0 init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<{N}x{D}xf32>, tensor<f32>) -> tensor<{N}xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<{N}xf32>) -> tensor<{N}x{D}xf32>
  %s = stablehlo.subtract %p0, %mb : tensor<{N}x{D}xf32>
  %e = stablehlo.exponential %s : tensor<{N}x{D}xf32>
  %z = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{N}x{D}xf32>, tensor<f32>) -> tensor<{N}xf32>
  %lz = stablehlo.log %z : tensor<{N}xf32>
  %io = stablehlo.iota dim = 1 : tensor<{N}x{D}xi32>
  %lb = stablehlo.broadcast_in_dim %p1, dims = [0] : (tensor<{N}xi32>) -> tensor<{N}x{D}xi32>
  %hot = stablehlo.compare EQ, %io, %lb : (tensor<{N}x{D}xi32>, tensor<{N}x{D}xi32>) -> tensor<{N}x{D}xi1>
  %picked = stablehlo.select %hot, %s, %zeros : tensor<{N}x{D}xi1>, tensor<{N}x{D}xf32>
  %ps = stablehlo.reduce(%picked init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<{N}x{D}xf32>, tensor<f32>) -> tensor<{N}xf32>
  %loss = stablehlo.subtract %lz, %ps : tensor<{N}xf32>
  %zb = stablehlo.broadcast_in_dim %z, dims = [0] : (tensor<{N}xf32>) -> tensor<{N}x{D}xf32>
  %p = stablehlo.divide %e, %zb : tensor<{N}x{D}xf32>
  %oh = stablehlo.convert %hot : (tensor<{N}x{D}xi1>) -> tensor<{N}x{D}xf32>
  %g = stablehlo.subtract %p, %oh : tensor<{N}x{D}xf32>
  return %loss, %g : tensor<{N}xf32>, tensor<{N}x{D}xf32>""")

DOT_BIAS_GELU = fusion_module(
    "output", ["tensor<{M}x{K}x{T}>", "tensor<{K}x{N}x{T}>", "tensor<{N}x{T}>"], ["tensor<{M}x{N}x{T}>"], """
  %half = stablehlo.constant dense<0.5> : tensor<{M}x{N}x{T}>
  %one = stablehlo.constant dense<1.0> : tensor<{M}x{N}x{T}>
  %rs2 = stablehlo.constant dense<0.70710678118654752> : tensor<{M}x{N}x{T}>
  %d = stablehlo.dot_general %p0, %p1, contracting_dims = [1] x [0] : (tensor<{M}x{K}x{T}>, tensor<{K}x{N}x{T}>) -> tensor<{M}x{N}x{T}>
  %bb = stablehlo.broadcast_in_dim %p2, dims = [1] : (tensor<{N}x{T}>) -> tensor<{M}x{N}x{T}>
  %h = stablehlo.add %d, %bb : tensor<{M}x{N}x{T}>
  %hs = stablehlo.multiply %h, %rs2 : tensor<{M}x{N}x{T}>
  %er = chlo.erf %hs : tensor<{M}x{N}x{T}> -> tensor<{M}x{N}x{T}>
  %e1 = stablehlo.add %er, %one : tensor<{M}x{N}x{T}>
  %hh = stablehlo.multiply %h, %half : tensor<{M}x{N}x{T}>
  %y = stablehlo.multiply %hh, %e1 : tensor<{M}x{N}x{T}>
  return %y : tensor<{M}x{N}x{T}>""")


def check_against_interpreter(text, args, rtol=2e-6, atol=1e-6, generated=True):
    """Compiles ``text`` on the cpu backend, runs ``args``, compares with the interpreter;
    returns the CompiledProgram (``generated``: its fusions must all be generated kernels)."""
    exe = pjrt.make_client("cpu").compile(text)
    prog = exe.program
    if generated:
        assert prog.fusions_generated and not prog.fusions_inlined, prog.fusions_inlined
    got = exe(*args)
    want = evaluate(stablehlo.parse(text), args)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return prog
