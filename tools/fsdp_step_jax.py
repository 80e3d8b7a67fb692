"""The JAX side of ``tools.bench_lhs``: lower an FSDP-style transformer training step.

``python -m tools.fsdp_step_jax OUTDIR`` (in a subprocess with 8 host cpu devices: the caller
sets ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` and ``JAX_PLATFORMS=cpu``) writes
``OUTDIR/lowered.mlir`` (``jax.jit(step, in_shardings, out_shardings).lower(...).as_text()``)
and ``OUTDIR/args.npz``. The step: a two-layer transformer (attention and an MLP per layer,
residuals, layer norm), the mean squared output as loss, ``jax.grad`` and an SGD update;
every weight is sharded along its first dimension over the 8 devices (FSDP's sharding;
how the partitioner moves the data is its choice), the batch along the same axis.
This module imports nothing of OpenHLO.
"""
from __future__ import annotations

import pathlib
import sys

import numpy as np

LAYERS, BATCH, SEQ, MODEL, HIDDEN = 2, 16, 64, 128, 512


def _step():
    import jax
    import jax.numpy as jnp

    def layernorm(h):
        mean = jnp.mean(h, axis=-1, keepdims=True)
        var = jnp.mean((h - mean) ** 2, axis=-1, keepdims=True)
        return (h - mean) * jax.lax.rsqrt(var + 1e-5)

    def layer(h, p):
        wq, wk, wv, wo, w1, w2 = p
        q, k, v = h @ wq, h @ wk, h @ wv
        att = jax.nn.softmax(q @ jnp.swapaxes(k, 1, 2) / np.sqrt(MODEL), axis=-1)
        h = layernorm(h + (att @ v) @ wo)
        return layernorm(h + jnp.tanh(h @ w1) @ w2)

    def loss(params, x):
        h = x
        for p in params:
            h = layer(h, p)
        return jnp.mean(h ** 2)

    def step(params, x):
        grads = jax.grad(loss)(params, x)
        return jax.tree.map(lambda w, g: w - 0.1 * g, params, grads)

    return step


def _params(rng):
    shapes = [(MODEL, MODEL)] * 4 + [(MODEL, HIDDEN), (HIDDEN, MODEL)]
    return [tuple((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) for s in shapes)
            for _ in range(LAYERS)]


def lower(outdir: pathlib.Path) -> None:
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P
    rng = np.random.default_rng(0)
    params = _params(rng)
    x = rng.standard_normal((BATCH, SEQ, MODEL)).astype(np.float32)
    mesh = jax.make_mesh((8,), ("data",))
    fsdp = NamedSharding(mesh, P("data", None))
    param_shardings = [tuple(fsdp for _ in p) for p in params]
    batch = NamedSharding(mesh, P("data", None, None))
    step = jax.jit(_step(), in_shardings=(param_shardings, batch),
                   out_shardings=param_shardings)
    outdir.mkdir(parents=True, exist_ok=True)
    (outdir / "lowered.mlir").write_text(step.lower(params, x).as_text())
    flat = [w for p in params for w in p] + [x]
    np.savez(outdir / "args.npz", *flat)


if __name__ == "__main__":
    lower(pathlib.Path(sys.argv[1]))
