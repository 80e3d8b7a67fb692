"""Pretty syntaxes of the Shardy (``sdy``) ops JAX emits; their attributes keep their spelling.

    sdy.mesh @mesh = <["data"=4, "model"=2]> {stablehlo.mesh = {...}}
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"model"}]> : tensor<32x128xf32>
    %0 = sdy.manual_computation(%a) in_shardings=[<@mesh, [{"x"}, {}]>]
           out_shardings=[<@mesh, [{}, {}]>] manual_axes={"x"} (%arg1: tensor<4x8xf32>) {
      ...
      sdy.return %r : tensor<4x8xf32>
    } : (tensor<16x8xf32>) -> tensor<4x8xf32>

The ops are not in the op registry (OpenHLO does not model Shardy's ops); they parse into
unregistered Operations whose inherent attributes are the typed sharding attributes of
stablehlo/ir/sharding.py, read by parse_sharding.py and holding MLIR's generic spelling
(``#sdy.sharding<@mesh, [...]>``), so a pretty/generic round trip keeps them intact.
``FOREIGN_PROPERTIES`` tells the generic printer which attributes are inherent.
"""
from __future__ import annotations

from stablehlo.ir.attributes import OpaqueAttr, StringAttr
from stablehlo.ir.sharding import ManualAxesAttr, MeshAttr, ShardingAttr, ShardingPerValueAttr
from stablehlo.text.formats import FOREIGN_FORMATS, Format, make_op
from stablehlo.text.print_attributes import print_symbol

FOREIGN_PROPERTIES = {
    "sdy.mesh": ("mesh", "sym_name"),
    "sdy.sharding_constraint": ("sharding",),
    "sdy.manual_computation": ("in_shardings", "out_shardings", "manual_axes"),
}

_MESH = "#sdy.mesh"
_SHARDING = "#sdy.sharding"
_PER_VALUE = "#sdy.sharding_per_value<"
_AXES = "#sdy<manual_axes"


def _read_group(p, parse) -> tuple:
    """``(source text, value)`` of the bracketed group ``parse`` reads."""
    start = p.i
    value = parse()
    return p.source_since(start), value


def _strip(attr, prefix: str, suffix: str = "") -> str | None:
    if not isinstance(attr, OpaqueAttr) or not attr.text.startswith(prefix) \
            or not attr.text.endswith(suffix):
        return None
    return attr.text[len(prefix):len(attr.text) - len(suffix)]


# -- sdy.mesh ----------------------------------------------------------------------------

def parse_mesh(p, name, loc, num_results):
    attrs = {"sym_name": StringAttr(p.parse_symbol_ref().name)}
    p.expect("=", f"after mesh name in '{name}'")
    text, mesh = _read_group(p, p.parse_mesh_body)
    attrs["mesh"] = MeshAttr(_MESH + text, mesh)
    attrs.update(p.parse_optional_attr_dict())
    return make_op(name, [], [], attrs, loc)


def print_mesh(pr, op):
    body = _strip(op.attributes.get("mesh"), _MESH)
    sym = op.attributes.get("sym_name")
    if body is None or not isinstance(sym, StringAttr) or op.operands or op.results:
        return pr.print_generic(op)
    pr.w(f"{op.name} {print_symbol(sym.value)} = {body}")
    pr.attr_dict(op, {"mesh", "sym_name"})


# -- sdy.sharding_constraint -------------------------------------------------------------

def parse_sharding_constraint(p, name, loc, num_results):
    ref = p.parse_operand()
    text, sharding = _read_group(p, p.parse_sharding_body)
    attrs = {"sharding": ShardingAttr(_SHARDING + text, sharding)}
    attrs.update(p.parse_optional_attr_dict())
    p.expect(":", f"after operands of '{name}'")
    typ = p.parse_type()
    return make_op(name, [p.resolve(ref, typ)], [typ], attrs, loc)


