"""Test harness for calling interpreter kernels without the parser or evaluator.

* ``make_op`` builds an ``Operation`` whose operands are arguments of a
  throwaway block (kernels only look at operand/result types and attributes).
* ``call`` runs the registered kernel of an op on numpy arrays.
* ``region`` builds a one-block region from a small Python recipe.
* ``FakeCtx.run_region`` evaluates such a region on scalars with the numpy
  kernels in ``TEST_KERNELS`` (written here, independently of the real
  elementwise kernels), counting calls; ``use_test_kernels`` makes the
  lane-wise region runner (lanes.py) use the same kernels, so fast and slow
  paths are compared on equal terms; ``force_slow_path`` turns the lane-wise
  runner off for one kernel module.
"""
from __future__ import annotations

import numpy as np

import stablehlo.interpreter.data_movement  # noqa: F401  (registers kernels)
import stablehlo.interpreter.indexing  # noqa: F401
import stablehlo.interpreter.sort  # noqa: F401
from stablehlo.interpreter import lanes
from stablehlo.interpreter.kernels import KERNELS
from stablehlo.ir.attributes import (DenseArrayAttr, DenseElementsAttr, EnumAttr,
                                     IntegerAttr, StructAttr, BoolAttr)
from stablehlo.ir.core import Block, Operation, Region
from stablehlo.ir.types import (I64, TensorType, element_type_for_dtype, numpy_dtype)


def ttype(shape, dtype) -> TensorType:
    return TensorType(tuple(shape), element_type_for_dtype(np.dtype(dtype)))


def i64s(values) -> DenseArrayAttr:
    return DenseArrayAttr(I64, tuple(int(v) for v in values))


def i64(value) -> IntegerAttr:
    return IntegerAttr(int(value), I64)


def boolean(value) -> BoolAttr:
    return BoolAttr(bool(value))


def gather_dims(offset_dims=(), collapsed_slice_dims=(), operand_batching_dims=(),
                start_indices_batching_dims=(), start_index_map=(), index_vector_dim=0):
    return StructAttr("gather", (
        ("offset_dims", tuple(offset_dims)), ("collapsed_slice_dims", tuple(collapsed_slice_dims)),
        ("operand_batching_dims", tuple(operand_batching_dims)),
        ("start_indices_batching_dims", tuple(start_indices_batching_dims)),
        ("start_index_map", tuple(start_index_map)), ("index_vector_dim", index_vector_dim)))


def scatter_dims(update_window_dims=(), inserted_window_dims=(), input_batching_dims=(),
                 scatter_indices_batching_dims=(), scatter_dims_to_operand_dims=(),
                 index_vector_dim=0):
    return StructAttr("scatter", (
        ("update_window_dims", tuple(update_window_dims)),
        ("inserted_window_dims", tuple(inserted_window_dims)),
        ("input_batching_dims", tuple(input_batching_dims)),
        ("scatter_indices_batching_dims", tuple(scatter_indices_batching_dims)),
        ("scatter_dims_to_operand_dims", tuple(scatter_dims_to_operand_dims)),
        ("index_vector_dim", index_vector_dim)))


def make_op(name, operand_types, result_types, attributes=None, regions=()):
    holder = Block(list(operand_types))
    return Operation(name, holder.arguments, list(result_types), attributes or {},
                     list(regions))


def call(op, *arrays, ctx=None):
    """Run the registered kernel of ``op``; returns the list of results."""
    return KERNELS.get(op.name)(ctx or FakeCtx(), op, *arrays)


def call1(op, *arrays, ctx=None):
    (result,) = call(op, *arrays, ctx=ctx)
    return result


# ---------------------------------------------------------------------------
# Regions


class RegionBuilder:
    """Appends scalar ops to a block: ``b.op("stablehlo.add", [x, y], dtype)``."""

    def __init__(self, block: Block):
        self.block = block

    def op(self, name, operands, dtype, **attributes):
        op = Operation(name, operands, [TensorType((), element_type_for_dtype(np.dtype(dtype)))],
                       attributes)
        self.block.append(op)
        return op.results[0]

    def constant(self, value, dtype):
        array = np.asarray(value, dtype=dtype)
        attr = DenseElementsAttr(TensorType((), element_type_for_dtype(np.dtype(dtype))), array)
        return self.op("stablehlo.constant", [], dtype, value=attr)

    def compare(self, direction, lhs, rhs, compare_type=None):
        attrs = {"comparison_direction": EnumAttr("comparison_direction", direction)}
        if compare_type:
            attrs["compare_type"] = EnumAttr("comparison_type", compare_type)
        return self.op("stablehlo.compare", [lhs, rhs], np.bool_, **attrs)


def region(arg_dtypes, recipe) -> Region:
    """A one-block region; ``recipe(builder, *args)`` returns the values to return."""
    block = Block([TensorType((), element_type_for_dtype(np.dtype(d))) for d in arg_dtypes])
    returned = recipe(RegionBuilder(block), *block.arguments)
    if not isinstance(returned, (list, tuple)):
        returned = [returned]
    block.append(Operation("stablehlo.return", list(returned), []))
    return Region([block])


