"""Test helper: run one op through its native kernel and through the reference interpreter.

``check_op(text, inputs)`` parses a module whose ``@main`` holds one op (plus the return),
runs that op with ``_native.run_kernel`` exactly as the lowering would build it, runs the
whole function on the interpreter, and asserts that the results agree (bit-exact for
integers and bools, ``rtol``/``atol`` for floats, NaNs in the same places).
"""
from __future__ import annotations

import numpy as np

import stablehlo
from stablehlo.interpreter import evaluate


def tensor_spec(type) -> tuple:
    return (str(type.element_type), list(type.shape))


def single_op(module):
    ops = [op for op in module.lookup("main").body.operations if op.name != "func.return"]
    assert len(ops) == 1, f"expected one op in @main, got {[op.name for op in ops]}"
    return ops[0]


def run_native(op, inputs):
    from pjrt.plugins.cpu.attrs import plain_attrs, region_attrs
    from pjrt.plugins.cpu.native_module import native
    attrs = {**plain_attrs(op), **region_attrs(op)}
    return native().run_kernel(op.name, attrs, [tensor_spec(v.type) for v in op.operands],
                               [tensor_spec(r.type) for r in op.results], list(inputs))


def check_op(text: str, inputs, rtol: float = 1e-6, atol: float = 0.0):
    """Assert native == interpreter for the one op of ``text``; returns the native results."""
    module = stablehlo.parse(text)
    op = single_op(module)
    inputs = [np.asarray(x) for x in inputs]
    got = run_native(op, inputs)
    want = evaluate(module, inputs)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"result {i}: dtype {g.dtype} != {w.dtype}"
        assert g.shape == w.shape, f"result {i}: shape {g.shape} != {w.shape}"
        if w.dtype.kind in "fc" or w.dtype.name == "bfloat16":
            if w.dtype.itemsize == 2:  # assert_allclose misses NaNs of 16-bit floats
                g, w = g.astype(np.float32), w.astype(np.float32)
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, equal_nan=True,
                                       err_msg=f"result {i} of {op.name}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"result {i} of {op.name}")
    return got
