"""Declarative pretty syntaxes of the form ``op %a, %b, kw = value, ... {attrs} : types``.

Most StableHLO ops with custom syntax list their operands, then ``keyword = value`` items
for some inherent attributes, then the attr-dict and either a functional type
(``(T, U) -> R``) or the same-type shorthand. ``KeywordFormat`` describes one such syntax by
its fields; each field is (keyword, attribute name, kind) where kind is one of

* ``dims``   ``[1, 2]`` <-> DenseArrayAttr(i64);
* ``i64`` / ``i32``  ``3`` <-> IntegerAttr;
* ``enum:<kind>``  ``FFT`` <-> EnumAttr(kind, ...);
* ``string``  ``"ab,bc->ac"`` <-> StringAttr;
* ``bool``   ``true`` <-> BoolAttr;
* ``precision``  ``[DEFAULT, HIGH]`` <-> ArrayAttr of EnumAttr("precision", ...).

A field whose kind ends in ``?`` is optional: printed only when present (and not holding its
default value). A kind ending in ``~`` marks an optional keyword that is accepted when parsing
but printed in the attr-dict (newer syntax that MLIR 1.17 does not read).
"""
from __future__ import annotations

from stablehlo.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    DenseArrayAttr,
    EnumAttr,
    IntegerAttr,
    StringAttr,
)
from stablehlo.ir.types import I32, I64
from stablehlo.text.formats import (
    elided_defaults,
    make_op,
    parse_i64_list,
    register,
    same_or_functional,
)
from stablehlo.text.parse_attributes import unescape_string


class KeywordFormat:
    def __init__(self, fields, same_type: bool = False):
        self.fields = [(kw, attr, kind.rstrip("?~"), kind[-1] in "?~")
                       for kw, attr, kind in fields]
        self.parse_only = {attr for _, attr, kind in fields if kind.endswith("~")}
        self.same_type = same_type

    # -- parsing -------------------------------------------------------------------------
    def parse(self, p, name, loc, num_results):
        refs = p.parse_operands()
        attrs = {}
        for index, (keyword, attr_name, kind, optional) in enumerate(self.fields):
            if optional and not (p.at(",") and p.peek_text() == keyword):
                continue
            if refs or index:
                p.expect(",", f"before '{keyword}' in '{name}'")
            p.keyword(keyword, f"in '{name}'")
            p.expect("=", f"after '{keyword}'")
            attrs[attr_name] = self._parse_value(p, kind)
        attrs.update(p.parse_optional_attr_dict())
        operands, results = p.parse_functional_or_single(refs, name)
        return make_op(name, operands, results, attrs, loc)

    @staticmethod
    def _parse_value(p, kind: str):
        if kind == "dims":
            return DenseArrayAttr(I64, parse_i64_list(p))
        if kind in ("i64", "i32"):
            return IntegerAttr(p.integer(width=int(kind[1:])), I64 if kind == "i64" else I32)
        if kind.startswith("enum:"):
            return EnumAttr(kind[5:], p.ident(f"{kind[5:]} value"))
        if kind == "string":
            return StringAttr(unescape_string(p.expect_kind("string", "string")))
        if kind == "bool":
            word = p.ident("true or false")
            if word not in ("true", "false"):
                raise p.error_at(p.i - 1, f"expected true or false, found '{word}'")
            return BoolAttr(word == "true")
        if kind == "precision":
            return parse_precision_list(p)
        raise AssertionError(f"unknown keyword field kind {kind}")

    # -- printing ------------------------------------------------------------------------
    def print(self, pr, op):
        attrs = op.attributes
        for _, attr_name, kind, optional in self.fields:
            if attr_name in attrs:
                if not _valid(attrs[attr_name], kind):
                    return pr.print_generic(op)
            elif not optional:
                return pr.print_generic(op)
        elided = elided_defaults(op)
        pr.w(f"{op.name} {pr.vs(op.operands)}" if op.operands else op.name)
        first = not op.operands
        for keyword, attr_name, kind, optional in self.fields:
            if attr_name not in attrs or attr_name in self.parse_only \
                    or (optional and attr_name in elided):
                continue
            pr.w(f" {keyword} = " if first else f", {keyword} = ")
            pr.w(value_text(attrs[attr_name], kind))
            first = False
        shown = {attr for _, attr, _, _ in self.fields} - self.parse_only
        pr.attr_dict(op, elided | shown)
        if self.same_type:
            pr.w(" : " + same_or_functional(pr, op))
        else:
            pr.w(" : " + pr.functional_type(op))


_KIND_CLASSES = {"dims": DenseArrayAttr, "i64": IntegerAttr, "i32": IntegerAttr,
                 "string": StringAttr, "bool": BoolAttr, "precision": ArrayAttr}


def _valid(attr, kind: str) -> bool:
    """Whether ``attr`` can be written in the keyword syntax of ``kind``."""
    if kind.startswith("enum:"):
        return isinstance(attr, EnumAttr) and attr.kind == kind[5:]
    if kind == "dims":
        return isinstance(attr, DenseArrayAttr) and attr.element_type == I64
    if kind == "precision":
        return isinstance(attr, ArrayAttr) and all(
            isinstance(v, EnumAttr) and v.kind == "precision" for v in attr.values)
    return isinstance(attr, _KIND_CLASSES[kind])


def value_text(attr, kind: str) -> str:
    if kind == "dims":
        return "[" + ", ".join(str(v) for v in attr.values) + "]"
    if kind in ("i64", "i32"):
        return str(attr.value)
    if kind.startswith("enum:"):
        return attr.value
    if kind == "bool":
        return "true" if attr.value else "false"
    if kind == "precision":
        return precision_text(attr)
    return pr_attr(attr)


def pr_attr(attr) -> str:
    from stablehlo.text.print_attributes import print_attribute
    return print_attribute(attr)


def parse_precision_list(p) -> ArrayAttr:
    """``[DEFAULT, HIGHEST]`` -> ArrayAttr of EnumAttr("precision", ...)."""
    p.expect("[", "to start precision list")
    return ArrayAttr(tuple(p.comma_list(lambda: EnumAttr("precision", p.ident("precision")),
                                        "]", "in precision list")))


def precision_text(attr) -> str:
    return "[" + ", ".join(v.value for v in attr.values) + "]"


def register_keyword(name: str, fields, same_type: bool = False) -> None:
    fmt = KeywordFormat(fields, same_type)
    register(name, fmt.parse, fmt.print)
