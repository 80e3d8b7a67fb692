"""Pretty syntaxes of region-holding and miscellaneous StableHLO ops.

    %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
           : (tensor<3x4xf32>, tensor<f32>) -> tensor<3xf32>
    %0:2 = stablehlo.reduce(%a init: %x), (%b init: %y) across dimensions = [1] : (...) -> (...)
     reducer(%arg1: tensor<f32>, %arg3: tensor<f32>) (%arg2: tensor<i64>, %arg4: tensor<i64>)  {
      ...
    }
    %0:2 = stablehlo.while(%iterArg = %a, %iterArg_0 = %b) : tensor<i32>, tensor<f32>
    cond { ... } do { ... }
    stablehlo.return %a, %b : tensor<f32>, tensor<i32>
    %0:2 = stablehlo.optimization_barrier %a, %b : tensor<f32>, tensor<i32>
    %0 = stablehlo.composite "my.op" %a {decomposition = @impl} : (tensor<f32>) -> tensor<f32>
    %0 = stablehlo.custom_call @target(%a) {backend_config = ""} : (tensor<f32>) -> tensor<f32>
    %0 = stablehlo.after_all %t1, %t2 : !stablehlo.token
    %0 = stablehlo.create_token : !stablehlo.token
"""
from __future__ import annotations

from stablehlo.ir.attributes import DenseArrayAttr, IntegerAttr, StringAttr
from stablehlo.ir.core import Block, Operation, Region
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.base import COMMUTATIVE
from stablehlo.ir.types import I32, I64, TensorType, TokenType
from stablehlo.text.formats import (
    make_op,
    parse_dims_attr,
    parse_trailing_functional,
    print_functional_tail,
    register,
)
from stablehlo.text.parse_attributes import unescape_string
from stablehlo.text.print_attributes import print_string, print_symbol

# -- reduce ------------------------------------------------------------------------------

def parse_reduce(p, name, loc, num_results):
    inputs, inits = [], []

    def pair():
        p.expect("(", f"to start an operand pair of '{name}'")
        inputs.append(p.parse_operand())
        p.keyword("init", "in reduce operand pair")
        p.expect(":", "after 'init'")
        inits.append(p.parse_operand())
        p.expect(")", "to close reduce operand pair")

    pair()
    while p.accept(","):
        pair()
    applies = None
    if p.at("applies"):
        p.advance()
        applies = (p.i, p.ident("op name after 'applies'"))
    p.keyword("across", f"in '{name}'")
    attrs = {"dimensions": parse_dims_attr(p, "dimensions")}
    attrs.update(p.parse_optional_attr_dict())
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    ftype = p.parse_function_type()
    operands = p.resolve_all(inputs + inits, ftype.inputs, token, name)
    if applies is not None:
        region = _compact_reducer(p, applies, operands, loc)
    else:
        p.keyword("reducer", f"in '{name}'")
        firsts, seconds = [], []
        for _ in inputs:
            p.expect("(", "to start reducer argument pair")
            firsts.append(p.parse_typed_argument())
            p.expect(",", "in reducer argument pair")
            seconds.append(p.parse_typed_argument())
            p.expect(")", "to close reducer argument pair")
        region = p.parse_region(entry_args=firsts + seconds)
    return make_op(name, operands, ftype.results, attrs, loc, [region])


def _compact_reducer(p, applies, operands, loc) -> Region:
    """The body ``applies stablehlo.add`` stands for: one binary op on 0-d tensors."""
    token, inner_name = applies
    if OPS.lookup(inner_name) is None:
        raise p.error_at(token, f"unknown op '{inner_name}' after 'applies'")
    first = operands[0].type if operands else None
    if not isinstance(first, TensorType):
        raise p.error_at(token, "compact reduce needs a tensor operand")
    scalar = TensorType((), first.element_type)
    block = Block([scalar] * len(operands))
    inner = Operation(inner_name, block.arguments, [scalar], location=loc)
    block.append(inner)
    block.append(Operation("stablehlo.return", inner.results, location=loc))
    return Region([block])


def _is_compact_reduce(op) -> bool:
    """MLIR's condition for printing ``applies <op>`` instead of the region."""
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1 or not op.operands:
        return False
    block = op.regions[0].blocks[0]
    if len(block.operations) != 2:
        return False
    inner, ret = block.operations
    opdef = OPS.lookup(inner.name)
    first = op.operands[0].type
    return (opdef is not None and opdef.has(COMMUTATIVE) and inner.dialect == "stablehlo"
            and len(inner.operands) == 2 and len(inner.results) == 1 and not inner.attributes
            and not inner.regions and isinstance(first, TensorType)
            and inner.operands[0].type == TensorType((), first.element_type)
            and inner.results[0].type == inner.operands[0].type
            and list(inner.operands) == list(block.arguments)
            and ret.name == "stablehlo.return" and list(ret.operands) == inner.results)