def print_sharding_constraint(pr, op):
    body = _strip(op.attributes.get("sharding"), _SHARDING)
    if body is None or len(op.operands) != 1 or op.result_types != op.operand_types:
        return pr.print_generic(op)
    pr.w(f"{op.name} {pr.v(op.operands[0])} {body}")
    pr.attr_dict(op, {"sharding"})
    pr.w(" : " + pr.t(op.result_types[0]))


# -- sdy.manual_computation --------------------------------------------------------------

def parse_manual_computation(p, name, loc, num_results):
    p.expect("(", f"after '{name}'")
    refs = p.comma_list(p.parse_operand, ")", f"in operands of '{name}'")
    attrs = {}
    for keyword in ("in_shardings", "out_shardings"):
        p.keyword(keyword, f"in '{name}'")
        p.expect("=", f"after '{keyword}'")
        text, shardings = _read_group(p, p.parse_sharding_list)
        attrs[keyword] = ShardingPerValueAttr(_PER_VALUE + text + ">", shardings)
    p.keyword("manual_axes", f"in '{name}'")
    p.expect("=", "after 'manual_axes'")
    text, axes = _read_group(p, lambda: p.parse_axis_set("in 'manual_axes'"))
    attrs["manual_axes"] = ManualAxesAttr(_AXES + text + ">", tuple(axes))
    p.expect("(", "to start manual_computation region arguments")
    args = p.comma_list(p.parse_typed_argument, ")", "in region arguments")
    region = p.parse_region(entry_args=args)
    attrs.update(p.parse_optional_attr_dict())
    p.expect(":", f"after region of '{name}'")
    token = p.i
    ftype = p.parse_function_type()
    operands = p.resolve_all(refs, ftype.inputs, token, name)
    return make_op(name, operands, ftype.results, attrs, loc, [region])


def print_manual_computation(pr, op):
    ins = _strip(op.attributes.get("in_shardings"), _PER_VALUE, ">")
    outs = _strip(op.attributes.get("out_shardings"), _PER_VALUE, ">")
    axes = _strip(op.attributes.get("manual_axes"), _AXES, ">")
    if ins is None or outs is None or axes is None or len(op.regions) != 1 \
            or len(op.regions[0].blocks) != 1:
        return pr.print_generic(op)
    args = op.regions[0].blocks[0].arguments
    arg_text = ", ".join(f"{pr.v(a)}: {pr.t(a.type)}" for a in args)
    pr.w(f"{op.name}({pr.vs(op.operands)}) in_shardings={ins} out_shardings={outs} "
         f"manual_axes={axes} ({arg_text}) ")
    pr.region(op.regions[0], entry_args=False)
    pr.attr_dict(op, set(FOREIGN_PROPERTIES[op.name]))
    pr.w(" : " + pr.functional_type(op))


# -- sdy.return --------------------------------------------------------------------------

def parse_sdy_return(p, name, loc, num_results):
    refs = p.parse_operands()
    attrs = p.parse_optional_attr_dict()
    types = []
    if refs:
        p.expect(":", f"after operands of '{name}'")
        types = p.parse_type_list_until_not_comma()
    return make_op(name, p.resolve_all(refs, types, p.i - 1, name), [], attrs, loc)


def print_sdy_return(pr, op):
    if op.results:
        return pr.print_generic(op)
    pr.w(op.name)
    if op.operands:
        pr.w(" " + pr.vs(op.operands))
    pr.attr_dict(op)
    if op.operands:
        pr.w(" : " + pr.ts(op.operand_types))


FOREIGN_FORMATS.update({
    "sdy.mesh": Format(parse_mesh, print_mesh),
    "sdy.sharding_constraint": Format(parse_sharding_constraint, print_sharding_constraint),
    "sdy.manual_computation": Format(parse_manual_computation, print_manual_computation),
    "sdy.return": Format(parse_sdy_return, print_sdy_return),
})
