"""The FSDP recipe of frameworks/jax/README.md (jax.jit + NamedSharding(mesh, P("fsdp", ...)) on
the parameters and on a plain-jnp Adam's state) on 8 openhlo devices: its 10 losses equal the
same script on JAX's own CPU backend, and each device holds 1/8 of the parameter and optimizer
bytes (the arrays' addressable shards)."""
import json

import numpy as np

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

RECIPE = """
import json
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

mesh = Mesh(np.array(jax.devices()), ("fsdp",))
n = mesh.shape["fsdp"]

def fsdp_spec(shape):  # split the largest dimension n divides; else replicate
    dims = [d for d in range(len(shape)) if shape[d] % n == 0]
    if not dims:
        return P()
    d = max(dims, key=lambda i: (shape[i], -i))
    return P(*[("fsdp" if i == d else None) for i in range(len(shape))])

rng = np.random.default_rng(0)
D, H, LAYERS = 64, 256, 2
params = {}
for l in range(LAYERS):
    params[f"w1_{l}"] = rng.standard_normal((D, H)).astype(np.float32) / np.sqrt(D)
    params[f"b1_{l}"] = np.zeros(H, np.float32)
    params[f"w2_{l}"] = rng.standard_normal((H, D)).astype(np.float32) / np.sqrt(H)
shardings = {k: NamedSharding(mesh, fsdp_spec(v.shape)) for k, v in params.items()}
params = {k: jax.device_put(v, shardings[k]) for k, v in params.items()}
zeros = lambda p: jax.tree.map(lambda a: jnp.zeros_like(a), p)
opt = {"m": zeros(params), "v": zeros(params)}  # zeros_like keeps each param's sharding
batch = NamedSharding(mesh, P("fsdp", None))
replicated = NamedSharding(mesh, P())  # scalars too: one mesh for the whole program

def loss_fn(params, x, y):
    h = x
    for l in range(LAYERS):
        h = h + jax.nn.gelu(h @ params[f"w1_{l}"] + params[f"b1_{l}"]) @ params[f"w2_{l}"]
    return jnp.mean((h - y) ** 2)

def adam(p, g, m, v, t, lr=1e-2, b1=0.9, b2=0.999, eps=1e-8):
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    step = lr * jnp.sqrt(1 - b2 ** t) / (1 - b1 ** t)
    return p - step * m / (jnp.sqrt(v) + eps), m, v

state_shardings = (shardings, {"m": shardings, "v": shardings})

@jax.jit(in_shardings=(*state_shardings, replicated, batch, batch),
         out_shardings=(*state_shardings, replicated), donate_argnums=(0, 1))
def train_step(params, opt, t, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    new = jax.tree.map(adam, params, grads, opt["m"], opt["v"], {k: t for k in params})
    pick = lambda i: {k: new[k][i] for k in params}
    return pick(0), {"m": pick(1), "v": pick(2)}, loss

losses = []
for t in range(1, 11):
    x = rng.standard_normal((32, D)).astype(np.float32)
    y = np.sin(x)
    params, opt, loss = train_step(params, opt, jnp.float32(t), x, y)
    losses.append(float(loss))

state = [*params.values(), *opt["m"].values(), *opt["v"].values()]
per_device = {}
for a in state:
    for s in a.addressable_shards:
        per_device[s.device.id] = per_device.get(s.device.id, 0) + s.data.nbytes
total = sum(a.nbytes for a in state)
print(json.dumps({"losses": losses, "per_device": sorted(per_device.values()), "total": total}))
"""


def test_fsdp_recipe_matches_xla_and_shards_state_eight_ways():
    ours = json.loads(run(RECIPE, OPENHLO_JAX_NUM_DEVICES="8").stdout)
    xla = json.loads(run(RECIPE, platform="cpu",
                         XLA_FLAGS="--xla_force_host_platform_device_count=8").stdout)
    # float32 on both; the two compilers add up the batch-split gradients in their own orders
    np.testing.assert_allclose(ours["losses"], xla["losses"], rtol=1e-4)
    assert ours["losses"][-1] < ours["losses"][0] * 0.9
    assert len(ours["per_device"]) == 8
    for nbytes in ours["per_device"]:
        assert nbytes == ours["total"] / 8  # every array here splits evenly 8 ways