def binary_region(name, dtype):
    return region([dtype, dtype], lambda b, x, y: b.op(name, [x, y], dtype))


# ---------------------------------------------------------------------------
# Test kernels (numpy, written independently of the real elementwise kernels)


def _total_order_key(x):
    """IEEE totalOrder as (class, value, sign) triples compared lexicographically."""
    x = np.asarray(x, dtype=np.float64)
    nan = np.isnan(x)
    cls = np.where(nan, np.where(np.signbit(x), 0, 2), 1)
    value = np.where(nan, 0.0, x)
    positive = ~np.signbit(x)
    return cls, value, positive


def _compare(ctx, op, lhs, rhs):
    direction = op.attributes["comparison_direction"].value
    ctype = op.attributes.get("compare_type")
    if ctype is not None and ctype.value == "TOTALORDER":
        a, b = _total_order_key(lhs), _total_order_key(rhs)
        lt = (a[0] < b[0]) | ((a[0] == b[0]) & ((a[1] < b[1]) |
                                                ((a[1] == b[1]) & (a[2] < b[2]))))
        gt = (b[0] < a[0]) | ((a[0] == b[0]) & ((b[1] < a[1]) |
                                                ((a[1] == b[1]) & (b[2] < a[2]))))
        eq = ~lt & ~gt
        table = {"LT": lt, "GT": gt, "EQ": eq, "NE": ~eq, "LE": ~gt, "GE": ~lt}
        return [table[direction]]
    ops = {"LT": np.less, "GT": np.greater, "LE": np.less_equal, "GE": np.greater_equal,
           "EQ": np.equal, "NE": np.not_equal}
    return [ops[direction](lhs, rhs)]


def _bitcast(ctx, op, x):
    dtype = numpy_dtype(op.result_types[0].element_type)
    return [np.ascontiguousarray(x).view(dtype)]


TEST_KERNELS = {
    "stablehlo.add": lambda ctx, op, x, y: [np.add(x, y)],
    "stablehlo.subtract": lambda ctx, op, x, y: [np.subtract(x, y)],
    "stablehlo.multiply": lambda ctx, op, x, y: [np.multiply(x, y)],
    "stablehlo.maximum": lambda ctx, op, x, y: [np.maximum(x, y)],
    "stablehlo.minimum": lambda ctx, op, x, y: [np.minimum(x, y)],
    "stablehlo.and": lambda ctx, op, x, y: [np.bitwise_and(x, y)],
    "stablehlo.or": lambda ctx, op, x, y: [np.bitwise_or(x, y)],
    "stablehlo.negate": lambda ctx, op, x: [np.negative(x)],
    "stablehlo.select": lambda ctx, op, p, x, y: [np.where(p, x, y)],
    "stablehlo.compare": _compare,
    "stablehlo.bitcast_convert": _bitcast,
    "stablehlo.constant": lambda ctx, op: [op.attributes["value"].array],
}


class _TestRegistry:
    @staticmethod
    def get(name):
        return TEST_KERNELS[name]


def use_test_kernels(monkeypatch):
    """Make the lane-wise region runner call TEST_KERNELS."""
    monkeypatch.setattr(lanes, "KERNELS", _TestRegistry)


class _RefusingBody:
    accepts = False

    def __init__(self, ctx, region):
        pass


def force_slow_path(monkeypatch, module):
    """Make ``module`` (indexing or sort) call the region once per element.

    Turns off the lane-wise runner and the single-compare recogniser.
    """
    monkeypatch.setattr(module, "LaneBody", _RefusingBody)
    if hasattr(module, "single_compare"):
        monkeypatch.setattr(module, "single_compare", lambda region: None)


class FakeCtx:
    """Evaluates scalar regions op by op with TEST_KERNELS; counts region calls."""

    def __init__(self):
        self.region_calls = 0

    def lookup(self, value):
        raise AssertionError(f"test regions capture no values, asked for {value!r}")

    def function(self, name):
        raise AssertionError(f"test regions call no functions, asked for @{name}")

    def run_region(self, region, args):
        self.region_calls += 1
        block = region.blocks[0]
        env = {}
        for value, arg in zip(block.arguments, args):
            arg = np.asarray(arg)
            assert arg.shape == (), f"region argument must be a scalar, got {arg.shape}"
            env[id(value)] = arg.astype(numpy_dtype(value.type.element_type))
        for op in block.operations[:-1]:
            outs = TEST_KERNELS[op.name](self, op, *[env[id(v)] for v in op.operands])
            for value, out in zip(op.results, outs):
                out = np.asarray(out)
                assert out.shape == ()
                env[id(value)] = out.astype(numpy_dtype(value.type.element_type))
        return [env[id(v)] for v in block.operations[-1].operands]