def print_reduce(pr, op):
    dims = op.attributes.get("dimensions")
    count = len(op.operands) // 2
    if not isinstance(dims, DenseArrayAttr) or len(op.operands) % 2 or len(op.regions) != 1 \
            or len(op.regions[0].blocks) != 1 \
            or len(op.regions[0].blocks[0].arguments) != 2 * count:
        return pr.print_generic(op)
    pairs = [f"({pr.v(op.operands[k])} init: {pr.v(op.operands[k + count])})"
             for k in range(count)]
    pr.w(f"{op.name}{', '.join(pairs)}")
    compact = _is_compact_reduce(op)
    if compact:
        pr.w(" applies " + op.regions[0].blocks[0].operations[0].name)
    pr.w(" across dimensions = [" + ", ".join(str(d) for d in dims.values) + "]")
    pr.attr_dict(op, {"dimensions"})
    pr.w(" : " + pr.functional_type(op))
    if compact:
        return
    args = op.regions[0].blocks[0].arguments
    arg_pairs = [f"({pr.v(args[k])}: {pr.t(args[k].type)}, "
                 f"{pr.v(args[k + count])}: {pr.t(args[k + count].type)})"
                 for k in range(count)]
    pr.w(f"\n{pr.indent} reducer{' '.join(arg_pairs)}  ")
    pr.region(op.regions[0], entry_args=False)


# -- while -------------------------------------------------------------------------------

def parse_while(p, name, loc, num_results):
    p.expect("(", f"after '{name}'")
    names, refs = [], []

    def binding():
        token = p.i
        names.append((p.expect_kind("value", "iteration argument name"), token))
        p.expect("=", "after iteration argument name")
        refs.append(p.parse_operand())

    p.comma_list(binding, ")", f"in '{name}' operands")
    types = []
    if p.accept(":"):
        types = p.parse_type_list_until_not_comma()
    attrs = {}
    if p.at("attributes"):
        p.advance()
        attrs = p.parse_attr_dict()
    operands = p.resolve_all(refs, types, p.i, name)
    args = [(n, t, token) for (n, token), t in zip(names, types)]
    p.keyword("cond", f"in '{name}'")
    cond = p.parse_region(entry_args=args)
    p.keyword("do", f"in '{name}'")
    body = p.parse_region(entry_args=args)
    return make_op(name, operands, types, attrs, loc, [cond, body])


def print_while(pr, op):
    # The pretty form gives each operand, its block arguments and its result one type: a
    # loop whose block arguments or results are typed otherwise (tensor<?x...> for a
    # tensor<4x...> operand) only has the generic form.
    operand_types = list(op.operand_types)
    if len(op.regions) != 2 or any(len(r.blocks) != 1 for r in op.regions) \
            or list(op.result_types) != operand_types \
            or any([a.type for a in r.blocks[0].arguments] != operand_types
                   for r in op.regions):
        return pr.print_generic(op)
    args = op.regions[1].blocks[0].arguments
    bindings = ", ".join(f"{pr.v(a)} = {pr.v(v)}" for a, v in zip(args, op.operands))
    pr.w(f"{op.name}({bindings})")
    if op.operands:
        pr.w(" : " + pr.ts(op.operand_types))
    pr.attr_dict(op, keyword="attributes")
    pr.w(f"\n{pr.indent}cond ")
    pr.region(op.regions[0], entry_args=False)
    pr.w(" do ")
    pr.region(op.regions[1], entry_args=False)


# -- return-like: operands then their types ----------------------------------------------

