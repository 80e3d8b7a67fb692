"""Values, operations, blocks, regions and modules.

The IR is a plain mutable graph in the MLIR shape:

* a ``Value`` is an op result or a block argument; it has a ``type`` and knows
  its ``owner`` (the Operation or Block) and ``index``;
* an ``Operation`` has a ``name`` (``stablehlo.add``), ``operands``,
  ``results``, an ordered ``attributes`` dict (inherent and discardable alike:
  the op registry knows which are inherent and prints them as properties),
  ``regions`` and a source ``location``;
* a ``Region`` is a list of ``Block``s; a ``Block`` has arguments and ops.

Regions may use values defined in enclosing regions (implicit capture).
A ``Module`` wraps the ``builtin.module`` operation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional

from stablehlo.ir.attributes import Attribute, DictAttr, StringAttr, TypeAttr, ArrayAttr
from stablehlo.ir.types import FunctionType, Type


@dataclass(frozen=True)
class Location:
    """Where an op came from in source text (1-based line and column)."""
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


class Value:
    __slots__ = ("type", "owner", "index", "name_hint")

    def __init__(self, type: Type, owner, index: int, name_hint: str | None = None):
        self.type = type
        self.owner = owner  # Operation (result) or Block (argument)
        self.index = index
        self.name_hint = name_hint

    @property
    def is_block_argument(self) -> bool:
        return isinstance(self.owner, Block)

    def __repr__(self) -> str:
        kind = "arg" if self.is_block_argument else "result"
        owner = "block" if self.is_block_argument else self.owner.name
        return f"<Value {kind}#{self.index} of {owner}: {self.type}>"


_OPS = None  # stablehlo.ir.ops.OPS, bound by Operation.opdef


class Operation:
    __slots__ = ("name", "operands", "results", "attributes", "regions",
                 "location", "parent")

    def __init__(self, name: str, operands=(), result_types=(), attributes=None,
                 regions=(), location: Optional[Location] = None):
        self.name = name
        self.operands: list[Value] = list(operands)
        self.results: list[Value] = [Value(t, self, i) for i, t in enumerate(result_types)]
        self.attributes: dict[str, Attribute] = dict(attributes or {})
        self.regions: list[Region] = []
        for region in regions:
            self.add_region(region)
        self.location = location
        self.parent: Optional[Block] = None

    def add_region(self, region: "Region") -> "Region":
        region.parent = self
        self.regions.append(region)
        return region

    @property
    def result(self) -> Value:
        if len(self.results) != 1:
            raise ValueError(f"{self.name} has {len(self.results)} results, not 1")
        return self.results[0]

    @property
    def result_types(self) -> list[Type]:
        return [r.type for r in self.results]

    @property
    def operand_types(self) -> list[Type]:
        return [v.type for v in self.operands]

    @property
    def dialect(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def opdef(self):
        """The op's registry entry, or None for an unregistered op."""
        global _OPS
        if _OPS is None:  # imported on first use: the op registry imports this module
            from stablehlo.ir.ops import OPS as _OPS
        return _OPS.lookup(self.name)

    def attr(self, name: str, default=None):
        return self.attributes.get(name, default)

    def walk(self) -> Iterator["Operation"]:
        """This op and every op nested in its regions, in pre-order."""
        yield self
        for region in self.regions:
            yield from region.walk()

    def where(self) -> str:
        """``file:line:col: 'stablehlo.add'`` for error messages."""
        loc = f"{self.location}: " if self.location else ""
        return f"{loc}'{self.name}'"

    def __repr__(self) -> str:
        return f"<Operation {self.name} at {self.location}>"


class Block:
    __slots__ = ("arguments", "operations", "parent")

    def __init__(self, arg_types=(), operations=()):
        self.arguments: list[Value] = [Value(t, self, i) for i, t in enumerate(arg_types)]
        self.operations: list[Operation] = []
        self.parent: Optional[Region] = None
        for op in operations:
            self.append(op)

    def add_argument(self, type: Type) -> Value:
        value = Value(type, self, len(self.arguments))
        self.arguments.append(value)
        return value

    def append(self, op: Operation) -> Operation:
        op.parent = self
        self.operations.append(op)
        return op

    @property
    def terminator(self) -> Optional[Operation]:
        return self.operations[-1] if self.operations else None

    def walk(self) -> Iterator[Operation]:
        """The ops of this block and every op nested in their regions, in pre-order."""
        for op in self.operations:
            yield from op.walk()


