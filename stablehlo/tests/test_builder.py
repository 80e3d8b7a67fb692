"""Tests of stablehlo/builder.py.

Result shapes inferred by the builder are compared with JAX's own shape
inference (``jax.eval_shape`` of the matching ``lax`` call) as an independent
reference; built modules must pass our verifier and, once printed, parse and
verify in upstream MLIR (jaxlib).
"""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.builder import Builder
from stablehlo.errors import VerificationError
from stablehlo.ir.types import BF16, F32, I1, I32, UI64, TensorType, tensor
from stablehlo.verify import verify_module

jax = pytest.importorskip("jax")
lax = jax.lax


def _shape_of(fn, *args) -> tuple:
    """JAX's result shape of ``fn`` on zero arrays shaped like ``args``."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    out = jax.eval_shape(fn, *specs)
    return tuple(out.shape)


def _zeros(*shape, dtype=np.float32):
    return np.zeros(shape, dtype)


def _printed(module) -> str:
    try:
        return str(module)
    except ImportError as exc:  # the printer is developed alongside
        pytest.skip(f"printer unavailable: {exc}")


def _check_in_mlir(module):
    pytest.importorskip("jaxlib")
    from stablehlo.tests.mlir_oracle import mlir_verify
    text = _printed(module)
    error = mlir_verify(text)
    assert error is None, f"{error}\n{text}"


def test_readme_example_infers_types_and_verifies():
    b = Builder()
    with b.function("main", [tensor((3, 4), F32), tensor((4,), F32)]) as (f, (x, y)):
        yb = b.broadcast_in_dim(y, (3, 4), dims=[1])
        z = b.add(x, yb)
        s = b.reduce(z, b.constant(np.float32(0)), dims=[1], body="stablehlo.add")
        b.return_(s)
    assert z.type == tensor((3, 4), F32)
    assert s.type == tensor((3,), F32)
    assert str(f.type) == "(tensor<3x4xf32>, tensor<4xf32>) -> tensor<3xf32>"
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_bad_op_fails_at_the_calling_line():
    b = Builder()
    with pytest.raises(VerificationError) as info:
        with b.function("main", [tensor((3,), F32), tensor((2,), F32)]) as (_, (x, y)):
            b.add(x, y)  # the line the message must name
    message = str(info.value)
    assert __file__ in message
    assert "'stablehlo.add': operand #1 has type tensor<2xf32>" in message


@pytest.mark.parametrize("strides,padding,lhs_dil,rhs_dil,groups", [
    ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1),
    ((2, 2), ((1, 1), (0, 0)), (1, 1), (2, 1), 2),
    ((1, 3), ((2, 0), (1, 2)), (2, 1), (1, 2), 1),
])
def test_convolution_shape_matches_jax(strides, padding, lhs_dil, rhs_dil, groups):
    lhs, rhs = _zeros(2, 4, 9, 10), _zeros(6, 4 // groups, 3, 2)
    expected = _shape_of(lambda a, w: lax.conv_general_dilated(
        a, w, strides, padding, lhs_dil, rhs_dil, feature_group_count=groups), lhs, rhs)
    b = Builder()
    with b.function("main", [tensor(lhs.shape, F32), tensor(rhs.shape, F32)]) as (_, (a, w)):
        out = b.convolution(a, w, window_strides=strides, padding=padding,
                            lhs_dilation=lhs_dil, rhs_dilation=rhs_dil,
                            feature_group_count=groups)
        b.return_(out)
    assert out.type.shape == expected
    verify_module(b.module)


@pytest.mark.parametrize("window,strides,padding,base,dil", [
    ((2, 2), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1)),
    ((3, 1), (2, 1), ((1, 0), (0, 1)), (1, 2), (2, 1)),
])
def test_reduce_window_shape_matches_jax(window, strides, padding, base, dil):
    x = _zeros(7, 5)
    expected = _shape_of(lambda a: lax.reduce_window(
        a, 0.0, lax.add, window, strides, padding, base, dil), x)
    b = Builder()
    with b.function("main", [tensor(x.shape, F32)]) as (_, (a,)):
        out = b.reduce_window(a, b.constant(np.float32(0)), window, "add",
                              window_strides=strides, padding=padding, base_dilations=base,
                              window_dilations=dil)
        b.return_(out)
    assert out.type.shape == expected
    verify_module(b.module)


def test_dot_general_shape_matches_jax():
    lhs, rhs = _zeros(2, 3, 4, 7), _zeros(2, 7, 4, 5)
    dims = (((2, 3), (2, 1)), ((0,), (0,)))
    expected = _shape_of(lambda a, c: lax.dot_general(a, c, dims), lhs, rhs)
    b = Builder()
    with b.function("main", [tensor(lhs.shape, F32), tensor(rhs.shape, F32)]) as (_, (a, c)):
        out = b.dot_general(a, c, contracting=dims[0], batching=dims[1],
                            result_element_type=BF16)
        b.return_(out)
    assert out.type == TensorType(expected, BF16)
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_gather_and_scatter_shapes_match_jax():
    operand, indices = _zeros(5, 6, 7), np.zeros((4, 2), np.int32)
    gdn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(0,),
                                     start_index_map=(0, 2))
    expected = _shape_of(lambda o, i: lax.gather(o, i, gdn, (1, 3, 2)), operand, indices)
    b = Builder()
    with b.function("main", [tensor(operand.shape, F32), tensor(indices.shape, I32)]) \
            as (_, (o, i)):
        g = b.gather(o, i, offset_dims=[1, 2], collapsed_slice_dims=[0], start_index_map=[0, 2],
                     index_vector_dim=1, slice_sizes=[1, 3, 2])
        s = b.scatter(o, i, g, update_window_dims=[1, 2], inserted_window_dims=[0],
                      scatter_dims_to_operand_dims=[0, 2], index_vector_dim=1, body="add")
        b.return_(s)
    assert g.type.shape == expected
    assert s.type == tensor(operand.shape, F32)
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_data_movement_shapes_match_numpy():
    x = np.zeros((2, 3, 4), np.float32)
    b = Builder()
    with b.function("main", [tensor(x.shape, F32)]) as (_, (a,)):
        zero = b.constant(np.float32(0))
        i0 = b.constant(np.int32(0))
        cases = {
            "transpose": (b.transpose(a, [2, 0, 1]), np.transpose(x, (2, 0, 1)).shape),
            "slice": (b.slice(a, [0, 1, 0], [2, 3, 4], [1, 1, 3]), x[0:2, 1:3, 0:4:3].shape),
            "concatenate": (b.concatenate([a, a], 2), np.concatenate([x, x], 2).shape),
            "reshape": (b.reshape(a, (6, 4)), x.reshape(6, 4).shape),
            "dynamic_slice": (b.dynamic_slice(a, [i0, i0, i0], [1, 2, 3]), (1, 2, 3)),
            "pad": (b.pad(a, zero, [1, 0, 2], [0, 3, 0], [0, 1, 1]),
                    (2 + 1, 3 + 3 + 2, 4 + 2 + 3)),
        }
        b.return_(cases["pad"][0])
    for name, (value, shape) in cases.items():
        assert value.type.shape == tuple(shape), name
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_control_flow_and_calls():
    b = Builder()
    with b.function("square", [tensor((), F32)]) as (_, (v,)):
        b.return_(b.multiply(v, v))
    with b.function("main", [tensor((), F32)]) as (f, (x,)):
        i0 = b.constant(np.int32(0))
        count, value = b.while_(
            [i0, x],
            lambda i, v: b.compare(i, b.constant(np.int32(3)), "LT"),
            lambda i, v: [b.add(i, b.constant(np.int32(1))), b.call("square", [v])])
        pred = b.compare(value, x, "GT")
        chosen = b.if_(pred, lambda: value, lambda: b.negate(value))
        picked = b.case(count, [lambda: chosen, lambda: x])
        b.return_(picked)
    assert count.type == tensor((), I32) and pred.type == tensor((), I1)
    assert str(f.type) == "(tensor<f32>) -> tensor<f32>"
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_sort_reduce_with_callable_body_and_rng():
    b = Builder()
    with b.function("main", [tensor((4, 5), F32)]) as (_, (x,)):
        idx = b.iota((4, 5), I32, dim=1)
        values, indices = b.sort([x, idx], "GT", dimension=1, is_stable=True)
        best, where = b.reduce(
            [values, indices], [b.constant(np.float32(-np.inf)), b.constant(np.int32(0))], [1],
            lambda a, ai, c, ci: [b.maximum(a, c), b.select(b.compare(a, c, "GE"), ai, ci)])
        state, bits = b.rng_bit_generator(b.constant(np.zeros(2, np.uint64)), (3,), I32,
                                          "THREE_FRY")
        b.return_(best, where, bits)
    assert best.type == tensor((4,), F32) and where.type == tensor((4,), I32)
    assert state.type == tensor((2,), UI64)
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_generic_op_escape_hatch():
    b = Builder()
    with b.function("main", [tensor((2,), F32)]) as (_, (x,)):
        y = b.op("stablehlo.add", [x, x]).result  # inferred
        z = b.op("sdy.opaque_thing", [y], [tensor((2,), F32)]).result  # foreign: explicit types
        with pytest.raises(VerificationError, match="cannot infer"):
            b.op("sdy.other", [z])
        b.return_(z)
    verify_module(b.module)


def test_custom_call_and_tuples():
    b = Builder()
    with b.function("main", [tensor((2,), F32)]) as (_, (x,)):
        t = b.tuple([x, x])
        first = b.get_tuple_element(t, 0)
        out = b.custom_call("my_target", [first], [tensor((2,), F32)], api_version=2,
                            backend_config="cfg")
        b.return_(out)
    assert t.type.types == (tensor((2,), F32), tensor((2,), F32))
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_every_family_builds_and_verifies_in_mlir():
    """One module touching most builder methods; MLIR is the judge of the output."""
    b = Builder()
    with b.function("impl", [tensor((4,), F32)]) as (_, (v,)):
        b.return_(b.abs(v))
    with b.function("main", [tensor((4,), F32), tensor((3, 3), F32)]) as (_, (x, m)):
        zero = b.constant(np.float32(0))
        i1 = b.constant(np.int32(1))
        ints = b.iota((4,), I32)
        y = b.clamp(zero, b.sqrt(b.exponential(x)), b.constant(np.float32(6)))
        y = b.reduce_precision(b.reverse(y, [0]), 5, 10)
        y = b.dynamic_update_slice(y, b.slice(x, [0], [2]), [i1])
        bits = b.bitcast_convert(y, tensor((4,), I32))
        masked = b.and_(bits, b.not_(b.shift_left(ints, ints)))
        size = b.get_dimension_size(x, 0)
        window = b.select_and_scatter(
            x, b.constant(np.ones(2, np.float32)), zero,
            select=lambda a, c: b.compare(a, c, "GE"), scatter="add",
            window_dimensions=[2], window_strides=[2])
        spectrum = b.fft(b.complex(x, x), "FFT", [4])
        chol = b.cholesky(b.add(m, b.transpose(m, [1, 0])), lower=True)
        solved = b.triangular_solve(chol, m, left_side=True, lower=True)
        summed = b.all_reduce(x, "add", [[0, 1]])
        gathered = b.all_gather(x, 0, [[0, 1]])
        scattered = b.reduce_scatter(x, "add", 0, [[0, 1]])
        permuted = b.collective_permute(x, [[0, 1], [1, 0]])
        token = b.after_all([])
        kept = b.optimization_barrier([x, size])
        comp = b.composite("my.abs", [x], "impl")
        b.custom_call("log", [masked, spectrum, solved, gathered, scattered, permuted, token],
                      [], has_side_effect=True)
        b.return_(window, summed, kept[0], comp)
    assert gathered.type == tensor((8,), F32) and scattered.type == tensor((2,), F32)
    assert size.type == tensor((), I32)
    verify_module(b.module)
    _check_in_mlir(b.module)


def test_return_must_match_declared_results():
    b = Builder()
    with pytest.raises(VerificationError, match="declared to return"):
        with b.function("main", [tensor((2,), F32)], [tensor((2,), I32)]) as (_, (x,)):
            b.return_(x)