def parse_return(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    types = []
    if refs:
        p.expect(":", f"after operands of '{name}'")
        types = p.parse_type_list_until_not_comma()
    operands = p.resolve_all(refs, types, p.i - 1, name)
    return make_op(name, operands, [], attrs, loc)


def print_return(pr, op):
    if op.results:
        return pr.print_generic(op)
    pr.w(pr.op_name(op))
    if op.operands:
        pr.w(" " + pr.vs(op.operands))
    pr.attr_dict(op)
    if op.operands:
        pr.w(" : " + pr.ts(op.operand_types))


def parse_optimization_barrier(p, name, loc, num_results):
    attrs = p.parse_optional_attr_dict()
    refs = p.parse_operands()
    types = []
    if refs:
        p.expect(":", f"after operands of '{name}'")
        types = p.parse_type_list_until_not_comma()
    operands = p.resolve_all(refs, types, p.i - 1, name)
    return make_op(name, operands, types, attrs, loc)


def print_optimization_barrier(pr, op):
    if op.operand_types != op.result_types:
        return pr.print_generic(op)
    pr.w(op.name)
    pr.attr_dict(op)
    if op.operands:
        pr.w(f" {pr.vs(op.operands)} : {pr.ts(op.operand_types)}")


# -- composite / custom_call ---------------------------------------------------------------

def parse_composite(p, name, loc, num_results):
    attrs = {"name": StringAttr(unescape_string(p.expect_kind("string", "composite name")))}
    refs = p.parse_operands()
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_composite(pr, op):
    comp_name = op.attributes.get("name")
    if not isinstance(comp_name, StringAttr):
        return pr.print_generic(op)
    pr.w(f"{op.name} {print_string(comp_name.value)} {pr.vs(op.operands)}")
    print_functional_tail(pr, op, ("name",))


def parse_custom_call(p, name, loc, num_results):
    target = p.parse_symbol_ref()
    attrs = {"call_target_name": StringAttr(target.name)}
    p.expect("(", f"to start operands of '{name}'")
    refs = p.comma_list(p.parse_operand, ")", f"in operands of '{name}'")
    more, operands, results = parse_trailing_functional(p, refs, name)
    attrs.update(more)
    return make_op(name, operands, results, attrs, loc)


def print_custom_call(pr, op):
    target = op.attributes.get("call_target_name")
    if not isinstance(target, StringAttr):
        return pr.print_generic(op)
    pr.w(f"{op.name} {print_symbol(target.value)}({pr.vs(op.operands)})")
    print_functional_tail(pr, op, ("call_target_name",))


# -- tokens ------------------------------------------------------------------------------

def parse_after_all(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    result = p.parse_type()
    operands = [p.resolve(r, TokenType()) for r in refs]
    return make_op(name, operands, [result], attrs, loc)


def print_after_all(pr, op):
    if len(op.results) != 1 or any(not isinstance(t, TokenType) for t in op.operand_types):
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.vs(op.operands)}")
    pr.attr_dict(op)
    pr.w(" : " + pr.t(op.result_types[0]))


register("reduce", parse_reduce, print_reduce)
register("while", parse_while, print_while)
register("return", parse_return, print_return)
register("func_return", parse_return, print_return)
register("optimization_barrier", parse_optimization_barrier, print_optimization_barrier)
register("composite", parse_composite, print_composite)
register("custom_call", parse_custom_call, print_custom_call)
register("after_all", parse_after_all, print_after_all)


# -- chlo.scan ---------------------------------------------------------------------------

def parse_scan(p, name, loc, num_results):
    """``chlo.scan(%in, ...) inits(%init, ...) dimension=0 [attributes {...}] {region}
    : (T, ...) -> (R, ...)``."""
    p.expect("(", f"after '{name}'")
    inputs = p.comma_list(p.parse_operand, ")", f"in inputs of '{name}'")
    p.keyword("inits", f"in '{name}'")
    p.expect("(", "after 'inits'")
    inits = p.comma_list(p.parse_operand, ")", f"in inits of '{name}'")
    p.keyword("dimension", f"in '{name}'")
    p.expect("=", "after 'dimension'")
    attrs = {"dimension": IntegerAttr(p.integer("for 'dimension'"), I64)}
    if p.at("attributes"):
        p.advance()
        attrs.update(p.parse_attr_dict())
    region = p.parse_region()
    p.expect(":", f"after region of '{name}'")
    token = p.i
    ftype = p.parse_function_type()
    operands = p.resolve_all(inputs + inits, ftype.inputs, token, name)
    # how many operands are inputs (the rest are inits) and how many results are outputs
    # (the rest are the final carries), as MLIR records them
    attrs["operandSegmentSizes"] = DenseArrayAttr(I32, (len(inputs), len(inits)))
    outputs = len(ftype.results) - len(inits)
    attrs["resultSegmentSizes"] = DenseArrayAttr(I32, (outputs, len(inits)))
    return make_op(name, operands, ftype.results, attrs, loc, [region])


def print_scan(pr, op):
    segments = op.attributes.get("operandSegmentSizes")
    dimension = op.attributes.get("dimension")
    if not isinstance(segments, DenseArrayAttr) or len(segments.values) != 2 \
            or not isinstance(dimension, IntegerAttr) or len(op.regions) != 1:
        return pr.print_generic(op)
    count = segments.values[0]
    pr.w(f"{op.name}({pr.vs(op.operands[:count])}) inits ({pr.vs(op.operands[count:])}) "
         f"dimension={dimension.value} ")
    pr.attr_dict(op, {"operandSegmentSizes", "resultSegmentSizes", "dimension"},
                 keyword="attributes")
    pr.w(" ")
    pr.region(op.regions[0], entry_args=True)
    pr.w(" : " + pr.functional_type(op))


register("scan", parse_scan, print_scan)
