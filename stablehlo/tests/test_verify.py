"""Tests of stablehlo/verify.py and the per-op rules.

Three kinds of evidence:
* every conformance program (read-only shared data) verifies;
* every deliberately broken program of verify_invalid.mlir is rejected, by us
  with the expected message and by upstream MLIR (jaxlib) as the oracle;
* structural rules (dominance, capture, terminators, symbols) and the
  dynamic-shape / quantized / promotion exceptions on IR built directly.
"""
from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import (
    ArrayAttr, DenseElementsAttr, StringAttr, SymbolRefAttr, i64_array,
)
from stablehlo.ir.core import Block, Module, Operation, Region
from stablehlo.ir.types import (
    F32, F64, I8, I32, QuantizedType, TensorType, tensor,
)
from stablehlo.builder import Builder
from stablehlo.text import split_input_file
from stablehlo.verify import verify_module, verify_op

HERE = pathlib.Path(__file__).parent
CONFORMANCE = HERE.parents[2] / "shared" / "conformance" / "stablehlo"
if not CONFORMANCE.exists():
    CONFORMANCE = pathlib.Path("/work/shared/conformance/stablehlo")


def _parser():
    try:
        from stablehlo.text.parser import parse_module
    except ImportError as exc:  # the text layer is developed alongside
        pytest.skip(f"parser unavailable: {exc}")
    return parse_module


def _chunks(text: str) -> list:
    return [c for _, _, c in split_input_file(text) if "func.func" in c]


# ---------------------------------------------------------------------------
# Conformance programs are accepted

FOLDERS = ["interpret", "interpret/chlo", "testdata", "testdata/dynamic", "testdata/quantized",
           "testdata_chlo_legalized"]


@pytest.mark.slow
@pytest.mark.parametrize("folder", FOLDERS)
def test_conformance_programs_verify(folder):
    parse_module = _parser()
    root = CONFORMANCE / folder
    if not root.exists():
        pytest.skip(f"no conformance data at {root}")
    rejected = []
    for path in sorted(root.glob("*.mlir")):
        text = path.read_text()
        pieces = _chunks(text) if folder.startswith("interpret") else [text]
        for n, piece in enumerate(pieces):
            module = parse_module(piece, str(path))
            try:
                verify_module(module)
            except VerificationError as exc:
                rejected.append(f"{path.name}#{n}: {exc}")
    assert not rejected, f"{len(rejected)} rejected:\n" + "\n".join(rejected[:20])


# ---------------------------------------------------------------------------
# Broken programs are rejected, by us and by MLIR

INVALID = [c for _, _, c in split_input_file((HERE / "verify_invalid.mlir").read_text())
           if "// ERR:" in c]


def _invalid_id(chunk: str) -> str:
    return re.search(r"func\.func @(\w+)", chunk).group(1)


