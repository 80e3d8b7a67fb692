"""GSPMD spellings (``mhlo.sharding`` strings) as JAX without Shardy writes them.

JAX is the oracle twice: a subprocess on 8 host cpu devices lowers programs with
``jax_use_shardy_partitioner=False`` (so the strings are the ones real lowerings carry:
partial replication over multi-dimensional tiles, transposed iotas, manual subgroups of a
partially manual shard_map), and reports each argument's ``devices_indices_map``. Every
string prints back exactly and its model reads back from its printed form; on the mesh
inferred for the program, each argument's sharding puts on every device the slices JAX's
says."""
import json
import math
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import stablehlo
from stablehlo.ir.sharding import GspmdShardingAttr
from stablehlo.text.parse_sharding import read_gspmd_sharding
from stablehlo.text import print_module
from stablehlo.text.print_sharding import print_gspmd_sharding
from xla_core.spmd import gspmd
from xla_core.spmd.sharding import ShardingError, SpmdUnsupportedError

pytest.importorskip("jax")

LOWER = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
jax.config.update("jax_use_shardy_partitioner", False)
out = []
def spans(sharding, shape):
    return {str(d.id): [[s.start or 0, n if s.stop is None else s.stop]
                        for s, n in zip(index, shape)]
            for d, index in sharding.devices_indices_map(shape).items()}
for sizes, names, specs in [
        ((8,), ("x",), [("x", None), (None, "x"), ()]),
        ((2, 4), ("a", "b"), [("a", None), (None, "b"), ("b", "a"), (("b", "a"), None),
                              ("b",), (None, ("a", "b"))]),
        ((2, 2, 2), ("x", "y", "z"), [("z", "x"), (("y", "x"), None), (None, ("z", "x")),
                                      ("y",)]),
        ((4, 2), ("p", "q"), [("q", "p"), (None, "q")])]:
    mesh = jax.make_mesh(sizes, names)
    shardings = [NamedSharding(mesh, P(*s)) for s in specs]
    args = [np.zeros((8, 16), np.float32) for _ in specs]
    text = jax.jit(lambda *a: sum(a), in_shardings=shardings).lower(*args).as_text()
    out.append({"text": text, "spans": [spans(s, (8, 16)) for s in shardings]})
mesh = jax.make_mesh((2, 4), ("data", "model"))
def partial(x):
    f = jax.shard_map(lambda v: jax.lax.psum(v, "model"), mesh=mesh, in_specs=P(None, "model"),
                      out_specs=P(), axis_names={"model"})
    return f(x)
text = jax.jit(partial, in_shardings=NamedSharding(mesh, P("data", "model"))).lower(
    np.zeros((8, 16), np.float32)).as_text()
