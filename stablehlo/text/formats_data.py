"""Pretty syntaxes of data-movement ops.

    %c = stablehlo.constant dense<[1, 2]> : tensor<2xi64>
    %0 = stablehlo.iota dim = 0 : tensor<4xf32>
    %0 = stablehlo.broadcast_in_dim %x, dims = [0, 1] : (tensor<2x3xf32>) -> tensor<2x3x4xf32>
    %0 = stablehlo.concatenate %a, %b, dim = 0 : (tensor<2xf32>, tensor<3xf32>) -> tensor<5xf32>
    %0 = stablehlo.pad %x, %v, low = [1], high = [2], interior = [0] : (...) -> tensor<6xf32>
    %0 = stablehlo.slice %x [0:6:2, 1:5] : (tensor<6x6xf32>) -> tensor<3x4xf32>
    %0 = stablehlo.dynamic_slice %x, %i, %j, sizes = [2, 2] : (...) -> tensor<2x2xf32>
    %0 = stablehlo.get_tuple_element %t[0] : (tuple<tensor<f32>>) -> tensor<f32>
    %0 = stablehlo.tuple %a, %b : tuple<tensor<f32>, tensor<i32>>
"""
from __future__ import annotations

from stablehlo.ir.attributes import DenseArrayAttr, DenseElementsAttr, IntegerAttr
from stablehlo.ir.types import I32, I64, TupleType
from stablehlo.text.formats import (
    make_op,
    parse_trailing_functional,
    print_functional_tail,
    register,
)
from stablehlo.text.keyword_formats import register_keyword

# -- constant ----------------------------------------------------------------------------

def parse_constant(p, name, loc, num_results):
    if p.at("("):  # the generic body after the name, used when value and result types differ
        return p.parse_generic_body(name, loc)
    attrs = p.parse_optional_attr_dict()
    token = p.i
    value = p.parse_attribute("as constant value")
    typ = getattr(value, "type", None)
    if typ is None:
        raise p.error_at(token, "expected a typed constant value such as dense<...> : tensor<>")
    attrs["value"] = value
    return make_op(name, [], [typ], attrs, loc)


def print_constant(pr, op):
    value = op.attributes.get("value")
    if not isinstance(value, DenseElementsAttr) or len(op.results) != 1 \
            or value.type != op.result_types[0] or op.operands:
        pr.w(op.name)
        return pr.print_generic(op, with_name=False)
    pr.w(op.name)
    pr.attr_dict(op, {"value"})
    pr.w(" " + pr.attr(value))


# -- slice -------------------------------------------------------------------------------

def parse_slice(p, name, loc, num_results):
    refs = [p.parse_operand()]
    p.expect("[", f"to start slice ranges of '{name}'")
    starts, limits, strides = [], [], []

    def one_range():
        starts.append(p.integer("as slice start"))
        p.expect(":", "in slice range")
        limits.append(p.integer("as slice limit"))
        strides.append(p.integer("as slice stride") if p.accept(":") else 1)

    p.comma_list(one_range, "]", "in slice ranges")
    attrs = {"start_indices": DenseArrayAttr(I64, tuple(starts)),
             "limit_indices": DenseArrayAttr(I64, tuple(limits)),
             "strides": DenseArrayAttr(I64, tuple(strides))}
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_slice(pr, op):
    names = ("start_indices", "limit_indices", "strides")
    arrays = [op.attributes.get(n) for n in names]
    if len(op.operands) != 1 or not all(isinstance(a, DenseArrayAttr) for a in arrays) \
            or len({len(a.values) for a in arrays}) != 1:
        return pr.print_generic(op)
    ranges = []
    for start, limit, stride in zip(*(a.values for a in arrays)):
        ranges.append(f"{start}:{limit}" + (f":{stride}" if stride != 1 else ""))
    pr.w(f"{op.name} {pr.v(op.operands[0])} [{', '.join(ranges)}]")
    print_functional_tail(pr, op, names)


# -- get_tuple_element -------------------------------------------------------------------

def parse_get_tuple_element(p, name, loc, num_results):
    refs = [p.parse_operand()]
    p.expect("[", f"before tuple index of '{name}'")
    attrs = {"index": IntegerAttr(p.integer("as tuple index", 32), I32)}
    p.expect("]", "after tuple index")
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_get_tuple_element(pr, op):
    index = op.attributes.get("index")
    if len(op.operands) != 1 or not isinstance(index, IntegerAttr):
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.v(op.operands[0])}[{index.value}]")
    print_functional_tail(pr, op, ("index",))


# -- tuple -------------------------------------------------------------------------------

def parse_tuple(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    typ = p.parse_type()
    if not isinstance(typ, TupleType):
        raise p.error_at(token, f"expected tuple type for '{name}', got {typ}")
    operands = p.resolve_all(refs, typ.types, token, name)
    return make_op(name, operands, [typ], attrs, loc)


def print_tuple(pr, op):
    result = op.result_types[0] if len(op.results) == 1 else None
    if not isinstance(result, TupleType) or tuple(op.operand_types) != tuple(result.types):
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op)
    pr.w(" : " + pr.t(result))


register("constant", parse_constant, print_constant)
register("slice", parse_slice, print_slice)
register("get_tuple_element", parse_get_tuple_element, print_get_tuple_element)
register("tuple", parse_tuple, print_tuple)

register_keyword("iota", [("dim", "iota_dimension", "i64")], same_type=True)
register_keyword("broadcast_in_dim", [("dims", "broadcast_dimensions", "dims")])
register_keyword("broadcast", [("sizes", "broadcast_sizes", "dims")])
register_keyword("transpose", [("dims", "permutation", "dims")])
register_keyword("reverse", [("dims", "dimensions", "dims")], same_type=True)
register_keyword("concatenate", [("dim", "dimension", "i64")])
register_keyword("pad", [("low", "edge_padding_low", "dims"),
                         ("high", "edge_padding_high", "dims"),
                         ("interior", "interior_padding", "dims")])
register_keyword("dynamic_slice", [("sizes", "slice_sizes", "dims")])
register_keyword("get_dimension_size", [("dim", "dimension", "i64")])
register_keyword("set_dimension_size", [("dim", "dimension", "i64")])
register_keyword("dynamic_iota", [("dim", "iota_dimension", "i64")])
register_keyword("dynamic_broadcast_in_dim", [
    ("dims", "broadcast_dimensions", "dims"),
    ("known_expanding_dimensions", "known_expanding_dimensions", "dims~"),
    ("known_nonexpanding_dimensions", "known_nonexpanding_dimensions", "dims~"),
])
