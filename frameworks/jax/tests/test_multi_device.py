"""Several devices through the plugin: pmap and shard_map with collectives, replicated jit,
sharded transfers; each script's results are compared with the same script on JAX's own CPU
backend (XLA, with as many host devices), and unsupported partitioning is a clear error."""
import json

import numpy as np

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

DEVICES = 8

PROGRAMS = """
import json
from jax import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
n = jax.device_count()
assert n == 8, jax.devices()
rng = np.random.default_rng(0)
x = rng.standard_normal((n * 8, 6)).astype(np.float32)
w = rng.standard_normal((6, 5)).astype(np.float32)
mesh = Mesh(np.array(jax.devices()), ("x",))
mesh2 = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))

def smap(f, m, i, o):
    return jax.jit(shard_map(f, mesh=m, in_specs=i, out_specs=o, check_vma=False))

out = {
  "psum": smap(lambda a: jax.lax.psum(a, "x"), mesh, P("x"), P())(x),
  "all_gather": smap(lambda a: jax.lax.all_gather(a, "x", tiled=True) * 2, mesh, P("x"), P())(x),
  "psum_scatter": smap(lambda a: jax.lax.psum_scatter(a, "x", tiled=True), mesh, P(), P("x"))(x),
  "ppermute": smap(lambda a: jax.lax.ppermute(a, "x", [(i, (i + 3) % n) for i in range(n)]),
                   mesh, P("x"), P("x"))(x),
  "all_to_all": smap(lambda a: jax.lax.all_to_all(a, "x", 0, 0, tiled=True), mesh, P("x"),
                     P("x"))(x),
  "axis_index": smap(lambda a: a * jax.lax.axis_index("x"), mesh, P("x"), P("x"))(x),
  "mesh_2d": smap(lambda a, w: jax.lax.psum(a @ w, "b"), mesh2, (P("a", None), P()),
                  P("a", None))(x, w),
  "mesh_2d_partial_out": smap(lambda a: jax.lax.pmean(a, "a"), mesh2, P("a", "b"),
                              P(None, "b"))(x[:, :4]),
  "pmap_grad": jax.pmap(jax.grad(lambda w, b: jnp.sum(jnp.tanh(b @ w))), axis_name="i")(
      jnp.broadcast_to(w, (n, 6, 5)), x.reshape(n, 8, 6)),
  "pmap_pmean": jax.pmap(lambda a: jax.lax.pmean(a * a, "i"), axis_name="i")(x.reshape(n, 8, 6)),
  "replicated_jit": jax.jit(lambda a: jnp.sin(a) @ w, out_shardings=NamedSharding(mesh, P()))(
      jax.device_put(x, NamedSharding(mesh, P()))),
  "sharded_round_trip": jax.device_put(x, NamedSharding(mesh2, P("b", "a"))),
}
sharded = out["psum_scatter"]
assert len(sharded.addressable_shards) == n and sharded.addressable_shards[3].data.shape == (8, 6)
print(json.dumps({k: np.asarray(v).tolist() for k, v in out.items()}))
"""


def test_collectives_and_layouts_match_xla():
    _assert_matches_xla(PROGRAMS, rtol=2e-5, atol=1e-5)


def _assert_matches_xla(body: str, rtol: float = 1e-4, atol: float = 1e-4) -> None:
    """``body`` prints a JSON dict of results: the same on our plugin and on XLA's CPU."""
    ours = json.loads(run(body, OPENHLO_JAX_NUM_DEVICES=str(DEVICES)).stdout)
    xla = json.loads(run(body, platform="cpu",
                         XLA_FLAGS=f"--xla_force_host_platform_device_count={DEVICES}").stdout)
    assert ours.keys() == xla.keys()
    for name in xla:
        np.testing.assert_allclose(np.array(ours[name]), np.array(xla[name]), rtol=rtol,
                                   atol=atol, err_msg=name)


