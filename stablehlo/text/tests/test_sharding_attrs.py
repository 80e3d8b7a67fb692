"""Sharding attributes: both spellings read into one typed model and printed back as written.

The oracle for "equivalent spellings" is JAX itself: each sharding conformance program was
lowered twice by JAX, once with Shardy attributes and once with GSPMD strings, so the two
files must give the same tile assignment for every argument and result.
"""
import pathlib

import numpy as np
import pytest

from stablehlo.errors import ParseError
from stablehlo.ir.attributes import OpaqueAttr, StringAttr
from stablehlo.ir.sharding import (GspmdShardingAttr, ManualAxesAttr, Mesh, MeshAttr,
                                   ShardingAttr, ShardingPerValueAttr, SubAxis, TensorSharding)
from stablehlo.text import parse_module
from stablehlo.text.parse_sharding import read_gspmd_sharding, read_sdy_attribute

HERE = pathlib.Path(__file__).resolve().parent
CONFORMANCE = HERE.parents[2].parent / "shared" / "conformance" / "sharding"
# JAX's sharded programs: the conformance ones print back byte for byte; the two data files
# carry locations (dropped by the parser), so they are checked to print stably.
SHARDED_FILES = sorted(CONFORMANCE.glob("*/lowered_stablehlo.mlir")) + [
    HERE / "data" / "jax_sharded.mlir", HERE / "data" / "jax_shard_map.mlir"]


def _entry_attrs(module):
    func = module.lookup("main")
    return ([func.arg_attrs(i) for i in range(len(func.type.inputs))]
            + [func.result_attrs(i) for i in range(len(func.type.results))],
            list(func.type.inputs) + list(func.type.results))


@pytest.mark.parametrize("path", SHARDED_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sharding_spelling_prints_back_as_written(path):
    text = path.read_text()
    module = parse_module(text, str(path))
    printed = str(module)
    assert _typed_shardings(module)
    if "loc(" not in text:
        assert printed == text
    assert str(parse_module(printed)) == printed
    for spelling in ("sdy.sharding = ", "mhlo.sharding = ", "sdy.mesh @", "in_shardings=["):
        assert printed.count(spelling) == text.count(spelling)


def _typed_shardings(module) -> list:
    found = []
    for op in module.body.walk():
        attrs = list(op.attributes.values())
        for key in ("arg_attrs", "res_attrs"):
            if key in op.attributes:
                attrs += [v for d in op.attributes[key].values for v in d.as_dict().values()]
        found += [a for a in attrs if isinstance(a, (MeshAttr, ShardingAttr, GspmdShardingAttr,
                                                       ShardingPerValueAttr, ManualAxesAttr))]
    return found


def test_conformance_shardings_are_typed_and_equal_across_spellings():
    pairs = sorted(p for p in CONFORMANCE.glob("*_gspmd")) if CONFORMANCE.is_dir() else []
    if not pairs:
        pytest.skip("no sharding conformance programs in this checkout")
    for gspmd_dir in pairs:
        sdy = parse_module((gspmd_dir.parent / gspmd_dir.name[:-len("_gspmd")]
                            / "lowered_stablehlo.mlir").read_text())
        gspmd = parse_module((gspmd_dir / "lowered_stablehlo.mlir").read_text())
        mesh = next(a.mesh for a in _typed_shardings(sdy) if isinstance(a, MeshAttr))
        (sdy_attrs, types), (gspmd_attrs, _) = _entry_attrs(sdy), _entry_attrs(gspmd)
        compared = 0
        for a, b, t in zip(sdy_attrs, gspmd_attrs, types):
            s, g = a.get("sdy.sharding"), b.get("mhlo.sharding")
            if s is None or g is None:
                continue
            assert isinstance(s, ShardingAttr) and isinstance(g, GspmdShardingAttr)
            assert s.sharding.tile_assignment(mesh) == \
                g.sharding.tile_assignment(len(t.shape)), gspmd_dir.name
            compared += 1
        assert compared, gspmd_dir.name


SDY_SPELLINGS = [
    '#sdy.mesh<["data"=4, "model"=2]>',
    '#sdy.mesh<["x"=2], device_ids=[1, 0]>',
    '#sdy.mesh<[], device_ids=[3]>',
    '#sdy.sharding<@mesh, [{"data", "model"}, {?}, {}p1], replicated={"z"}>',
    '#sdy.sharding<@mesh, [{"x":(1)2, ?}, {}], unreduced={"y"}>',
    '#sdy.sharding<mesh<["x"=2]>, [{"x"}]>',
    '#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, []>]>',
    '#sdy<manual_axes{"x", "y"}>',
]


@pytest.mark.parametrize("text", SDY_SPELLINGS)
def test_sdy_attribute_in_an_op_prints_back_exactly(text):
    # Odd spacing must survive too: the attribute keeps its spelling.
    spaced = text.replace(", ", " ,  ")
    program = f'"test.op"() {{a = {spaced}}} : () -> ()\n'
    op = parse_module(program).body.operations[0]
    attr = op.attributes["a"]
    assert not type(attr) is OpaqueAttr and str(attr) == spaced
    assert attr == OpaqueAttr(spaced)  # equal to the plain attribute a pass would build
    assert spaced in str(parse_module(program))


def test_the_model_reads_what_each_spelling_says():
    sharding = read_sdy_attribute(SDY_SPELLINGS[3]).sharding
    assert sharding == TensorSharding("mesh", (("data", "model"), (), ()), ("z",))
    sub = read_sdy_attribute(SDY_SPELLINGS[4]).sharding
    assert sub.dims == ((SubAxis("x", 1, 2),), ()) and sub.unreduced == ("y",)
    inline = read_sdy_attribute(SDY_SPELLINGS[5]).sharding
    assert inline.inline_mesh == Mesh((("x", 2),)) and inline.mesh_name == ""
    assert read_sdy_attribute(SDY_SPELLINGS[2]).mesh.is_maximal
    assert read_sdy_attribute(SDY_SPELLINGS[7]).axes == ("x", "y")
    # what the model prints reads back to the same model
    for model in (sharding, sub, inline):
        assert read_sdy_attribute(str(model)).sharding == model


def test_gspmd_spellings():
    iota = read_gspmd_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}")
    assert iota.tiles.devices.tolist() == [[[0, 2]], [[1, 3]]]
    assert iota.last_tile_dims == ("replicated",)
    explicit = read_gspmd_sharding("{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}")
    assert explicit.tile_assignment(2) == iota.tile_assignment(2)
    assert read_gspmd_sharding("{maximal device=3}").device == 3
    assert read_gspmd_sharding("{devices=[2,2]<=[4] last_tile_dims={manual}}") \
        .last_tile_dims == ("manual",)
    pair = read_gspmd_sharding("{{replicated}, {manual}}")
    assert [e.kind for e in pair.elements] == ["replicated", "manual"]
    # the Shardy spelling of the same layout gives the same tiles
    mesh = Mesh((("a", 2), ("b", 2)))
    assert TensorSharding("m", (("b",), ())).tile_assignment(mesh) == iota.tile_assignment(2)


