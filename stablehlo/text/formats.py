"""Pretty (custom) op syntaxes: the ``FORMATS`` registry and the helpers its entries share.

Each entry is a ``Format(parse, print)`` registered under the name that ``OpDef.syntax``
uses. ``parse(p, name, loc, num_results) -> Operation`` runs with the parser positioned just
after the op name; ``print(pr, op)`` writes everything after ``%r = `` (op name included).
Entries live in formats_*.py by op family; importing this module registers them all.

Pretty attr-dicts leave out inherent attributes that hold their ODS default value
(``PRETTY_DEFAULTS``), as MLIR's generated printers do; the generic form prints every attribute.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stablehlo.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    DenseArrayAttr,
    DictAttr,
    EnumAttr,
    IntegerAttr,
    StructAttr,
)
from stablehlo.ir.core import Location, Operation
from stablehlo.ir.ops import OPS
from stablehlo.ir.types import I1, I32, I64
from stablehlo.registry import Registry


@dataclass(frozen=True)
class Format:
    parse: Callable
    print: Callable


FORMATS: Registry[Format] = Registry("op format")

# Inherent attributes with an ODS default value: elided from pretty attr-dicts when equal.
PRETTY_DEFAULTS: dict[str, dict] = {
    "stablehlo.custom_call": {
        "has_side_effect": BoolAttr(False), "api_version": IntegerAttr(1, I32),
        "called_computations": ArrayAttr(()), "output_operand_aliases": ArrayAttr(()),
    },
    "stablehlo.cholesky": {"lower": BoolAttr(False)},
    "stablehlo.composite": {"composite_attributes": DictAttr(()),
                            "version": IntegerAttr(0, I32)},
}
_ACCURACY_DEFAULT = StructAttr("result_accuracy", (
    ("atol", 0.0), ("rtol", 0.0), ("ulps", 0),
    ("mode", EnumAttr("result_accuracy_mode", "DEFAULT"))))


def register(name: str, parse: Callable, print_: Callable) -> None:
    FORMATS.register(name, Format(parse, print_))


def lookup_format(op_name: str) -> Format | None:
    """The pretty format of an op, or None if it only has the generic form."""
    opdef = OPS.lookup(op_name)
    if opdef is None:
        return FOREIGN_FORMATS.get(op_name)
    if opdef.syntax == "generic":
        return None
    return FORMATS.get(opdef.syntax)


# Pretty syntaxes of ops from dialects we do not model (sdy, ...): op name -> Format.
FOREIGN_FORMATS: dict[str, Format] = {}


def elided_defaults(op: Operation) -> set:
    """Names of the op's attributes that hold their default value."""
    defaults = PRETTY_DEFAULTS.get(op.name, {})
    names = {k for k, v in defaults.items() if op.attributes.get(k) == v}
    if op.attributes.get("result_accuracy") == _ACCURACY_DEFAULT:
        names.add("result_accuracy")
    return names


def make_op(name: str, operands, result_types, attrs: dict, loc: Location,
            regions=()) -> Operation:
    return Operation(name, operands, result_types, attrs, regions, loc)


# -- shared parse pieces -----------------------------------------------------------------

def parse_i64_list(p) -> tuple:
    """``[1, 2, 3]`` -> tuple of ints."""
    p.expect("[", "to start integer list")
    return tuple(p.comma_list(lambda: p.integer("in integer list"), "]"))


def parse_dims_attr(p, keyword: str) -> DenseArrayAttr:
    """``keyword = [1, 2]`` -> DenseArrayAttr(i64)."""
    p.keyword(keyword)
    p.expect("=", f"after '{keyword}'")
    return DenseArrayAttr(I64, parse_i64_list(p))


def parse_bool_list(p) -> DenseArrayAttr:
    p.expect("[", "to start boolean list")

    def item():
        word = p.ident("true or false")
        if word not in ("true", "false"):
            raise p.error_at(p.i - 1, f"expected true or false, found '{word}'")
        return word == "true"

    return DenseArrayAttr(I1, tuple(p.comma_list(item, "]")))


def parse_trailing_functional(p, refs, name: str):
    """``[attr-dict] : (T, ...) -> R`` -> (attrs, operands, result types)."""
    attrs = p.parse_optional_attr_dict()
    p.expect(":", f"after operands of '{name}'")
    token = p.i
    ftype = p.parse_function_type()
    return attrs, p.resolve_all(refs, ftype.inputs, token, name), list(ftype.results)


# -- shared print pieces -----------------------------------------------------------------

def same_or_functional(pr, op: Operation) -> str:
    """``T`` if every operand and the single result have type T, else ``(Ts) -> R``."""
    types = op.operand_types + op.result_types
    if len(op.results) == 1 and types and all(t == types[0] for t in types):
        return pr.t(types[0])
    return pr.functional_type(op)


def print_functional_tail(pr, op: Operation, elided=()) -> None:
    pr.attr_dict(op, set(elided) | elided_defaults(op))
    pr.w(" : " + pr.functional_type(op))


def has_attrs(op: Operation, *names: str) -> bool:
    return all(n in op.attributes for n in names)


# Registers every family's formats (import for side effects, at the end to avoid cycles).
from stablehlo.text import (  # noqa: F401
    formats_control,
    formats_data,
    formats_elementwise,
    formats_func,
    formats_linalg,
    formats_sdy,
    formats_testing,
)
