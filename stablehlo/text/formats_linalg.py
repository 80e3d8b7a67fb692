"""Pretty syntaxes of contractions, convolution, transforms and random numbers.

    %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0], contracting_dims = [2] x [1],
           precision = [DEFAULT, DEFAULT], algorithm = <...> : (T, U) -> R
    %0 = stablehlo.convolution(%lhs, %rhs) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
           window = {stride = [1, 1], pad = [[0, 0], [0, 0]], lhs_dilate = [1, 1],
           rhs_dilate = [1, 1], reverse = [false, false]} {feature_group_count = 1 : i64, ...}
           : (T, U) -> R
    %v, %i = chlo.top_k(%x, k = 2) : tensor<5x3xf32> -> (tensor<5x2xf32>, tensor<5x2xi32>)
plus keyword syntaxes (fft, cholesky, rng, rng_bit_generator, dot, einsum, unary_einsum).
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import (
    ArrayAttr,
    ConvDimensionNumbersAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    IntegerAttr,
    StructAttr,
)
from stablehlo.ir.types import I1, I64, TensorType
from stablehlo.text.formats import (
    make_op,
    parse_bool_list,
    parse_i64_list,
    parse_trailing_functional,
    print_functional_tail,
    register,
)
from stablehlo.text.keyword_formats import (
    parse_precision_list,
    precision_text,
    register_keyword,
)
from stablehlo.text.print_attributes import conv_layouts, print_result_types

# -- dot_general -------------------------------------------------------------------------

def _parse_dim_pair(p) -> tuple:
    lhs = parse_i64_list(p)
    if not (p.kind == "ident" and p.text == "x"):
        raise p.error(f"expected 'x' between dimension lists, found {p.found()}")
    p.advance()
    return lhs, parse_i64_list(p)


def parse_dot_general(p, name, loc, num_results):
    refs = p.parse_operands()
    p.expect(",", f"after operands of '{name}'")
    batch = ((), ())
    if p.at("batching_dims"):
        p.advance()
        p.expect("=", "after 'batching_dims'")
        batch = _parse_dim_pair(p)
        p.expect(",", "after batching dimensions")
    p.keyword("contracting_dims", f"in '{name}'")
    p.expect("=", "after 'contracting_dims'")
    contract = _parse_dim_pair(p)
    attrs = {"dot_dimension_numbers": StructAttr("dot", (
        ("lhs_batching_dimensions", batch[0]), ("rhs_batching_dimensions", batch[1]),
        ("lhs_contracting_dimensions", contract[0]),
        ("rhs_contracting_dimensions", contract[1])))}
    while p.accept(","):
        if p.at("precision"):
            p.advance()
            p.expect("=", "after 'precision'")
            attrs["precision_config"] = parse_precision_list(p)
        else:
            p.keyword("algorithm", f"or 'precision' in '{name}'")
            p.expect("=", "after 'algorithm'")
            p.expect("<", "to start dot algorithm")
            attrs["algorithm"] = p.parse_struct_body("dot_algorithm")
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_dot_general(pr, op):
    dims = op.attributes.get("dot_dimension_numbers")
    precision = op.attributes.get("precision_config")
    algorithm = op.attributes.get("algorithm")
    if not isinstance(dims, StructAttr) or dims.kind != "dot" \
            or (precision is not None and not isinstance(precision, ArrayAttr)) \
            or (algorithm is not None and not isinstance(algorithm, StructAttr)):
        return pr.print_generic(op)

    def pair(lhs, rhs):
        return f"[{', '.join(map(str, lhs))}] x [{', '.join(map(str, rhs))}]"

    pr.w(f"{op.name} {pr.vs(op.operands)}")
    lb, rb = dims.get("lhs_batching_dimensions"), dims.get("rhs_batching_dimensions")
    if lb or rb:
        pr.w(f", batching_dims = {pair(lb, rb)}")
    contracting = pair(dims.get("lhs_contracting_dimensions"),
                       dims.get("rhs_contracting_dimensions"))
    pr.w(f", contracting_dims = {contracting}")
    if precision is not None:
        pr.w(f", precision = {precision_text(precision)}")
    if algorithm is not None:
        body = pr.attr(algorithm)
        pr.w(", algorithm = " + body[body.index("<"):])
    print_functional_tail(pr, op, ("dot_dimension_numbers", "precision_config", "algorithm"))


# -- convolution -------------------------------------------------------------------------

_WINDOW_FIELDS = (("stride", "window_strides"), ("pad", "padding"),
                  ("lhs_dilate", "lhs_dilation"), ("rhs_dilate", "rhs_dilation"),
                  ("reverse", "window_reversal"))
_CONV_ELIDED = ("dimension_numbers",) + tuple(attr for _, attr in _WINDOW_FIELDS)


def parse_convolution(p, name, loc, num_results):
    p.expect("(", f"to start operands of '{name}'")
    refs = p.comma_list(p.parse_operand, ")", f"in operands of '{name}'")
    p.keyword("dim_numbers", f"in '{name}'")
    p.expect("=", "after 'dim_numbers'")
    attrs = {"dimension_numbers": p.parse_conv_dims()}
    p.expect(",", "after convolution dimension numbers")
    p.keyword("window", f"in '{name}'")
    p.expect("=", "after 'window'")
    p.expect("{", "to start window attributes")
    names = dict(_WINDOW_FIELDS)

    def window_entry():
        token = p.i
        key = p.ident("window attribute (stride, pad, lhs_dilate, rhs_dilate, reverse)")
        if key not in names:
            raise p.error_at(token, f"unknown window attribute '{key}'")
        p.expect("=", f"after '{key}'")
        if key == "pad":
            attrs["padding"] = _parse_padding(p)
        elif key == "reverse":
            attrs["window_reversal"] = parse_bool_list(p)
        else:
            attrs[names[key]] = DenseArrayAttr(I64, parse_i64_list(p))

    p.comma_list(window_entry, "}", "in window attributes")
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def _parse_padding(p) -> DenseElementsAttr:
    """``[[1, 1], [2, 2]]`` -> DenseElementsAttr tensor<Nx2xi64>."""
    p.expect("[", "to start padding")
    pairs = p.comma_list(lambda: parse_i64_list(p), "]", "in padding")
    for pair in pairs:
        if len(pair) != 2:
            raise p.error("each padding entry needs two values [low, high]")
    array = np.array(pairs, dtype=np.int64).reshape(len(pairs), 2)
    return DenseElementsAttr(TensorType((len(pairs), 2), I64), array)


def print_convolution(pr, op):
    attrs = op.attributes
    dims = attrs.get("dimension_numbers")
    padding = attrs.get("padding")
    if not isinstance(dims, ConvDimensionNumbersAttr) or len(op.operands) != 2 or (
            padding is not None and not (isinstance(padding, DenseElementsAttr)
                                         and padding.array.ndim == 2)):
        return pr.print_generic(op)
    window = []
    for key, attr_name in _WINDOW_FIELDS:
        value = attrs.get(attr_name)
        if value is None:
            continue
        if attr_name == "padding":
            text = "[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in value.array.tolist()) + "]"
        elif not isinstance(value, DenseArrayAttr):
            return pr.print_generic(op)
        elif value.element_type == I1:
            text = "[" + ", ".join("true" if v else "false" for v in value.values) + "]"
        else:
            text = "[" + ", ".join(str(v) for v in value.values) + "]"
        window.append(f"{key} = {text}")
    pr.w(f"{op.name}({pr.vs(op.operands)}) dim_numbers = {conv_layouts(dims)}, "
         f"window = {{{', '.join(window)}}}")
    print_functional_tail(pr, op, _CONV_ELIDED)


# -- chlo.top_k --------------------------------------------------------------------------

def parse_top_k(p, name, loc, num_results):
    p.expect("(", f"after '{name}'")
    refs = [p.parse_operand()]
    p.expect(",", "after operand of 'chlo.top_k'")
    p.keyword("k", "in 'chlo.top_k'")
    p.expect("=", "after 'k'")
    attrs = {"k": IntegerAttr(p.integer("for 'k'"), I64)}
    p.expect(")", "to close 'chlo.top_k' operands")
    attrs.update(p.parse_optional_attr_dict())
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    operand_type = p.parse_type()
    p.expect("->", "in type of 'chlo.top_k'")
    results = p.parse_result_types()
    return make_op(name, p.resolve_all(refs, [operand_type], token, name), results, attrs, loc)


def print_top_k(pr, op):
    k = op.attributes.get("k")
    if len(op.operands) != 1 or not isinstance(k, IntegerAttr):
        return pr.print_generic(op)
    pr.w(f"{op.name}({pr.v(op.operands[0])}, k = {k.value})")
    pr.attr_dict(op, {"k"})
    pr.w(f" : {pr.t(op.operand_types[0])} -> {print_result_types(op.result_types)}")


register("dot_general", parse_dot_general, print_dot_general)
register("convolution", parse_convolution, print_convolution)
register("top_k", parse_top_k, print_top_k)

register_keyword("dot", [("precision", "precision_config", "precision?")])
register_keyword("einsum", [("config", "einsum_config", "string")])
register_keyword("unary_einsum", [("config", "einsum_config", "string")])
register_keyword("fft", [("type", "fft_type", "enum:fft_type"), ("length", "fft_length", "dims")])
register_keyword("cholesky", [("lower", "lower", "bool?")], same_type=True)
register_keyword("rng", [("distribution", "rng_distribution", "enum:rng_distribution")])
register_keyword("rng_bit_generator", [("algorithm", "rng_algorithm", "enum:rng_algorithm")])