def test_automatically_partitioned_jit_matches_xla():
    """jit on sharded arrays (no shard_map): propagation and the partitioner place the
    collectives; results equal XLA's, with the outputs laid out as JAX asked."""
    body = """
        import json
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
        rng = np.random.default_rng(3)
        x = jax.device_put(rng.standard_normal((16, 32)).astype(np.float32),
                           NamedSharding(mesh, P("data", None)))
        w1 = jax.device_put(rng.standard_normal((32, 64)).astype(np.float32),
                            NamedSharding(mesh, P(None, "model")))
        w2 = jax.device_put(rng.standard_normal((64, 8)).astype(np.float32),
                            NamedSharding(mesh, P("model", None)))
        mlp = jax.jit(lambda x, w1, w2: jax.nn.relu(x @ w1) @ w2,
                      out_shardings=NamedSharding(mesh, P("data", None)))
        loss = jax.jit(jax.grad(lambda w1, x, w2: jnp.tanh(x @ w1 @ w2).sum()))
        y = mlp(x, w1, w2)
        assert y.sharding.spec == P("data", None), y.sharding
        print(json.dumps({"mlp": np.asarray(y).tolist(),
                          "col_sums": np.asarray(jax.jit(lambda a: a.sum(0))(x)).tolist(),
                          "grad": np.asarray(loss(w1, x, w2)).tolist()}))
    """
    _assert_matches_xla(body)


def test_shard_map_mixed_with_automatic_partitioning_matches_xla():
    """A shard_map with automatically partitioned ops around it, and one manual on one mesh
    axis only (the other left to the partitioner): results equal XLA's."""
    body = """
        import json
        from jax import shard_map
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()), ("x",))
        mesh2 = Mesh(np.array(jax.devices()).reshape(2, 4), ("a", "b"))
        rng = np.random.default_rng(5)
        x = jax.device_put(rng.standard_normal((8, 2)).astype(np.float32),
                           NamedSharding(mesh, P("x")))
        inner = shard_map(lambda a: a * 2, mesh=mesh, in_specs=P("x"), out_specs=P("x"))
        y = jax.device_put(rng.standard_normal((16, 32)).astype(np.float32),
                           NamedSharding(mesh2, P("a", "b")))
        w = rng.standard_normal((32, 8)).astype(np.float32)
        partial = shard_map(lambda p, q: jax.lax.psum(p @ q, "b"), mesh=mesh2,
                            in_specs=(P(None, "b"), P("b", None)), out_specs=P(),
                            axis_names={"b"})
        print(json.dumps({
            "mixed": np.asarray(jax.jit(lambda a: inner(a + 1).sum(0))(x)).tolist(),
            "partial": np.asarray(jax.jit(lambda p, q: jnp.tanh(partial(p, q)))(y, w)).tolist()}))
    """
    _assert_matches_xla(body)


def test_shard_map_nested_in_a_loop_matches_xla():
    _assert_matches_xla("""
        import json
        from jax import shard_map
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        mesh = Mesh(np.array(jax.devices()), ("x",))
        x = jax.device_put(np.arange(16, dtype=np.float32).reshape(8, 2),
                           NamedSharding(mesh, P("x")))
        inner = shard_map(lambda a: a * 2 + jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                          out_specs=P("x"))
        loop = jax.jit(lambda a: jax.lax.fori_loop(0, 2, lambda i, v: inner(v), a))
        print(json.dumps({"loop": np.asarray(loop(x)).tolist()}))
    """)


def test_partially_replicated_gspmd_tiling_runs():
    run("""
        from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
        jax.config.update("jax_use_shardy_partitioner", False)
        mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("x", "y"))
        x = jax.device_put(np.ones((4, 4), np.float32), NamedSharding(mesh, P("x")))
        # GSPMD's spelling of a split replicated over "y" is read
        assert np.asarray(jax.jit(lambda a: a * 2)(x)).tolist() == [[2.0] * 4] * 4
        # and the client goes on to run other programs
        assert np.asarray(jax.jit(lambda a: a + 1)(np.ones(2, np.float32))).tolist() == [2, 2]
    """, OPENHLO_JAX_NUM_DEVICES="4")
