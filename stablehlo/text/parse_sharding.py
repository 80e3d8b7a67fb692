"""Reading sharding attributes into the model of stablehlo/ir/sharding.py.

``ShardingParser`` is a mixin over ``Cursor`` that the attribute parser uses for

    #sdy.mesh<["x"=4, "y"=2], device_ids=[...]>
    #sdy.sharding<@mesh, [{"x", ?}, {"y":(1)2}p1, {}], replicated={"z"}, unreduced={"w"}>
    #sdy.sharding_per_value<[<@mesh, [{}]>, ...]>
    #sdy<manual_axes{"x", "y"}>

and for the content of an ``mhlo.sharding`` string (XLA's ``HloSharding`` text):

    {replicated}  {manual}  {unknown}  {maximal device=0}
    {devices=[2,1]0,1}  {devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}
    {devices=[2,1,2]<=[4] last_tile_dims={manual}}  {{replicated}, {maximal device=1}}

Each attribute keeps its source text for printing. A malformed sharding is a ParseError at
its place; whether a well-formed one is supported is for the pass that reads it to say.
``read_*`` parse one attribute given on its own (tools and passes that hold the text).
"""
from __future__ import annotations

import math

import numpy as np

from stablehlo.errors import ParseError
from stablehlo.ir.sharding import (GspmdSharding, GspmdShardingAttr, ManualAxesAttr, Mesh,
                                   MeshAttr, ShardingAttr, ShardingError, ShardingPerValueAttr,
                                   SubAxis, TensorSharding, TileAssignment)
from stablehlo.text.cursor import Cursor
from stablehlo.text.lexer import EOF, tokenize

MESH = "#sdy.mesh"
SHARDING = "#sdy.sharding"
PER_VALUE = "#sdy.sharding_per_value"
SDY = "#sdy"
MANUAL_AXES = "manual_axes"
GSPMD_KEY = "mhlo.sharding"


