"""Shardings: reading both spellings, local shapes, tile assignments.

JAX is the oracle for tile assignments: ``NamedSharding(AbstractMesh, P(...))`` lowered to an
``HloSharding`` string by JAX must equal what our ``TensorSharding`` on the same mesh gives
(read through our ``mhlo.sharding`` parser)."""
import pytest

from xla_core.spmd.sharding import (REPLICATED, Mesh, ShardingError, SpmdUnsupportedError,
                                    TensorSharding, parse_mhlo_sharding, parse_sdy_mesh,
                                    parse_sdy_sharding)

jax = pytest.importorskip("jax")
from jax.sharding import AbstractMesh, NamedSharding, PartitionSpec as P  # noqa: E402

CASES = [
    ((8,), ("x",), P("x", None)),
    ((8,), ("x",), P(None, "x")),
    ((8,), ("x",), P()),
    ((2, 4), ("a", "b"), P("a", "b")),
    ((2, 4), ("a", "b"), P("b", "a")),
    ((2, 4), ("a", "b"), P("b", None)),
    ((2, 4), ("a", "b"), P(None, "a")),
    ((2, 4), ("a", "b"), P(("b", "a"), None)),
    ((2, 2, 2), ("x", "y", "z"), P("z", "x")),
    ((2, 2, 2), ("x", "y", "z"), P(("y", "x"), None)),
]


def _ours(sizes, names, spec) -> TensorSharding:
    dims = []
    for d in range(2):
        entry = spec[d] if d < len(spec) else None
        dims.append(() if entry is None else (entry,) if isinstance(entry, str) else entry)
    return TensorSharding("mesh", tuple(dims))


@pytest.mark.parametrize("sizes,names,spec", CASES, ids=[str(c) for c in CASES])
def test_tile_assignment_matches_jax(sizes, names, spec):
    jax_text = str(NamedSharding(AbstractMesh(sizes, names), spec)._to_xla_hlo_sharding(2))
    mesh = Mesh(tuple(zip(names, sizes)))
    assert _ours(sizes, names, spec).tile_assignment(mesh) == parse_mhlo_sharding(jax_text, 2)


def test_read_sdy_spellings():
    mesh = parse_sdy_mesh('#sdy.mesh<["data"=4, "model"=2]>')
    assert mesh.axes == (("data", 4), ("model", 2)) and mesh.size == 8
    assert parse_sdy_mesh('<["x"=2], device_ids=[1, 0]>').devices().tolist() == [1, 0]
    s = parse_sdy_sharding('#sdy.sharding<@mesh, [{"data", "model"}, {?}, {}p1], '
                           'replicated={"z"}>')
    assert s == TensorSharding("mesh", (("data", "model"), (), ()), ("z",))
    assert parse_sdy_sharding(str(s)) == s  # the printer writes what the reader reads
    assert s.local_shape(Mesh((("data", 4), ("model", 2), ("z", 1))), (16, 3, 5)) == (2, 3, 5)


def test_device_ids_order_the_tiles():
    mesh = Mesh((("x", 4),), (3, 2, 1, 0))
    tiles = TensorSharding("m", (("x",),)).tile_assignment(mesh)
    assert tiles.devices.tolist() == [3, 2, 1, 0]
    assert TensorSharding("m", ((),)).tile_assignment(mesh) == REPLICATED


def test_bad_shardings_name_the_problem():
    mesh = Mesh((("x", 4), ("y", 2)))
    with pytest.raises(ShardingError, match=r"dimension 0 of size 6 cannot be split .* 4 does "
                                            r"not divide 6"):
        TensorSharding("m", (("x",), ())).check(mesh, (6, 2), "arg 0")
    with pytest.raises(ShardingError, match=r'unknown mesh axis "w"'):
        TensorSharding("m", (("w",),)).check(mesh, (8,))
    with pytest.raises(ShardingError, match=r'uses mesh axis "x" twice'):
        TensorSharding("m", (("x",), ("x",))).check(mesh, (8, 8))
    with pytest.raises(ShardingError, match="rank 1"):
        TensorSharding("m", (("x",), ())).check(mesh, (8,))
    with pytest.raises(ShardingError, match="cannot read sharding"):
        parse_sdy_sharding("#sdy.sharding<mesh [{}]>")
    with pytest.raises(ShardingError, match="permutation"):
        Mesh((("x", 2),), (0, 0))
    with pytest.raises(SpmdUnsupportedError, match="sub-axis"):
        parse_sdy_sharding('#sdy.sharding<@mesh, [{"x":(1)2}]>')


def test_mhlo_spellings():
    assert parse_mhlo_sharding("{replicated}", 2) == REPLICATED
    explicit = parse_mhlo_sharding("{devices=[2,1]1,0}", 2)
    assert explicit.devices.tolist() == [[1], [0]] and not explicit.replicate_on_last_tile_dim
    iota = parse_mhlo_sharding("{devices=[2,1,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 2)
    assert iota.devices.tolist() == [[[0, 2]], [[1, 3]]] and iota.tile_dims == (2, 1)
    with pytest.raises(ShardingError, match="rank 3"):
        parse_mhlo_sharding("{devices=[2,1]0,1}", 3)
    with pytest.raises(SpmdUnsupportedError):
        parse_mhlo_sharding("{maximal device=0}", 1)
    assert parse_mhlo_sharding("{devices=[1,1]0}", 2) == REPLICATED
