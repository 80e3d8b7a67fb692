"""Pretty syntaxes of the builtin and func dialects: module, func.func, call.

    module @jit_f attributes {mhlo.num_partitions = 1 : i32} { ... }
    func.func public @main(%arg0: tensor<4xf32> {mhlo.sharding = "{replicated}"})
        -> (tensor<4xf32> {jax.result_info = "result"}) attributes {...} { ... }
    func.func private @decl(tensor<4xf32>) -> tensor<4xf32>
    %0 = call @f(%a) : (tensor<4xf32>) -> tensor<4xf32>
"""
from __future__ import annotations

from stablehlo.ir.attributes import (
    ArrayAttr,
    DictAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
)
from stablehlo.ir.core import Region
from stablehlo.ir.types import FunctionType
from stablehlo.text.formats import (
    make_op,
    parse_trailing_functional,
    print_functional_tail,
    register,
)
from stablehlo.text.print_attributes import print_attr_entries, print_symbol

_FUNC_ELIDED = {"sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs"}


# -- module ------------------------------------------------------------------------------

def parse_module_op(p, name, loc, num_results):
    attrs = {}
    if p.kind == "symbol":
        attrs["sym_name"] = StringAttr(p.parse_symbol_ref().name)
    if p.at("attributes"):
        p.advance()
        attrs.update(p.parse_attr_dict())
    # The outermost module's body is the top level, as for text without a ``module {}``
    # (which the printer adds): it is not a level of nesting. Inner modules are.
    outermost = p.depth == 0
    p.depth -= outermost
    region = p.parse_region()
    p.depth += outermost
    if not region.blocks:
        from stablehlo.ir.core import Block
        region.add_block(Block())
    return make_op(name, [], [], attrs, loc, [region])


def print_module_op(pr, op):
    if len(op.regions) != 1 or len(op.regions[0].blocks) != 1 or op.operands or op.results \
            or op.regions[0].blocks[0].arguments:
        return pr.print_generic(op)
    pr.w("module")
    sym = op.attributes.get("sym_name")
    if isinstance(sym, StringAttr):
        pr.w(" " + print_symbol(sym.value))
    pr.attr_dict(op, {"sym_name"}, keyword="attributes")
    pr.w(" ")
    pr.region(op.regions[0], entry_args=False)


# -- func.func ---------------------------------------------------------------------------

def parse_func(p, name, loc, num_results):
    attrs = {}
    if p.kind == "ident" and p.text in ("public", "private", "nested"):
        attrs["sym_visibility"] = StringAttr(p.advance())
    attrs["sym_name"] = StringAttr(p.parse_symbol_ref().name)
    p.expect("(", "to start function arguments")
    args = []  # (name or None, type, attrs, token)

    def argument():
        token = p.i
        arg_name = p.advance() if p.kind == "value" else None
        if arg_name is not None:
            p.expect(":", f"after argument '{arg_name}'")
        typ = p.parse_type("of function argument")
        arg_attrs = p.parse_optional_attr_dict()
        p.skip_location()
        args.append((arg_name, typ, arg_attrs, token))

    p.comma_list(argument, ")", "in function arguments")
    results, res_attrs = [], []
    if p.accept("->"):
        results, res_attrs = _parse_func_results(p)
    inputs = tuple(t for _, t, _, _ in args)
    attrs["function_type"] = TypeAttr(FunctionType(inputs, tuple(results)))
    _set_dicts(attrs, "arg_attrs", [a for _, _, a, _ in args])
    _set_dicts(attrs, "res_attrs", res_attrs)
    if p.at("attributes"):
        p.advance()
        attrs.update(p.parse_attr_dict())
    region = Region()
    if p.at("{"):
        named = [(n, t, token) for n, t, _, token in args]
        if any(n is None for n, _, _ in named):
            raise p.error("a function with a body needs named arguments")
        region = p.parse_region(entry_args=named)
    return make_op(name, [], [], attrs, loc, [region])


def _parse_func_results(p):
    if not p.at("("):
        return [p.parse_type("of function result")], [{}]
    start = p.i
    p.advance()
    results, res_attrs = [], []
    if p.accept(")"):
        return results, res_attrs

    def result():
        results.append(p.parse_type("of function result"))
        res_attrs.append(p.parse_optional_attr_dict())
        p.skip_location()

    p.comma_list(result, ")", "in function results")
    if p.at("->"):  # ``-> (T) -> U``: a single result of function type
        p.i = start
        return [p.parse_type()], [{}]
    return results, res_attrs


def _set_dicts(attrs: dict, key: str, dicts: list) -> None:
    if any(dicts):
        attrs[key] = ArrayAttr(tuple(DictAttr(tuple(d.items())) for d in dicts))


def print_func(pr, op):
    ftype = op.attributes.get("function_type")
    sym = op.attributes.get("sym_name")
    if not isinstance(ftype, TypeAttr) or not isinstance(ftype.type, FunctionType) \
            or not isinstance(sym, StringAttr) or len(op.regions) != 1 or op.results:
        return pr.print_generic(op)
    ftype = ftype.type
    region = op.regions[0]
    body = region.blocks[0] if region.blocks else None
    if body is not None and len(body.arguments) != len(ftype.inputs):
        return pr.print_generic(op)
    pr.w("func.func ")
    visibility = op.attributes.get("sym_visibility")
    if isinstance(visibility, StringAttr):
        pr.w(visibility.value + " ")
    args = []
    for index, typ in enumerate(ftype.inputs):
        text = pr.t(typ) if body is None else f"{pr.v(body.arguments[index])}: {pr.t(typ)}"
        args.append(text + _dict_suffix(op.attributes.get("arg_attrs"), index))
    pr.w(f"{print_symbol(sym.value)}({', '.join(args)})")
    _print_func_results(pr, op, ftype)
    pr.attr_dict(op, _FUNC_ELIDED, keyword="attributes")
    if body is not None:
        pr.w(" ")
        pr.region(region, entry_args=False)


def _print_func_results(pr, op, ftype: FunctionType) -> None:
    if not ftype.results:
        return
    res_attrs = op.attributes.get("res_attrs")
    parts = [pr.t(t) + _dict_suffix(res_attrs, k) for k, t in enumerate(ftype.results)]
    single = len(parts) == 1 and parts[0] == pr.t(ftype.results[0]) \
        and not isinstance(ftype.results[0], FunctionType)
    pr.w(" -> " + (parts[0] if single else "(" + ", ".join(parts) + ")"))


def _dict_suffix(array, index: int) -> str:
    if isinstance(array, ArrayAttr) and index < len(array.values):
        entry = array.values[index]
        if isinstance(entry, DictAttr) and entry.items:
            return " {" + print_attr_entries(entry.items) + "}"
    return ""


# -- func.call ---------------------------------------------------------------------------

def parse_call(p, name, loc, num_results):
    callee = p.parse_symbol_ref()
    p.expect("(", f"to start operands of '{name}'")
    refs = p.comma_list(p.parse_operand, ")", f"in operands of '{name}'")
    attrs, operands, results = parse_trailing_functional(p, refs, name)
    attrs["callee"] = callee
    return make_op(name, operands, results, attrs, loc)


def print_call(pr, op):
    callee = op.attributes.get("callee")
    if not isinstance(callee, SymbolRefAttr):
        return pr.print_generic(op)
    pr.w(f"{pr.op_name(op)} {pr.attr(callee)}({pr.vs(op.operands)})")
    print_functional_tail(pr, op, ("callee",))


register("module", parse_module_op, print_module_op)
register("func", parse_func, print_func)
register("call", parse_call, print_call)
