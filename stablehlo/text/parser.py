"""MLIR text -> Module: operations, regions, blocks and SSA names.

The parser is recursive descent over the token stream of lexer.py, assembled from mixins:
types (parse_types.py), dense literals (parse_dense.py), attributes (parse_attributes.py), and
this file's ``Parser`` for operations. Pretty (custom) op syntax is delegated to the op's entry
in ``formats.FORMATS``, named by ``OpDef.syntax``; those entries call back into the helpers here
(``parse_operand``, ``resolve``, ``parse_region``, ...).

What is checked here (no verification beyond what parsing needs): every SSA use refers to a
defined value, a use's written type equals the value's type, the number of written types
matches the number of operands/results, and custom ops are known.

``loc(...)`` trailers and ``#loc = loc(...)`` alias lines are parsed and dropped; ops get the
``Location`` of their text instead.
"""
from __future__ import annotations

from typing import NamedTuple

from stablehlo.errors import ParseError
from stablehlo.ir.attributes import Attribute
from stablehlo.ir.core import Block, Location, Module, Operation, Region, Value
from stablehlo.ir.ops import OPS
from stablehlo.ir.types import FunctionType, Type
from stablehlo.text.lexer import EOF, tokenize
from stablehlo.text.parse_attributes import AttributeParser, unescape_string


class OperandRef(NamedTuple):
    """A parsed ``%name`` or ``%name#3`` not yet resolved to a Value."""
    name: str
    index: int
    token: int  # token index, for messages


