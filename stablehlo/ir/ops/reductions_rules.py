"""Verifiers and type inference of ops with a reducer or comparator region.

reduce, reduce_window, select_and_scatter, sort and map. Reduction bodies may
accumulate in a wider type of the same kind (the spec's ``is_promotable``);
the results then carry the accumulator's element type.
"""
from __future__ import annotations

from stablehlo.ir.ops.base import op_error
from stablehlo.ir.ops.shape_inference import (
    Rule, block_arg_types, block_return_types, bool_attr, check_dims, check_in_range,
    check_positive, check_size, check_type_list, int_attr, int_list,
    padding_pairs, reducer_types, region_block, scalar_of, shapes_compatible, tensor_operand,
    window_output_size,
)
from stablehlo.ir.types import I1


def _inputs_and_inits(op) -> tuple:
    """Operands split in halves: N inputs of one shape, then N 0-d init values."""
    count = len(op.operands)
    if count == 0 or count % 2:
        raise op_error(op, f"expected 2N operands (N inputs then N init values), got {count}")
    n = count // 2
    inputs = [tensor_operand(op, i) for i in range(n)]
    inits = [tensor_operand(op, n + i) for i in range(n)]
    for i, t in enumerate(inputs[1:], start=1):
        if not shapes_compatible(t.shape, inputs[0].shape):
            raise op_error(op, f"operand #{i} has type {t}, expected the shape of operand #0 "
                               f"{inputs[0]} (all inputs must have the same shape)")
    for i, t in enumerate(inits):
        if t.rank != 0:
            raise op_error(op, f"operand #{n + i} (init value) has type {t}, expected a 0-d "
                               f"tensor")
    return inputs, inits


def _infer_reduce(op):
    inputs, inits = _inputs_and_inits(op)
    rank = inputs[0].rank
    dims = int_list(op, "dimensions")
    check_dims(op, "attribute 'dimensions'", dims, rank)
    elems = reducer_types(op, 0, inputs, inits, "body")
    shape = [s for d, s in enumerate(inputs[0].shape) if d not in dims]
    return [t.with_shape(shape).with_element_type(e) for t, e in zip(inputs, elems)]


def _window_attrs(op, rank: int) -> tuple:
    """window_dimensions/strides/base_dilations/window_dilations and padding."""
    window = int_list(op, "window_dimensions")
    strides = int_list(op, "window_strides", [1] * rank)
    base = int_list(op, "base_dilations", [1] * rank)
    dilations = int_list(op, "window_dilations", [1] * rank)
    for name, values in (("window_dimensions", window), ("window_strides", strides),
                         ("base_dilations", base), ("window_dilations", dilations)):
        check_size(op, f"attribute '{name}'", values, rank, "the rank of the inputs")
        check_positive(op, f"attribute '{name}'", values)
    return window, strides, base, dilations, padding_pairs(op, "padding", rank)


def _infer_reduce_window(op):
    inputs, inits = _inputs_and_inits(op)
    x = inputs[0]
    window, strides, base, dilations, padding = _window_attrs(op, x.rank)
    elems = reducer_types(op, 0, inputs, inits, "body")
    shape = [window_output_size(x.shape[d], window[d], strides[d], padding[d], base[d],
                                dilations[d]) for d in range(x.rank)]
    return [t.with_shape(shape).with_element_type(e) for t, e in zip(inputs, elems)]


def _infer_select_and_scatter(op):
    if len(op.operands) != 3:
        raise op_error(op, f"expected 3 operands (operand, source, init_value), got "
                           f"{len(op.operands)}")
    operand, source, init = (tensor_operand(op, i) for i in range(3))
    rank = operand.rank
    window = int_list(op, "window_dimensions")
    strides = int_list(op, "window_strides", [1] * rank)
    for name, values in (("window_dimensions", window), ("window_strides", strides)):
        check_size(op, f"attribute '{name}'", values, rank, f"the rank of operand {operand}")
        check_positive(op, f"attribute '{name}'", values)
    padding = padding_pairs(op, "padding", rank)
    if source.element_type != operand.element_type:
        raise op_error(op, f"operand #1 (source) has type {source}, expected element type "
                           f"{operand.element_type} (the operand's)")
    windows = [window_output_size(operand.shape[d], window[d], strides[d], padding[d])
               for d in range(rank)]
    if not shapes_compatible(source.shape, windows):
        raise op_error(op, f"operand #1 (source) has type {source}, expected shape "
                           f"{windows} (the number of windows)")
    if init.rank != 0:
        raise op_error(op, f"operand #2 (init_value) has type {init}, expected a 0-d tensor")
    _check_select_region(op, operand.element_type)
    (elem,) = reducer_types(op, 1, [operand], [init], "scatter")
    return [operand.with_element_type(elem)]


def _check_select_region(op, element_type) -> None:
    block = region_block(op, 0, "select")
    scalar = scalar_of(element_type)
    check_type_list(op, "select argument", block_arg_types(block), [scalar, scalar])
    check_type_list(op, "select result", block_return_types(op, block, "select"),
                    [scalar_of(I1)])


def _infer_sort(op):
    if not op.operands:
        raise op_error(op, "expected at least 1 operand, got 0")
    inputs = [tensor_operand(op, i) for i in range(len(op.operands))]
    for i, t in enumerate(inputs[1:], start=1):
        if not shapes_compatible(t.shape, inputs[0].shape):
            raise op_error(op, f"operand #{i} has type {t}, expected the shape of operand #0 "
                               f"{inputs[0]} (all inputs must have the same shape)")
    rank = inputs[0].rank
    dim = int_attr(op, "dimension", -1)
    check_in_range(op, "attribute 'dimension'", [dim], -rank, max(rank, 1))
    bool_attr(op, "is_stable")
    block = region_block(op, 0, "comparator")
    expected_args = []
    for t in inputs:
        expected_args += [scalar_of(t.element_type)] * 2
    check_type_list(op, "comparator argument", block_arg_types(block), expected_args)
    check_type_list(op, "comparator result", block_return_types(op, block, "comparator"),
                    [scalar_of(I1)])
    return inputs


def _infer_map(op):
    if not op.operands:
        raise op_error(op, "expected at least 1 operand, got 0")
    inputs = [tensor_operand(op, i) for i in range(len(op.operands))]
    for i, t in enumerate(inputs[1:], start=1):
        if not shapes_compatible(t.shape, inputs[0].shape):
            raise op_error(op, f"operand #{i} has type {t}, expected the shape of operand #0 "
                               f"{inputs[0]}")
    rank = inputs[0].rank
    dims = int_list(op, "dimensions")
    if dims != list(range(rank)):
        raise op_error(op, f"attribute 'dimensions' is {dims}, expected {list(range(rank))}")
    block = region_block(op, 0, "computation")
    check_type_list(op, "computation argument", block_arg_types(block),
                    [scalar_of(t.element_type) for t in inputs])
    rets = block_return_types(op, block, "computation")
    if len(rets) != 1 or getattr(rets[0], "rank", None) != 0:
        raise op_error(op, f"computation must return one 0-d tensor, got "
                           f"({', '.join(str(t) for t in rets)})")
    return [inputs[0].with_element_type(rets[0].element_type)]


RULES = {
    "reduce": Rule(_infer_reduce),
    "reduce_window": Rule(_infer_reduce_window),
    "select_and_scatter": Rule(_infer_select_and_scatter),
    "sort": Rule(_infer_sort),
    "map": Rule(_infer_map),
}


def rule_for(mnemonic: str):
    """The Rule declared for ``mnemonic`` in this file, or None."""
    return RULES.get(mnemonic)