def test_mhlo_sharding_attribute_is_typed_and_a_string():
    module = parse_module('func.func @main(%a: tensor<4xf32> {mhlo.sharding = '
                          '"{devices=[2]<=[2]}"}) -> tensor<4xf32> {\n'
                          '  return %a : tensor<4xf32>\n}\n')
    attr = module.lookup("main").arg_attrs(0).get("mhlo.sharding")
    assert isinstance(attr, GspmdShardingAttr) and attr == StringAttr("{devices=[2]<=[2]}")
    assert np.array_equal(attr.sharding.tiles.devices, [0, 1])
    assert '{mhlo.sharding = "{devices=[2]<=[2]}"}' in str(module)


@pytest.mark.parametrize("attr,message,col", [
    ('#sdy.sharding<@mesh, [{"x"} {}]>', "expected ',' or ']' in dimension shardings", 29),
    ('#sdy.sharding<@mesh, [{x}]>', "expected a quoted axis name", 24),
    ('#sdy.sharding<@mesh, [{}], other={"x"}>', "unknown sharding field 'other'", 28),
    ('#sdy.mesh<["x"=2], device_ids=[0, 0]>', "permutation", 10),
    ('#sdy<manual_axes{"x",}>', "expected a quoted axis name", 22),
])
def test_malformed_sdy_sharding_is_a_parse_error_at_its_place(attr, message, col):
    with pytest.raises(ParseError, match=message) as info:
        parse_module(f'"test.op"() {{a = {attr}}} : () -> ()\n', "f.mlir")
    assert (info.value.file, info.value.line, info.value.col - len('"test.op"() {a = ')) \
        == ("f.mlir", 1, col)


@pytest.mark.parametrize("value,message,col", [
    ("{devices=[2,1]0}", "1 device.* for tile shape", 9),
    ("{devices=[2]<=[3]}", "iota shape", 9),
    ("{tiled}", "unknown mhlo.sharding kind 'tiled'", 2),
    ("{replicated", "expected '}'", 12),
])
def test_malformed_mhlo_sharding_is_a_parse_error_inside_the_string(value, message, col):
    program = f'"test.op"() {{mhlo.sharding = "{value}"}} : () -> ()\n'
    with pytest.raises(ParseError, match=message) as info:
        parse_module(program, "f.mlir")
    assert info.value.col == program.index(value) + col