class ShardingParser(Cursor):
    """Mixin: the sharding attributes (see the module docstring)."""

    def parse_sdy_attribute(self):
        """The ``#sdy...`` attribute at the current token, None when it is not one of the
        sharding attributes (the caller keeps it verbatim)."""
        start, head = self.i, self.text
        if head == SDY and self.peek_text() == "<" and self.peek_text(2) == MANUAL_AXES:
            self.i += 2
            self.keyword(MANUAL_AXES)
            axes = self.parse_axis_set(f"in '{SDY}<{MANUAL_AXES}'")
            self.expect(">", f"to close '{SDY}<{MANUAL_AXES}'")
            return ManualAxesAttr(self.source_since(start), tuple(axes))
        if head not in (MESH, SHARDING, PER_VALUE):
            return None
        self.i += 1
        if head == MESH:
            mesh = self.parse_mesh_body()
            return MeshAttr(self.source_since(start), mesh)
        if head == SHARDING:
            sharding = self.parse_sharding_body()
            return ShardingAttr(self.source_since(start), sharding)
        self.expect("<", f"after '{head}'")
        shardings = self.parse_sharding_list()
        self.expect(">", f"to close '{head}'")
        return ShardingPerValueAttr(self.source_since(start), shardings)

    # -- Shardy ----------------------------------------------------------------------------
    def parse_mesh_body(self) -> Mesh:
        """``<["x"=4, "y"=2]>`` or ``<["x"=2], device_ids=[1, 0]>``."""
        start = self.i
        self.expect("<", "to start a mesh")
        self.expect("[", "to start mesh axes")
        axes = self.comma_list(self._sharding_mesh_axis, "]", "in mesh axes")
        device_ids = None
        if self.accept(","):
            self.keyword("device_ids", "in mesh")
            self.expect("=", "after 'device_ids'")
            self.expect("[", "to start device_ids")
            device_ids = tuple(self.comma_list(lambda: self.integer("in device_ids"), "]",
                                               "in device_ids"))
        self.expect(">", "to close the mesh")
        try:
            return Mesh(tuple(axes), device_ids)
        except ShardingError as exc:
            raise self.error_at(start, str(exc)) from None

    def _sharding_mesh_axis(self) -> tuple:
        name = self._sharding_axis_name("in mesh axes")
        self.expect("=", f"after mesh axis \"{name}\"")
        return name, self.integer(f"as the size of mesh axis \"{name}\"")

    def parse_sharding_body(self) -> TensorSharding:
        """``<@mesh, [{"x"}, {}], replicated={"y"}, unreduced={"z"}>`` (or ``mesh<...>``
        spelled out in place of ``@mesh``)."""
        self.expect("<", "to start a sharding")
        mesh_name, inline = "", None
        if self.kind == "symbol":
            mesh_name = self.parse_symbol_ref().name
        elif self.text == "mesh" and self.peek_text() == "<":
            self.i += 1
            inline = self.parse_mesh_body()
        else:
            raise self.error(f"expected '@mesh' or 'mesh<...>' in sharding, found "
                             f"{self.found()}")
        self.expect(",", "after the mesh of a sharding")
        self.expect("[", "to start the dimension shardings")
        dims = self.comma_list(self._sharding_dimension, "]", "in dimension shardings")
        named = {"replicated": (), "unreduced": ()}
        while self.accept(","):
            token = self.i
            key = self.ident("'replicated' or 'unreduced'", "in sharding")
            if key not in named:
                raise self.error_at(token, f"unknown sharding field '{key}' (known: "
                                           f"replicated, unreduced)")
            self.expect("=", f"after '{key}'")
            named[key] = tuple(self.parse_axis_set(f"in '{key}'"))
        self.expect(">", "to close the sharding")
        return TensorSharding(mesh_name, tuple(dims), named["replicated"], named["unreduced"],
                              inline)

    def _sharding_dimension(self) -> tuple:
        """``{"x", "y"}``, ``{"x", ?}``, ``{?}``, each maybe with a priority ``p1``."""
        self.expect("{", "to start a dimension sharding")
        axes: list = []
        while not self.accept("}"):
            if self.accept("?"):
                self.expect("}", "after '?' (an open dimension ends its axes)")
                break
            axes.append(self._sharding_axis())
            if not self.at("}"):
                self.expect(",", "between the axes of a dimension")
        if self.kind == "ident" and self.text[:1] == "p" and self.text[1:].isdigit():
            self.i += 1  # a priority only orders propagation
        return tuple(axes)

    def parse_axis_set(self, context: str) -> list:
        """``{"x", "y"}`` -> ["x", "y"]."""
        self.expect("{", f"to start axes {context}")
        return self.comma_list(self._sharding_axis, "}", context)

    def _sharding_axis(self):
        name = self._sharding_axis_name("in sharding axes")
        if not self.accept(":"):
            return name
        self.expect("(", f"after '\"{name}\":' (a sub-axis)")
        pre_size = self.integer("as a sub-axis pre-size")
        self.expect(")", "after a sub-axis pre-size")
        return SubAxis(name, pre_size, self.integer("as a sub-axis size"))

    def _sharding_axis_name(self, context: str) -> str:
        token = self.expect_kind("string", "a quoted axis name", context)
        return token[1:-1]

    def parse_sharding_list(self) -> tuple:
        """``[<@mesh, [...]>, ...]``."""
        self.expect("[", "to start a sharding list")
        return tuple(self.comma_list(self.parse_sharding_body, "]", "in sharding list"))

    # -- GSPMD -----------------------------------------------------------------------------
    def parse_gspmd_sharding(self) -> GspmdSharding:
        self.enter("mhlo.sharding")
        try:
            self.expect("{", "to start an mhlo.sharding")
            if self.at("{") or self.at("}"):
                elements = self.comma_list(self.parse_gspmd_sharding, "}",
                                           "in a tuple mhlo.sharding")
                return GspmdSharding("tuple", elements=tuple(elements))
            return self._gspmd_body()
        finally:
            self.leave()

    def _gspmd_body(self) -> GspmdSharding:
        token = self.i
        word = self.ident("a sharding kind", "in mhlo.sharding")
        if word in ("replicated", "manual", "unknown"):
            sharding = GspmdSharding(word)
        elif word == "maximal":
            self.keyword("device", "after 'maximal'")
            self.expect("=", "after 'device'")
            sharding = GspmdSharding("maximal", device=self.integer("as the device"))
        elif word == "devices":
            sharding = self._gspmd_tiled()
        else:
            raise self.error_at(token, f"unknown mhlo.sharding kind '{word}' (known: "
                                       f"replicated, manual, unknown, maximal, devices)")
        self._skip_sharding_metadata()
        self.expect("}", "to close the mhlo.sharding")
        return sharding

    def _gspmd_tiled(self) -> GspmdSharding:
        start = self.i
        self.expect("=", "after 'devices'")
        dims = self._sharding_int_list("in the tile shape")
        count = math.prod(dims)
        if self.accept("<"):
            self.expect("=", "in '<=' (an iota device list)")
            reshape = self._sharding_int_list("in the iota shape")
            if math.prod(reshape) != count:
                raise self.error_at(start, f"iota shape {reshape} does not hold the "
                                           f"{count} devices of tile shape {dims}")
            iota = np.arange(count).reshape(reshape)
            if self.at("T"):
                self.i += 1
                self.expect("(", "after 'T'")
                perm = self.comma_list(lambda: self.integer("in a transpose"), ")",
                                       "in a transpose")
                if sorted(perm) != list(range(len(reshape))):
                    raise self.error_at(start, f"transpose {perm} is not a permutation of "
                                               f"the iota's {len(reshape)} dimension(s)")
                iota = iota.transpose(perm)
            devices = iota.reshape(dims)
        else:
            ids = [self.integer("in the device list")]
            while self.accept(","):
                ids.append(self.integer("in the device list"))
            if len(ids) != count:
                raise self.error_at(start, f"{len(ids)} device(s) for tile shape {dims} "
                                           f"({count} tiles)")
            devices = np.array(ids).reshape(dims)
        last: tuple = ()
        if self.at("last_tile_dim_replicate"):
            self.i += 1
            last = ("replicated",)
        elif self.at("last_tile_dims"):
            self.i += 1
            self.expect("=", "after 'last_tile_dims'")
            self.expect("{", "to start 'last_tile_dims'")
            last = tuple(self.comma_list(lambda: self.ident("a subgroup kind"), "}",
                                         "in 'last_tile_dims'"))
        tiles = TileAssignment(False, devices, last == ("replicated",))
        return GspmdSharding("tiled", tiles, last_tile_dims=last)

    def _sharding_int_list(self, context: str) -> list:
        self.expect("[", f"to start a list {context}")
        return self.comma_list(lambda: self.integer(context), "]", context)

    def _skip_sharding_metadata(self) -> None:
        """``metadata={op_name="..."}`` says where a sharding came from; not kept."""
        if self.at("metadata") and self.peek_text() == "=":
            self.i += 2
            self.skip_balanced()

    def gspmd_sharding_attr(self, value: str, token: int) -> GspmdShardingAttr:
        """The ``mhlo.sharding`` string ``value`` read from the string token ``token``;
        a malformed one is a ParseError at its place inside the string."""
        try:
            return GspmdShardingAttr(value, read_gspmd_sharding(value))
        except ParseError as exc:
            # The string's content starts one column after its opening quote.
            line, col = self.tokens.line_col(self.starts[token])
            raise ParseError(f"in mhlo.sharding: {exc.reason}", self.tokens.filename,
                             line, col + max(exc.col, 1)) from None


