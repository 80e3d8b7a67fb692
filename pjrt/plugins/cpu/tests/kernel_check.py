"""Test helper: run one op through its native kernel and through the reference interpreter.

``check_op(text, inputs)`` parses a module whose ``@main`` holds one op (plus the return),
runs that op with ``_native.run_kernel`` exactly as the lowering would build it, runs the
whole function on the interpreter, and asserts that the results agree (bit-exact for
integers and bools, ``rtol``/``atol`` for floats, NaNs in the same places). The other
helpers write one-op modules (``one_op``, ``ttype``, ``i64s``) and random inputs of any
element type (``rand``) for the kernel test files.
"""
from __future__ import annotations

import numpy as np

import stablehlo
from stablehlo.interpreter import evaluate
from stablehlo.ir.types import numpy_dtype, parse_element_type_name


def tensor_spec(type) -> tuple:
    return (str(type.element_type), list(type.shape))


def single_op(module):
    ops = [op for op in module.lookup("main").body.operations if op.name != "func.return"]
    assert len(ops) == 1, f"expected one op in @main, got {[op.name for op in ops]}"
    return ops[0]


def run_kernel(name: str, attrs: dict, operand_types, result_types, inputs):
    """Native kernel ``name`` run once, its plain attributes encoded as the lowering does."""
    from pjrt.plugins.cpu.kernel_attrs import encode
    from pjrt.plugins.cpu.native_module import native
    return native().run_kernel(name, encode(name, "test", attrs), operand_types, result_types,
                               list(inputs))


def run_native(op, inputs):
    from pjrt.plugins.cpu.attrs import plain_attrs, region_attrs
    return run_kernel(op.name, {**plain_attrs(op), **region_attrs(op)},
                      [tensor_spec(v.type) for v in op.operands],
                      [tensor_spec(r.type) for r in op.results], inputs)


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


# Pure data movement works on every element type; these cover each byte width and kind.
DTYPES = ["f32", "i32", "i1", "bf16", "ui8", "f64", "complex<f32>", "i16", "complex<f64>"]
RNG = np.random.default_rng(0)


def ttype(shape, dtype: str) -> str:
    dims = "".join(f"{d}x" for d in shape)
    return f"tensor<{dims}{dtype}>"


def i64s(values) -> str:
    return "array<i64" + (": " + ", ".join(str(v) for v in values) if len(values) else "") + ">"


def one_op(op: str, operand_types, result_types, attrs: str = "", region: str = "") -> str:
    """A module whose @main applies the generic-form ``op`` to its arguments."""
    args = ", ".join(f"%a{i}: {t}" for i, t in enumerate(operand_types))
    names = ", ".join(f"%a{i}" for i in range(len(operand_types)))
    results = list(result_types)
    outs = ", ".join(f"%0#{i}" for i in range(len(results))) if len(results) > 1 else "%0"
    multi = f":{len(results)}" if len(results) > 1 else ""
    attr_text = f" {{{attrs}}}" if attrs else ""
    region_text = f"({{\n{region}\n  }})" if region else ""
    signature = f"({', '.join(operand_types)}) -> ({', '.join(results)})"
    return (f"func.func @main({args}) -> ({', '.join(results)}) {{\n"
            f"  %0{multi} = \"{op}\"({names}){region_text}{attr_text} : {signature}\n"
            f"  return {outs} : {', '.join(results)}\n}}")


def rand(shape, dtype: str, rng=RNG) -> np.ndarray:
    """Random values of a StableHLO element type (small integers, normal floats)."""
    np_dtype = numpy_dtype(parse_element_type_name(dtype))
    shape = tuple(shape)
    if dtype == "i1":
        return rng.integers(0, 2, shape).astype(np.bool_)
    if np.issubdtype(np_dtype, np.integer):
        info = np.iinfo(np_dtype)
        return rng.integers(max(int(info.min), -100), min(int(info.max), 100), shape,
                            endpoint=True).astype(np_dtype)
    if np.issubdtype(np_dtype, np.complexfloating):
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(np_dtype)
    return rng.standard_normal(shape).astype(np_dtype)
