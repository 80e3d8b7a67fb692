"""JAX side of test_collective_pipeliner_training: run in a subprocess with 8 host cpu devices.

``python -m xla_core.spmd.tests.fsdp_scan_jax OUTDIR`` writes ``step.mlir`` (one training step
of a layer-scanned MLP, FSDP shardings: both stacked weights split over 8 devices along their
second dim, the batch split, lowered by ``jax.jit``), ``init.npz`` (weights and data) and
``ref.npz`` (``losses`` and final weights of STEPS steps run by JAX on one device).

The caller sets ``XLA_FLAGS`` (8 host devices) and ``JAX_PLATFORMS=cpu``.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

LAYERS, BATCH, HIDDEN, WIDE, STEPS, RATE = 4, 16, 32, 64, 20, 0.1


def _step(w1, w2, x, y):
    import jax
    import jax.numpy as jnp

    def loss(w1, w2):
        def layer(h, ws):
            a, b = ws
            return h + jnp.tanh(h @ a) @ b, None
        h, _ = jax.lax.scan(layer, x, (w1, w2))
        return jnp.mean((h - y) ** 2)
    value, (g1, g2) = jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)
    return value, w1 - RATE * g1, w2 - RATE * g2


def main(outdir: pathlib.Path) -> None:
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    rng = np.random.default_rng(0)
    w1 = (rng.standard_normal((LAYERS, HIDDEN, WIDE)) * 0.1).astype(np.float32)
    w2 = (rng.standard_normal((LAYERS, WIDE, HIDDEN)) * 0.1).astype(np.float32)
    x = rng.standard_normal((BATCH, HIDDEN)).astype(np.float32)
    y = rng.standard_normal((BATCH, HIDDEN)).astype(np.float32)
    mesh = jax.make_mesh((8,), ("data",))
    split = NamedSharding(mesh, P(None, "data", None))
    batch, whole = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    lowered = jax.jit(_step, in_shardings=(split, split, batch, batch),
                      out_shardings=(whole, split, split)).lower(w1, w2, x, y)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "step.mlir").write_text(lowered.as_text())
    np.savez(outdir / "init.npz", w1=w1, w2=w2, x=x, y=y)
    one = jax.devices()[0]
    step = jax.jit(_step)
    a, b = jax.device_put(w1, one), jax.device_put(w2, one)
    losses = []
    for _ in range(STEPS):
        value, a, b = step(a, b, jax.device_put(x, one), jax.device_put(y, one))
        losses.append(float(value))
    np.savez(outdir / "ref.npz", losses=np.array(losses, np.float32), w1=np.asarray(a),
             w2=np.asarray(b))


if __name__ == "__main__":
    main(pathlib.Path(sys.argv[1]))