out.append({"text": text, "spans": []})
json.dump(out, sys.stdout)
"""


@pytest.fixture(scope="module")
def lowerings():
    env = dict(os.environ, JAX_PLATFORMS="cpu",
               XLA_FLAGS="--xla_force_host_platform_device_count=8")
    proc = subprocess.run([sys.executable, "-c", LOWER], env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def _strings(text: str) -> list:
    return re.findall(r'mhlo\.sharding = "([^"]*)"', text)


def test_jax_strings_print_back_exactly(lowerings):
    spellings = set()
    for lowering in lowerings:
        text = lowering["text"]
        printed = print_module(stablehlo.parse(text))
        for string in _strings(text):
            assert f'mhlo.sharding = "{string}"' in printed
            model = read_gspmd_sharding(string)
            again = read_gspmd_sharding(print_gspmd_sharding(model))
            assert again == model, string
            spellings.add(re.sub(r"\d", "N", string))
    # the lowerings do carry the spellings this module is about
    joined = " ".join(spellings)
    for spelling in ("last_tile_dim_replicate", "T(", "last_tile_dims={manual, replicated}",
                     "{replicated}"):
        assert spelling in joined, spelling


def _slices(mesh, sharding, shape) -> dict:
    """Logical device id -> [[start, stop] per dimension] of its piece."""
    devices = mesh.devices()
    out = {}
    for index in np.ndindex(devices.shape):
        coordinate = dict(zip(mesh.names, index))
        piece = []
        for axes, extent in zip(sharding.dims, shape):
            tile, count = 0, 1
            for axis in axes:  # major to minor
                size = mesh.axis_size(axis)
                tile, count = tile * size + coordinate[axis], count * size
            step = extent // count
            piece.append([tile * step, (tile + 1) * step])
        out[str(int(devices[index]))] = piece
    return out


def test_shardings_put_on_each_device_what_jax_says(lowerings):
    checked = 0
    for lowering in lowerings:
        if not lowering["spans"]:
            continue
        func = stablehlo.parse(lowering["text"]).lookup("main")
        found = []
        for i, t in enumerate(func.type.inputs):
            attr = func.arg_attrs(i).get("mhlo.sharding")
            assert isinstance(attr, GspmdShardingAttr)
            found.append((attr.sharding, len(t.shape), f"argument {i}"))
        mesh = gspmd.infer_mesh(found, 8)
        assert mesh.size == 8
        for (sharding, rank, where), spans in zip(found, lowering["spans"]):
            ours, manual = gspmd.tensor_sharding("mesh", mesh, sharding, rank, where)
            assert manual == ()
            assert _slices(mesh, ours, (8, 16)) == spans, (str(sharding), mesh)
            checked += 1
    assert checked == 15


def test_a_2x4_program_gets_a_2x4_mesh(lowerings):
    func = stablehlo.parse(lowerings[1]["text"]).lookup("main")
    found = [(func.arg_attrs(i).get("mhlo.sharding").sharding, 2, "") for i in range(6)]
    assert gspmd.infer_mesh(found, 8).axes == (("gspmd_0", 2), ("gspmd_1", 4))


def test_partially_manual_shard_map_becomes_a_manual_computation(lowerings):
    module = stablehlo.parse(lowerings[-1]["text"])
    _run("spmd-manual{leave-automatic=true},inline,sharding-propagation", module)
    text = print_module(module)
    assert "SPMDFullToShardShape" not in text and "SPMDShardToFullShape" not in text
    manual = [op for op in module.lookup("main").op.walk()
              if op.name == "sdy.manual_computation"]
    assert len(manual) == 1
    # the (2, 4) mesh's minor axis, "model", is the manual one
    assert manual[0].attributes["manual_axes"].axes == ("gspmd_1",)
    assert 'in_shardings=[<@mesh, [{}, {"gspmd_1"}]>]' in text


def _run(passes: str, module) -> None:
    from xla_core.passes import PassContext, Pipeline, parse_pass_list
    Pipeline("test", parse_pass_list(passes)).run(module, PassContext())


def _sharding(text):
    return read_gspmd_sharding(text)


@pytest.mark.parametrize("text, rank, message", [
    ("{maximal device=3}", 2, r"'maximal' \(the whole value on device 3 only\)"),
    ("{devices=[2,2]0,3,1,2}", 2, "no transposed iota of the device ids"),
    ("{devices=[2,2]<=[4] last_tile_dims={unknown}}", 1,
     "last_tile_dims kind 'unknown' is not supported"),
    ("{{replicated}, {replicated}}", 1, "a tuple sharding on a value that is no tuple"),
])
def test_what_stays_unsupported_is_named(text, rank, message):
    with pytest.raises(SpmdUnsupportedError, match=message) as info:
        gspmd.infer_mesh([(_sharding(text), rank, "@main argument 0")], 4)
    assert str(info.value).startswith("@main argument 0: mhlo.sharding")


def test_rank_mismatch_names_the_subgroups():
    with pytest.raises(ShardingError, match="3 tile dimension.* rank 1 and 1 subgroup"):
        gspmd.infer_mesh([(_sharding("{devices=[2,1,2]<=[4] last_tile_dim_replicate}"), 1,
                           "x")], 4)


def test_shardings_with_no_common_mesh_are_refused_naming_both():
    a = (_sharding("{devices=[2,3]<=[6]}"), 2, "@main argument 0")
    b = (_sharding("{devices=[2,3]<=[3,2]T(1,0)}"), 2, "@main argument 1")
    with pytest.raises(SpmdUnsupportedError, match="no one mesh.*argument 1.*argument 0|"
                                                   "no one mesh.*argument 0.*argument 1"):
        gspmd.infer_mesh([a, b], 6)
    assert math.prod(s for _, s in gspmd.infer_mesh([a], 6).axes) == 6


def test_sub_axis_layouts_are_refused_naming_the_dimension():
    from stablehlo.ir.sharding import Mesh
    mesh = Mesh((("gspmd", 4),))
    with pytest.raises(SpmdUnsupportedError, match="tile dimension 0 .*sub-axes"):
        gspmd.tensor_sharding("mesh", mesh, _sharding("{devices=[2,1,2]<=[4] "
                                                      "last_tile_dim_replicate}"), 2, "here")


def test_manual_subgroup_outside_a_shard_map_is_refused():
    module = stablehlo.parse("""
func.func public @main(%a: tensor<8x8xf32>
    {mhlo.sharding = "{devices=[2,1,2]<=[4] last_tile_dims={manual}}"}) -> tensor<8x8xf32> {
  return %a : tensor<8x8xf32>
}
""")
    with pytest.raises(SpmdUnsupportedError, match=r"@main argument 0: .*manual subgroup"):
        _run("sharding-propagation", module)


def test_a_tuple_sharding_gives_each_result_its_element():
    from stablehlo.text import print_module as show
    module = stablehlo.parse("""
func.func public @main(%a: tensor<8x8xf32>, %b: tensor<8x8xf32>)
    -> (tensor<8x8xf32>, tensor<8x8xf32>) {
  %0:2 = "stablehlo.optimization_barrier"(%a, %b) {mhlo.sharding =
      "{{devices=[2,1,2]<=[4] last_tile_dim_replicate}, {devices=[1,4]<=[2,2]T(1,0)}}"} :
      (tensor<8x8xf32>, tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>)
  return %0#0, %0#1 : tensor<8x8xf32>, tensor<8x8xf32>
}
""")
    _run("sharding-propagation", module)
    text = show(module)
    assert '<["gspmd_0"=2, "gspmd_1"=2]>' in text
    assert '[<@mesh, [{"gspmd_0"}, {}]>, <@mesh, [{}, {"gspmd_1", "gspmd_0"}]>]' in text
