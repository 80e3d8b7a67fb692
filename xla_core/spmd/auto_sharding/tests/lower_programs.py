"""Writes the JAX-lowered training steps in ``programs/`` that the auto-sharding tests read
(run by hand when they change: ``python -m xla_core.spmd.auto_sharding.tests.lower_programs``;
needs jax). Each is one step: forward, loss, and the gradients of the weights; the shapes are
picked so that the expert layout is clearly best (Megatron for the MLP and the transformer
block: few tokens, wide layers; data parallel for the CNN: many images, a small kernel, more
classes than channels)."""
from __future__ import annotations

import pathlib

HERE = pathlib.Path(__file__).parent / "programs"


def _mlp(x, t, w1, w2):
    import jax
    import jax.numpy as jnp

    def loss(w1, w2):
        h = jnp.maximum(x @ w1, 0.0)
        return 0.5 * jnp.sum((h @ w2 - t) ** 2)
    return jax.value_and_grad(loss, argnums=(0, 1))(w1, w2)


def _transformer(x, t, wq, wk, wv, wo, w1, w2):
    import jax
    import jax.numpy as jnp

    def loss(wq, wk, wv, wo, w1, w2):
        q = jnp.einsum("sd,dhk->hsk", x, wq)
        k = jnp.einsum("sd,dhk->hsk", x, wk)
        v = jnp.einsum("sd,dhk->hsk", x, wv)
        probs = jax.nn.softmax(jnp.einsum("hsk,htk->hst", q, k) / 4.0, axis=-1)
        attn = jnp.einsum("hst,htk,hkd->sd", probs, v, wo) + x
        y = jnp.maximum(attn @ w1, 0.0) @ w2 + attn
        return 0.5 * jnp.sum((y - t) ** 2)
    return jax.value_and_grad(loss, argnums=tuple(range(6)))(wq, wk, wv, wo, w1, w2)


def _cnn(x, t, k, w):
    import jax
    import jax.numpy as jnp

    def loss(k, w):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        pooled = jnp.mean(jnp.maximum(y, 0.0), axis=(1, 2))
        return 0.5 * jnp.sum((pooled @ w - t) ** 2)
    return jax.value_and_grad(loss, argnums=(0, 1))(k, w)


def main() -> None:
    import jax
    import jax.numpy as jnp
    f32 = jnp.float32
    s = jax.ShapeDtypeStruct
    programs = {
        "mlp_step": (_mlp, [(16, 256), (16, 256), (256, 1024), (1024, 256)]),
        "transformer_step": (_transformer, [(16, 128), (16, 128), (128, 8, 16), (128, 8, 16),
                                            (128, 8, 16), (8, 16, 128), (128, 512),
                                            (512, 128)]),
        "cnn_step": (_cnn, [(1024, 8, 8, 4), (1024, 32), (3, 3, 4, 8), (8, 32)]),
    }
    for name, (fn, shapes) in programs.items():
        text = jax.jit(fn).lower(*[s(shape, f32) for shape in shapes]).as_text()
        (HERE / f"{name}.mlir").write_text(text)


if __name__ == "__main__":
    main()
