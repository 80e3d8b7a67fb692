"""frameworks.jax.auto_sharding on 8 openhlo devices: the shardings it returns are the plan's
(a Megatron MLP's weights come out column- then row-parallel), jax.jit with them computes
what the unsharded function computes on JAX's own cpu backend (forward, and an SGD training
step), a with_sharding_constraint inside the function is kept, and bad input is refused
clearly."""
import json

import numpy as np
import pytest

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

SCRIPT = """
import json
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
from frameworks.jax.auto_sharding import auto_shardings
from xla_core.spmd.auto_sharding import AutoShardingError

mesh = Mesh(np.array(jax.devices("openhlo")), ("model",))
cpu = jax.devices("cpu")[0]
rng = np.random.default_rng(0)
# few tokens, wide layers: Megatron is clearly the cheapest plan
x = rng.standard_normal((16, 256)).astype(np.float32)
t = rng.standard_normal((16, 256)).astype(np.float32)
params = {"w1": rng.standard_normal((256, 1024)).astype(np.float32) / 16,
          "w2": rng.standard_normal((1024, 256)).astype(np.float32) / 32}

def mlp(x, params):
    return jax.nn.relu(x @ params["w1"]) @ params["w2"]

def sgd_step(params, x, t):
    def loss(p):
        return jnp.mean((mlp(x, p) - t) ** 2)
    value, grads = jax.value_and_grad(loss)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), value

def constrained(x, params):  # the hidden activation split by rows, as the user says
    h = jax.lax.with_sharding_constraint(x @ params["w1"], NamedSharding(mesh, P("model", None)))
    return jax.nn.relu(h) @ params["w2"]

def specs(tree):
    return [[list(e) if isinstance(e, tuple) else e for e in s.spec]
            for s in jax.tree.leaves(tree)]

def case(fn, *args):
    chosen = auto_shardings(fn, mesh, *args, hardware="generic-cpu")
    compiled = jax.jit(fn, in_shardings=chosen.in_shardings,
                       out_shardings=chosen.out_shardings)
    got = compiled(*args)
    with jax.default_device(cpu):
        want = jax.jit(fn)(*args)
    return {"in": specs(chosen.in_shardings), "out": specs(chosen.out_shardings),
            "plan_in": [[list(a) for a in dims] for dims in chosen.plan.arguments],
            "plan_out": [[list(a) for a in dims] for dims in chosen.plan.results],
            "got": [np.asarray(a).tolist() for a in jax.tree.leaves(got)],
            "got_devices": [len(a.sharding.device_set) for a in jax.tree.leaves(got)],
            "want": [np.asarray(a).tolist() for a in jax.tree.leaves(want)],
            "constraints": [[list(a) for a in c.outs[0]] for c in chosen.plan.choices
                            if c.op is not None and c.op.name == "sdy.sharding_constraint"],
            "status": chosen.plan.solution.status}

out = {"forward": case(mlp, x, params), "step": case(sgd_step, params, x, t),
       "constrained": case(constrained, x, params)}
try:
    auto_shardings(mlp, mesh, x, params, memory_limit="1KiB", hardware="generic-cpu")
except AutoShardingError as exc:
    out["tight"] = str(exc)
print(json.dumps(out))
"""

REPLICATED = [None, None]
COLUMN, ROW = [None, "model"], ["model", None]
ROW_AXES = [["model"], []]


@pytest.fixture(scope="module")
def results():
    return json.loads(run(SCRIPT, platform="openhlo,cpu",
                          OPENHLO_JAX_NUM_DEVICES="8").stdout.splitlines()[-1])


def _axes(spec):
    """A PartitionSpec entry list as the plan's per-dimension axis lists."""
    return [[] if e is None else e if isinstance(e, list) else [e] for e in spec]


def _assert_matches_cpu(case):
    assert len(case["got"]) == len(case["want"])
    for got, want in zip(case["got"], case["want"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_megatron_mlp_weights_come_out_column_then_row_parallel(results):
    case = results["forward"]
    assert case["status"] == "optimal"
    # leaves in jax's order: x, then params["w1"], params["w2"]
    assert case["in"] == [REPLICATED, COLUMN, ROW]
    assert case["out"] == [REPLICATED]
    assert [_axes(s) for s in case["in"]] == case["plan_in"]
    assert [_axes(s) for s in case["out"]] == case["plan_out"]
    _assert_matches_cpu(case)
    assert case["got_devices"] == [8]


def test_training_step_is_sharded_megatron_style_and_matches_cpu(results):
    case = results["step"]
    # in: params (w1, w2), x, t; out: new params (w1, w2), loss
    assert case["in"][:2] == [COLUMN, ROW]
    assert case["out"][:2] == [COLUMN, ROW]
    assert [_axes(s) for s in case["in"]] == case["plan_in"]
    assert [_axes(s) for s in case["out"]] == case["plan_out"]
    _assert_matches_cpu(case)


def test_a_sharding_constraint_in_the_function_is_kept(results):
    case = results["constrained"]
    assert case["constraints"] == [ROW_AXES]  # the hidden activation split by rows
    # so w2 is no longer row-parallel: its rows would meet a hidden activation split the
    # other way
    assert case["in"][2] != ROW
    assert [_axes(s) for s in case["in"]] == case["plan_in"]
    _assert_matches_cpu(case)


def test_a_memory_limit_no_plan_meets_is_a_clear_error(results):
    assert "memory limit" in results["tight"], results["tight"]


def test_mesh_must_be_a_jax_mesh():
    import jax.numpy as jnp

    from frameworks.jax.auto_sharding import auto_shardings
    from xla_core.spmd.auto_sharding import AutoShardingError
    with pytest.raises(AutoShardingError, match="jax.sharding.Mesh, got str"):
        auto_shardings(lambda x: x, "model=8", jnp.zeros(4))