class Region:
    __slots__ = ("blocks", "parent")

    def __init__(self, blocks=()):
        self.blocks: list[Block] = []
        self.parent: Optional[Operation] = None
        for block in blocks:
            self.add_block(block)

    def add_block(self, block: Block) -> Block:
        block.parent = self
        self.blocks.append(block)
        return block

    @property
    def block(self) -> Block:
        """The single block of a single-block region."""
        if len(self.blocks) != 1:
            raise ValueError(f"region has {len(self.blocks)} blocks, not 1")
        return self.blocks[0]

    def walk(self) -> Iterator[Operation]:
        """Every op of this region's blocks, nested ones included, in pre-order."""
        for block in self.blocks:
            yield from block.walk()


class Func:
    """View of a ``func.func`` operation with typed accessors."""

    def __init__(self, op: Operation):
        if op.name != "func.func":
            raise ValueError(f"not a func.func: {op.name}")
        self.op = op

    @property
    def name(self) -> str:
        return self.op.attributes["sym_name"].value

    @property
    def type(self) -> FunctionType:
        return self.op.attributes["function_type"].type

    @property
    def visibility(self) -> str:
        vis = self.op.attributes.get("sym_visibility")
        return vis.value if isinstance(vis, StringAttr) else "public"

    @property
    def body(self) -> Optional[Block]:
        region = self.op.regions[0] if self.op.regions else None
        return region.blocks[0] if region and region.blocks else None

    def walk(self) -> Iterator[Operation]:
        """Every op of the body, nested ones (in regions of reduce, while, ...) included, in
        pre-order; the ``func.func`` op itself (``self.op``) is not among them."""
        return self.op.regions[0].walk() if self.op.regions else iter(())

    def arg_attrs(self, index: int) -> DictAttr:
        return _nth_dict(self.op.attributes.get("arg_attrs"), index)

    def result_attrs(self, index: int) -> DictAttr:
        return _nth_dict(self.op.attributes.get("res_attrs"), index)


def _nth_dict(attr, index: int) -> DictAttr:
    if isinstance(attr, ArrayAttr) and index < len(attr.values):
        return attr.values[index]
    return DictAttr()


def make_func(name: str, function_type: FunctionType, *, visibility: str | None = None,
              arg_attrs=None, res_attrs=None) -> Operation:
    """A ``func.func`` op with an entry block whose arguments match the type."""
    attrs: dict[str, Attribute] = {"sym_name": StringAttr(name),
                                   "function_type": TypeAttr(function_type)}
    if visibility is not None and visibility != "public":
        attrs["sym_visibility"] = StringAttr(visibility)
    if arg_attrs and any(d.items for d in arg_attrs):
        attrs["arg_attrs"] = ArrayAttr(tuple(arg_attrs))
    if res_attrs and any(d.items for d in res_attrs):
        attrs["res_attrs"] = ArrayAttr(tuple(res_attrs))
    return Operation("func.func", attributes=attrs,
                     regions=[Region([Block(function_type.inputs)])])


class Module:
    """A ``builtin.module``: its attributes and top-level ops (funcs, sdy.mesh, ...)."""

    def __init__(self, op: Optional[Operation] = None):
        if op is None:
            op = Operation("builtin.module", regions=[Region([Block()])])
        if op.name != "builtin.module":
            raise ValueError(f"not a builtin.module: {op.name}")
        self.op = op

    @property
    def body(self) -> Block:
        return self.op.regions[0].blocks[0]

    @property
    def name(self) -> Optional[str]:
        sym = self.op.attributes.get("sym_name")
        return sym.value if isinstance(sym, StringAttr) else None

    @property
    def attributes(self) -> dict:
        return self.op.attributes

    def functions(self) -> list[Func]:
        return [Func(op) for op in self.body.operations if op.name == "func.func"]

    def lookup(self, name: str) -> Func:
        for func in self.functions():
            if func.name == name:
                return func
        raise KeyError(f"no function @{name} in module")

    def has_function(self, name: str) -> bool:
        return any(f.name == name for f in self.functions())

    def walk(self) -> Iterator[Operation]:
        return self.op.walk()

    def __str__(self) -> str:
        from stablehlo.text.printer import print_module
        return print_module(self)