@pytest.mark.parametrize("chunk", INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_program_rejected_by_us(chunk):
    parse_module = _parser()
    expected = re.search(r"// ERR: (.*)", chunk).group(1).strip()
    module = parse_module(chunk, "invalid.mlir")
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    message = str(info.value)
    assert expected in message
    # names the place: file:line:col: 'op.name'
    assert re.match(r"invalid\.mlir:\d+:\d+: '[a-z_]+\.[a-z_.]+'", message), message


@pytest.mark.parametrize("chunk", INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_program_rejected_by_mlir(chunk):
    pytest.importorskip("jaxlib")
    from stablehlo.tests.mlir_oracle import mlir_verify
    assert mlir_verify(chunk) is not None


def test_there_are_enough_invalid_programs():
    assert len(INVALID) >= 30


# ---------------------------------------------------------------------------
# Structure: dominance, capture, terminators, symbols

def _func(module: Module, name: str, inputs, results) -> Block:
    from stablehlo.ir.core import make_func
    from stablehlo.ir.types import FunctionType
    op = make_func(name, FunctionType(tuple(inputs), tuple(results)))
    module.body.append(op)
    return op.regions[0].blocks[0]


def _ret(block: Block, *values, name="func.return") -> None:
    block.append(Operation(name, list(values), ()))


T2 = tensor((2,), F32)


def test_use_before_definition_is_rejected():
    module = Module()
    body = _func(module, "main", [T2], [T2])
    first = Operation("stablehlo.negate", [body.arguments[0]], [T2])
    second = Operation("stablehlo.negate", [first.result], [T2])
    body.append(second)  # uses `first` before it is in the block
    body.append(first)
    _ret(body, second.result)
    with pytest.raises(VerificationError, match=r"'stablehlo.negate': operand #0 .* used before"):
        verify_module(module)


def test_implicit_capture_from_enclosing_region_is_allowed():
    b = Builder()
    with b.function("main", [T2]) as (_, (x,)):
        pred = b.constant(np.bool_(True))
        # both branches return the function argument captured from outside
        y = b.if_(pred, lambda: x, lambda: b.negate(x))
        b.return_(y)
    verify_module(b.module)


def test_capture_across_function_boundary_is_rejected():
    module = Module()
    first = _func(module, "first", [T2], [T2])
    _ret(first, first.arguments[0])
    second = _func(module, "second", [], [T2])
    _ret(second, first.arguments[0])  # func.func is isolated from above
    with pytest.raises(VerificationError, match="not visible here"):
        verify_module(module)


def test_region_without_terminator_is_rejected():
    module = Module()
    body = _func(module, "main", [tensor((3,), F32), tensor((), F32)], [tensor((), F32)])
    scalar = tensor((), F32)
    region_block = Block([scalar, scalar])
    region_block.append(Operation("stablehlo.add", region_block.arguments, [scalar]))
    reduce = Operation("stablehlo.reduce", body.arguments, [scalar],
                       {"dimensions": i64_array([0])}, [Region([region_block])])
    body.append(reduce)
    _ret(body, reduce.result)
    with pytest.raises(VerificationError, match="must end with stablehlo.return"):
        verify_module(module)


def test_function_must_end_with_func_return():
    module = Module()
    body = _func(module, "main", [T2], [T2])
    _ret(body, body.arguments[0], name="stablehlo.return")
    with pytest.raises(VerificationError, match="must end with func.return"):
        verify_module(module)


def test_terminator_in_the_middle_is_rejected():
    module = Module()
    body = _func(module, "main", [T2], [T2])
    _ret(body, body.arguments[0])
    _ret(body, body.arguments[0])
    with pytest.raises(VerificationError, match="must be the last op"):
        verify_module(module)


def test_wrong_region_count_is_rejected():
    module = Module()
    body = _func(module, "main", [tensor((), I32)], [tensor((), I32)])
    op = Operation("stablehlo.while", body.arguments, [tensor((), I32)])
    body.append(op)
    _ret(body, op.result)
    with pytest.raises(VerificationError, match="expected 2 region"):
        verify_module(module)


def test_unknown_op_of_registered_dialect_is_rejected_but_foreign_ops_pass():
    module = Module()
    body = _func(module, "main", [T2], [T2])
    foreign = Operation("sdy.sharding_constraint", body.arguments, [T2])
    body.append(foreign)
    _ret(body, foreign.result)
    verify_module(module)  # other dialects are opaque
    body.operations.insert(0, Operation("chlo.frobnicate", body.arguments, [T2]))
    body.operations[0].parent = body
    with pytest.raises(VerificationError, match="unknown op 'chlo.frobnicate'"):
        verify_module(module)


def test_duplicate_symbol_is_rejected():
    module = Module()
    for _ in range(2):
        body = _func(module, "f", [T2], [T2])
        _ret(body, body.arguments[0])
    with pytest.raises(VerificationError, match="redefinition of symbol @f"):
        verify_module(module)


def test_entry_block_must_match_function_type():
    module = Module()
    body = _func(module, "main", [T2], [T2])
    body.arguments[0].type = tensor((3,), F32)
    _ret(body, body.arguments[0])
    with pytest.raises(VerificationError, match="entry block arguments"):
        verify_module(module)


def test_custom_call_called_computations_must_resolve():
    module = Module()
    body = _func(module, "main", [T2], [])
    body.append(Operation("stablehlo.custom_call", body.arguments, (), {
        "call_target_name": StringAttr("foo"),
        "called_computations": ArrayAttr((SymbolRefAttr("nowhere"),))}))
    _ret(body)
    with pytest.raises(VerificationError, match="@nowhere, which is not defined"):
        verify_module(module)


def test_verify_op_checks_one_op_in_context():
    b = Builder()
    with b.function("main", [T2]) as (_, (x,)):
        y = b.negate(x)
        b.return_(y)
    negate = y.owner
    verify_op(negate)  # its operand is a visible function argument
    negate.results[0].type = tensor((3,), F32)
    with pytest.raises(VerificationError, match=r"result #0 has type tensor<3xf32>"):
        verify_op(negate)


# ops checked only structurally or by verify.py itself (functions, symbols, terminators)
STRUCTURAL_ONLY = {"builtin.module", "func.func", "func.return", "func.call", "stablehlo.return",
                   "interpreter.run_parallel", "stablehlo.async_start", "stablehlo.async_done",
                   "stablehlo.einsum", "stablehlo.unary_einsum"}


def test_every_op_declares_its_rule():
    from stablehlo.ir.ops import OPS
    from stablehlo.ir.ops.shape_inference import Rule
    missing = [name for name in OPS.names()
               if name not in STRUCTURAL_ONLY and not isinstance(OPS.get(name).verify, Rule)]
    assert not missing, f"ops declared without verify=Rule: {missing}"


# ---------------------------------------------------------------------------
# Dynamic dimensions, quantization and promotion

def _single_op_module(name, operand_types, result_types, attributes=None, regions=()):
    module = Module()
    body = _func(module, "main", operand_types, result_types)
    op = Operation(name, body.arguments, result_types, attributes or {}, regions)
    body.append(op)
    _ret(body, *op.results)
    return module


def test_dynamic_dims_are_compatible_with_static_ones():
    dyn, static = tensor((None, 3), F32), tensor((2, 3), F32)
    verify_module(_single_op_module("stablehlo.add", [dyn, static], [static]))
    verify_module(_single_op_module("stablehlo.add", [dyn, dyn], [static]))
    with pytest.raises(VerificationError, match="result #0 has type tensor<4x3xf32>"):
        verify_module(_single_op_module("stablehlo.add", [dyn, static], [tensor((4, 3), F32)]))


def _quant(scale: float, zero_point: int = 0) -> QuantizedType:
    return QuantizedType(I8, F32, (scale,), (zero_point,))


def test_quantized_operands_may_differ_in_scale_only():
    a, b, r = (tensor((4,), _quant(s)) for s in (0.1, 0.2, 0.3))
    verify_module(_single_op_module("stablehlo.add", [a, b], [r]))
    with pytest.raises(VerificationError, match="cannot be mixed"):
        verify_module(_single_op_module("stablehlo.add", [a, a], [tensor((4,), F32)]))


def _reduce_module(input_elem, acc_elem):
    scalar_in, acc = tensor((), input_elem), tensor((), acc_elem)
    block = Block([acc, acc])
    add = Operation("stablehlo.add", block.arguments, [acc])
    block.append(add)
    block.append(Operation("stablehlo.return", [add.result], ()))
    return _single_op_module("stablehlo.reduce", [tensor((5,), input_elem), scalar_in], [acc],
                             {"dimensions": i64_array([0])}, [Region([block])])


def test_reduce_may_accumulate_in_a_wider_type_only():
    verify_module(_reduce_module(I8, I32))
    verify_module(_reduce_module(F32, F64))
    with pytest.raises(VerificationError, match="cannot be promoted"):
        verify_module(_reduce_module(I32, I8))
    with pytest.raises(VerificationError, match="cannot be promoted"):
        verify_module(_reduce_module(I32, F32))


def test_constant_value_must_match_result_type():
    value = DenseElementsAttr(tensor((2,), F32), np.zeros(2, np.float32))
    verify_module(_single_op_module("stablehlo.constant", [], [tensor((2,), F32)],
                                    {"value": value}))
    with pytest.raises(VerificationError, match="expected tensor<2xf32>"):
        verify_module(_single_op_module("stablehlo.constant", [], [tensor((3,), F32)],
                                        {"value": value}))


def test_missing_required_attribute_is_named():
    with pytest.raises(VerificationError, match="requires attribute 'permutation'"):
        verify_module(_single_op_module("stablehlo.transpose", [T2], [T2]))


def test_typed_errors_name_op_and_operand():
    module = _single_op_module("stablehlo.add", [T2, tensor((3,), F32)], [T2])
    with pytest.raises(VerificationError) as info:
        verify_module(module)
    assert str(info.value) == ("'stablehlo.add': operand #1 has type tensor<3xf32>, expected "
                               "tensor<2xf32> (all operands and results must have the same "
                               "shape)")


def test_tensor_type_used_for_shapes_is_immutable():
    # the rules build new types with with_shape/with_element_type, never mutate
    t = TensorType((2, 3), F32)
    assert t.with_shape((3,)) == tensor((3,), F32) and t.shape == (2, 3)


_DYNAMIC_CONV_1D_WITH_2D_WINDOW = """
func.func @main(%lhs: tensor<1x?x16xf32>, %rhs: tensor<4x16x16xf32>, %pad: tensor<1x2xi32>) -> tensor<1x?x16xf32> {
  %0 = "stablehlo.dynamic_conv"(%lhs, %rhs, %pad) {batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>, feature_group_count = 1 : i64, window_strides = array<i64: 2, 2>} : (tensor<1x?x16xf32>, tensor<4x16x16xf32>, tensor<1x2xi32>) -> tensor<1x?x16xf32>
  return %0 : tensor<1x?x16xf32>
}
"""


def test_dynamic_conv_window_attributes_are_as_lenient_as_mlir():
    # JAX's shape-polymorphic exports write 2-D window attributes on 1-D
    # dynamic_convs; upstream MLIR accepts them, and so must we.
    pytest.importorskip("jaxlib", reason="jaxlib (the MLIR oracle) is not importable")
    from stablehlo.tests.mlir_oracle import mlir_verify
    from stablehlo.text import parse_module
    assert mlir_verify(_DYNAMIC_CONV_1D_WITH_2D_WINDOW) is None
    verify_module(parse_module(_DYNAMIC_CONV_1D_WITH_2D_WINDOW))


# -- element counts that do not fit in int64


def _broadcast_program(shape: str) -> str:
    result = f"tensor<{shape}xf32>"
    return (f"func.func @main(%x: tensor<f32>) -> {result} {{\n"
            f"  %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> {result}\n"
            f"  return %0 : {result}\n}}\n")


@pytest.mark.parametrize("shape", [
    "9223372036854775807x2",        # the element count wraps around int64
    "1099511627776x1099511627776",  # 2^80 elements
    "4611686018427387904",          # 2^62 elements fit, their 2^64 bytes do not
])
def test_type_whose_size_overflows_int64_is_rejected(shape):
    import stablehlo
    with pytest.raises(VerificationError, match=re.escape(
            f"'stablehlo.broadcast_in_dim': result #0 type tensor<{shape}xf32>")):
        stablehlo.parse(_broadcast_program(shape))


def test_block_argument_whose_size_overflows_int64_is_rejected():
    import stablehlo
    big = "tensor<9223372036854775807x4xi8>"
    text = f"func.func @main(%x: {big}) -> {big} {{\n  return %x : {big}\n}}\n"
    with pytest.raises(VerificationError, match=re.escape(f"argument #0 type {big}")):
        stablehlo.parse(text)


def test_big_type_that_fits_int64_verifies():
    # 2^50 f32 elements cannot be allocated but are a valid program: the runtime, not the
    # verifier, refuses them (pjrt/plugins/cpu/tests/test_cpu_backend.py).
    import stablehlo
    stablehlo.parse(_broadcast_program("1099511627776x1024"))
    stablehlo.parse(_broadcast_program("0x9223372036854775807x4"))