class Parser(AttributeParser):
    def __init__(self, text: str, filename: str = "<string>"):
        super().__init__(tokenize(text, filename))
        self.filename = filename
        self.type_aliases: dict[str, Type] = {}
        self.attr_aliases: dict[str, Attribute] = {}
        # one dict per open region: SSA name -> tuple of Values (a result group)
        self.scopes: list[dict[str, tuple]] = [{}]

    # -- module level --------------------------------------------------------------------
    def parse_module(self) -> Module:
        block = Block()
        while self.kinds[self.i] != EOF:
            if self._try_alias_definition():
                continue
            block.append(self.parse_operation())
        ops = block.operations
        if len(ops) == 1 and ops[0].name == "builtin.module":
            ops[0].parent = None
            return Module(ops[0])
        module = Module()
        for op in ops:
            module.body.append(op)
        return module

    def _try_alias_definition(self) -> bool:
        """``#name = attr`` / ``!name = type`` at top level."""
        kind = self.kinds[self.i]
        if kind not in ("hash", "bang") or self.peek_text() != "=":
            return False
        name = self.advance()
        self.advance()
        if kind == "hash":
            self.attr_aliases[name] = self.parse_attribute(f"for alias '{name}'")
        else:
            self.type_aliases[name] = self.parse_type(f"for alias '{name}'")
        return True

    # -- operations ----------------------------------------------------------------------
    def location(self, index: int) -> Location:
        line, col = self.tokens.line_col(self.starts[index])
        return Location(self.filename, line, col)

    def parse_operation(self) -> Operation:
        start = self.i
        results = self._parse_result_names()
        num_results = sum(count for _, count, _ in results)
        kind = self.kinds[self.i]
        loc = self.location(start)
        if kind == "string":
            op = self._parse_generic_op(loc)
        elif kind == "ident":
            op = self._parse_custom_op(loc, num_results)
        else:
            raise self.error(f"expected operation name, found {self.found()}")
        self.skip_location()
        self._bind_results(results, op, start)
        return op

    def _parse_result_names(self) -> list:
        names = []
        if self.kinds[self.i] != "value":
            return names
        while True:
            token = self.i
            text = self.expect_kind("value", "result name")
            if "#" in text:
                raise self.error_at(token, "result names cannot use '#'")
            count = 1
            if self.accept(":"):
                count = self.integer("as result count")
                if count < 1:
                    raise self.error_at(self.i - 1, "result count must be positive")
            names.append((text, count, token))
            if not self.accept(","):
                break
        self.expect("=", "after result names")
        return names

    def _bind_results(self, results: list, op: Operation, start: int) -> None:
        if not results:
            return
        total = sum(count for _, count, _ in results)
        if total != len(op.results):
            raise self.error_at(start, f"operation defines {len(op.results)} results but was "
                                       f"provided {total} to bind")
        position = 0
        for name, count, token in results:
            self.define(name, tuple(op.results[position:position + count]), token)
            position += count

    def _parse_custom_op(self, loc: Location, num_results: int) -> Operation:
        token = self.i
        written = self.advance()
        name = written
        if "." not in written:
            name = f"func.{written}" if f"func.{written}" in OPS else f"builtin.{written}"
        from stablehlo.text.formats import lookup_format
        fmt = lookup_format(name)
        if fmt is None:
            if name in OPS:
                raise self.error_at(token, f"'{name}' has no custom syntax; write it in "
                                           f"generic form (\"{name}\"(...))")
            raise self.error_at(token, f"custom op '{written}' is unknown")
        return fmt.parse(self, name, loc, num_results)

    def _parse_generic_op(self, loc: Location) -> Operation:
        name_token = self.i
        name = unescape_string(self.advance())
        op = self.parse_generic_body(name, loc)
        if name == "builtin.module" and not op.regions:
            raise self.error_at(name_token, "'builtin.module' needs a region")
        return op

    def parse_generic_body(self, name: str, loc: Location) -> Operation:
        """``(operands) <{props}> ({regions}) {attrs} : (types) -> results``."""
        self.expect("(", f"to start operands of '{name}'")
        refs = self.comma_list(self.parse_operand, ")", f"in operands of '{name}'")
        if self.at("["):
            raise self.error("block successors are not supported")
        attrs: dict = {}
        if self.at("<") and self.peek_text() == "{":
            self.advance()
            attrs.update(self.parse_attr_dict())
            self.expect(">", "to close properties")
        regions = []
        if self.at("(") and self.peek_text() == "{":
            self.advance()
            regions = self.comma_list(self.parse_region, ")", f"in regions of '{name}'")
        if self.at("{"):
            for key, value in self.parse_attr_dict().items():
                if key in attrs:
                    raise self.error(f"attribute '{key}' given both as property and attribute")
                attrs[key] = value
        self.expect(":", f"after operands of '{name}'")
        type_token = self.i
        ftype = self.parse_type(f"of '{name}'")
        if not isinstance(ftype, FunctionType):
            raise self.error_at(type_token, f"expected function type for '{name}', got {ftype}")
        operands = self.resolve_all(refs, ftype.inputs, type_token, name)
        return Operation(name, operands, ftype.results, attrs, regions, loc)

    # -- operands ------------------------------------------------------------------------
    def parse_operand(self) -> OperandRef:
        token = self.i
        text = self.expect_kind("value", "SSA value")
        name, _, index = text.partition("#")
        return OperandRef(name, int(index) if index else 0, token)

    def parse_operands(self) -> list[OperandRef]:
        """Zero or more ``%a, %b`` (stops before anything that is not a value)."""
        refs = []
        if self.kinds[self.i] != "value":
            return refs
        refs.append(self.parse_operand())
        while self.at(",") and self.kinds[self.i + 1] == "value":
            self.i += 1
            refs.append(self.parse_operand())
        return refs

    def lookup(self, ref: OperandRef) -> Value:
        """The Value a reference names (no type check)."""
        for scope in reversed(self.scopes):
            group = scope.get(ref.name)
            if group is not None:
                if ref.index >= len(group):
                    raise self.error_at(ref.token, f"result number {ref.index} of "
                                                   f"'{ref.name}' out of range "
                                                   f"({len(group)} results)")
                return group[ref.index]
        shown = ref.name if not ref.index else f"{ref.name}#{ref.index}"
        raise self.error_at(ref.token, f"use of undefined value '{shown}'")

    def resolve(self, ref: OperandRef, typ: Type) -> Value:
        """The Value ``ref`` names, checking that its type is ``typ``."""
        value = self.lookup(ref)
        if value.type != typ:
            raise self.error_at(ref.token, f"use of value '{ref.name}' expects different type "
                                           f"than prior uses: '{typ}' vs '{value.type}'")
        return value

    def resolve_all(self, refs, types, type_token: int, name: str) -> list[Value]:
        if len(refs) != len(types):
            raise self.error_at(type_token, f"'{name}' has {len(refs)} operands but "
                                            f"{len(types)} operand types")
        return [self.resolve(r, t) for r, t in zip(refs, types)]

    def define(self, name: str, values: tuple, token: int) -> None:
        scope = self.scopes[-1]
        if name in scope:
            raise self.error_at(token, f"redefinition of SSA value '{name}'")
        scope[name] = values
        hint = name[1:]
        for value in values:
            value.name_hint = hint

    # -- regions and blocks --------------------------------------------------------------
    def parse_region(self, entry_args: list | None = None) -> Region:
        """``{ [^bb0(args):] ops ... }``. ``entry_args`` are (name, type, token) the op's
        custom syntax declared outside the braces; they become the entry block's arguments.
        """
        self.enter("region")
        self.expect("{", "to start region")
        self.scopes.append({})
        try:
            region = Region()
            if self.accept("}"):
                if entry_args:
                    region.add_block(self._new_block(entry_args))
                return region
            if self.kinds[self.i] != "caret":
                block = region.add_block(self._new_block(entry_args or []))
                self._parse_block_body(block)
            elif entry_args:
                raise self.error("region arguments were already given; no block label "
                                 "expected")
            while self.kinds[self.i] == "caret":
                block = region.add_block(self._parse_block_header())
                self._parse_block_body(block)
            self.expect("}", "to close region")
            return region
        finally:
            self.scopes.pop()
            self.leave()

    def _new_block(self, args: list) -> Block:
        block = Block([typ for _, typ, _ in args])
        for (name, _, token), value in zip(args, block.arguments):
            self.define(name, (value,), token)
        return block

    def _parse_block_header(self) -> Block:
        self.advance()  # ^label
        args = []
        if self.accept("("):
            args = self.comma_list(self.parse_typed_argument, ")", "in block arguments")
        self.expect(":", "after block label")
        return self._new_block(args)

    def parse_typed_argument(self) -> tuple:
        """``%name: type [loc(...)]`` -> (name, type, token)."""
        token = self.i
        name = self.expect_kind("value", "argument name")
        self.expect(":", f"after argument '{name}'")
        typ = self.parse_type(f"of argument '{name}'")
        self.skip_location()
        return name, typ, token

    def _parse_block_body(self, block: Block) -> None:
        kinds = self.kinds
        while True:
            kind = kinds[self.i]
            if kind == "caret" or (kind == "punct" and self.texts[self.i] == "}"):
                return
            if kind == EOF:
                raise self.error("expected '}' to close region, found end of input")
            block.append(self.parse_operation())

    # -- small shared pieces -------------------------------------------------------------
    def skip_location(self) -> None:
        """Drop a ``loc(...)`` trailer if present."""
        if self.texts[self.i] == "loc" and self.kinds[self.i] == "ident" \
                and self.peek_text() == "(":
            self.i += 1
            self.skip_balanced()

    def parse_type_list_until_not_comma(self) -> list[Type]:
        """``T, U, V`` with no brackets: types as long as commas follow."""
        types = [self.parse_type()]
        while self.accept(","):
            types.append(self.parse_type())
        return types

    def parse_optional_attr_dict(self) -> dict:
        return self.parse_attr_dict() if self.at("{") else {}

    def parse_functional_or_single(self, refs, name: str):
        """``: T`` (every operand and result has type T) or ``: (Ts) -> R``.

        Returns (operands, result types).
        """
        self.expect(":", f"after operands of '{name}'")
        type_token = self.i
        typ = self.parse_type(f"of '{name}'")
        if isinstance(typ, FunctionType):
            return self.resolve_all(refs, typ.inputs, type_token, name), list(typ.results)
        return [self.resolve(r, typ) for r in refs], [typ]


def parse_module(text: str, filename: str = "<string>") -> Module:
    """Parse MLIR text (pretty or generic) into a Module; see the module docstring."""
    return Parser(text, filename).parse_module()


def parse_type(text: str) -> Type:
    parser = Parser(text)
    typ = parser.parse_type()
    _expect_end(parser)
    return typ


def parse_attribute(text: str) -> Attribute:
    parser = Parser(text)
    attr = parser.parse_attribute()
    _expect_end(parser)
    return attr


def _expect_end(parser: Parser) -> None:
    if parser.kinds[parser.i] != EOF:
        raise parser.error(f"unexpected {parser.found()} after the end")


__all__ = [
    "OperandRef",
    "ParseError",
    "Parser",
    "parse_attribute",
    "parse_module",
    "parse_type",
]