def _read(text: str, parse):
    # The attribute parser (which uses this mixin) knows symbol names and every attribute.
    from stablehlo.text.parse_attributes import AttributeParser
    parser = AttributeParser(tokenize(text, "<sharding>"))
    value = parse(parser)
    if parser.kind != EOF:
        raise parser.error(f"expected end of sharding, found {parser.found()}")
    return value


def read_sdy_attribute(text: str):
    """One ``#sdy.mesh``, ``#sdy.sharding``, ``#sdy.sharding_per_value`` or
    ``#sdy<manual_axes...>`` attribute (ParseError if it is none of them or malformed)."""
    def parse(parser):
        attr = parser.parse_sdy_attribute()
        if attr is None:
            raise parser.error(f"expected a sharding attribute, found {parser.found()}")
        return attr
    return _read(text, parse)


def read_gspmd_sharding(text: str) -> GspmdSharding:
    """The content of an ``mhlo.sharding`` string."""
    return _read(text, ShardingParser.parse_gspmd_sharding)


def sharding_of(attr) -> TensorSharding:
    """The model of an ``sdy.sharding`` attribute: a parsed one carries it; a plain
    ``OpaqueAttr`` that a pass built from text is read (ParseError if it is no sharding)."""
    if isinstance(attr, ShardingAttr):
        return attr.sharding
    parsed = read_sdy_attribute(str(attr))
    if not isinstance(parsed, ShardingAttr):
        raise ParseError(f"expected '{SHARDING}<...>', found {str(attr)!r}")
    return parsed.sharding
