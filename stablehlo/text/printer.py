"""Module -> MLIR text, in MLIR's canonical pretty form or the generic form.

Pretty form uses each op's entry in ``formats.FORMATS`` (named by ``OpDef.syntax``); ops
without one, unregistered ops, and everything when ``generic=True`` use the generic form
``%r = "name"(operands) <{properties}> ({regions}) {attributes} : (types) -> results``.
SSA names follow MLIR (names.py). Indentation is 2 spaces per region level; ops of the func
dialect directly inside a ``func.func`` body drop the ``func.`` prefix, as MLIR prints them.

``print(parse(t))`` is a fixed point, and what this prints parses and verifies in upstream MLIR.
"""
from __future__ import annotations

from stablehlo.ir.attributes import Attribute, StringAttr
from stablehlo.ir.core import Block, Module, Operation, Region, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.types import Type
from stablehlo.text.names import Names
from stablehlo.text.print_attributes import (
    print_attr_entries,
    print_attribute,
    print_result_types,
    print_type,
)

# Inherent attributes MLIR always stores (ODS DefaultValuedAttr): the generic form shows them
# even when the text left them out.
MATERIALIZED_DEFAULTS = {
    "stablehlo.infeed": {"infeed_config": StringAttr("")},
    "stablehlo.outfeed": {"outfeed_config": StringAttr("")},
}


class Printer:
    """Accumulates text; format print functions call its helpers (``w``, ``v``, ``t``...)."""

    def __init__(self, top: Operation, generic: bool = False, generic_dialects=()):
        self.generic = generic
        self.generic_dialects = frozenset(generic_dialects)
        self.names = Names(top, generic)
        self.out: list[str] = []
        self.indent = ""

    # -- small helpers for formats -------------------------------------------------------
    def w(self, text: str) -> None:
        self.out.append(text)

    def v(self, value: Value) -> str:
        name = self.names.value_names.get(value)
        if name is None:
            return "<<UNKNOWN SSA VALUE>>"
        return name

    def vs(self, values) -> str:
        return ", ".join(self.v(x) for x in values)

    @staticmethod
    def t(typ: Type) -> str:
        return print_type(typ)

    @staticmethod
    def ts(types) -> str:
        return ", ".join(print_type(x) for x in types)

    @staticmethod
    def attr(attr: Attribute) -> str:
        return print_attribute(attr)

    def functional_type(self, op: Operation) -> str:
        """``(T, U) -> R``."""
        return f"({self.ts(op.operand_types)}) -> {print_result_types(op.result_types)}"

    def attr_dict(self, op: Operation, elided=(), keyword: str = "") -> None:
        """`` {a = 1, b}`` of the op's attributes not in ``elided`` (nothing if none)."""
        items = [(k, a) for k, a in op.attributes.items() if k not in elided]
        if items:
            prefix = f" {keyword}" if keyword else ""
            self.w(f"{prefix} {{{print_attr_entries(items)}}}")

    def op_name(self, op: Operation) -> str:
        """The op name as printed: ``func.`` dropped directly inside a func body."""
        if op.name.startswith("func.") and op.name != "func.func":
            parent_block = op.parent
            region = parent_block.parent if parent_block is not None else None
            owner = region.parent if region is not None else None
            if owner is not None and owner.name == "func.func":
                return op.name[5:]
        return op.name

    # -- structure -----------------------------------------------------------------------
    def print_op(self, op: Operation) -> None:
        self.w(self.indent)
        if op.results:
            self.w(self.names.result_defs[op] + " = ")
        fmt = None if self.generic else self._format_of(op)
        if fmt is None:
            self.print_generic(op)
        else:
            fmt.print(self, op)

    def _format_of(self, op: Operation):
        if op.dialect in self.generic_dialects:
            return None
        from stablehlo.text.formats import lookup_format
        return lookup_format(op.name)

    def print_generic(self, op: Operation, with_name: bool = True) -> None:
        from stablehlo.text.print_attributes import print_string
        if with_name:
            self.w(print_string(op.name))
        self.w(f"({self.vs(op.operands)})")
        opdef = OPS.lookup(op.name)
        if opdef is not None:
            inherent = opdef.properties
        else:
            from stablehlo.text.formats_sdy import FOREIGN_PROPERTIES
            inherent = FOREIGN_PROPERTIES.get(op.name, ())
        attributes = op.attributes
        defaults = MATERIALIZED_DEFAULTS.get(op.name)
        if defaults:
            attributes = {**defaults, **attributes}
        props = [(k, a) for k, a in attributes.items() if k in inherent]
        others = [(k, a) for k, a in attributes.items() if k not in inherent]
        if props:
            self.w(f" <{{{print_attr_entries(props)}}}>")
        if op.regions:
            self.w(" (")
            for index, region in enumerate(op.regions):
                if index:
                    self.w(", ")
                self.region(region, entry_args=True)
            self.w(")")
        if others:
            self.w(f" {{{print_attr_entries(others)}}}")
        self.w(" : " + self.functional_type(op))

    def region(self, region: Region, entry_args: bool = True) -> None:
        """``{`` blocks ``}``; the entry block's label is printed only when it has
        arguments and ``entry_args`` is set."""
        self.w("{\n")
        for index, block in enumerate(region.blocks):
            if index or (entry_args and block.arguments):
                self._block_label(block)
            self.block_ops(block)
        self.w(self.indent + "}")

    def _block_label(self, block: Block) -> None:
        label = self.names.block_labels[block]
        if block.arguments:
            args = ", ".join(f"{self.v(a)}: {self.t(a.type)}" for a in block.arguments)
            label += f"({args})"
        self.w(f"{self.indent}{label}:\n")

    def block_ops(self, block: Block) -> None:
        outer = self.indent
        self.indent = outer + "  "
        for op in block.operations:
            self.print_op(op)
            self.w("\n")
        self.indent = outer

    def text(self) -> str:
        return "".join(self.out)


def print_module(module: Module, generic: bool = False, *, generic_dialects=()) -> str:
    """MLIR text of ``module`` (ends with a newline).

    ``generic_dialects`` names dialects whose ops are printed in generic form even in pretty
    mode (e.g. ``("check",)`` for tools that do not know the check dialect).
    """
    printer = Printer(module.op, generic, generic_dialects)
    printer.print_op(module.op)
    return printer.text() + "\n"


def print_op(op: Operation, generic: bool = False) -> str:
    """One op (and its regions); value names are numbered from this op."""
    printer = Printer(op, generic)
    printer.print_op(op)
    return printer.text()


__all__ = ["Printer", "print_attribute", "print_module", "print_op", "print_type"]
