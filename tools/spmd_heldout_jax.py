"""The JAX side of ``tools.spmd_heldout``: run in a subprocess with 8 host cpu devices.

``python -m tools.spmd_heldout_jax OUTDIR [NAME ...]`` writes, per held-out program, a folder
``OUTDIR/NAME`` with ``lowered.mlir`` (``jax.jit(...).lower(...).as_text()``, Shardy
shardings, or GSPMD's for the programs named ``*_gspmd``), ``args.npz`` and ``ref.npz`` (the inputs and the unsharded results: the same
function jitted without shardings on one device) and ``xla.json``: the collectives XLA's SPMD
partitioner emitted (read from the HLO dumped right after its ``spmd-partitioning`` pass, so
before any combiner merged them) and those in its final optimized program.

The caller sets ``XLA_FLAGS`` (device count, dump folder) and ``JAX_PLATFORMS=cpu``; this module
imports nothing of OpenHLO.
"""
from __future__ import annotations

import json
import math
import os
import pathlib
import re
import sys

import numpy as np

KINDS = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")
_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "s32": 4, "u32": 4, "s64": 8, "u64": 8,
             "s8": 1, "u8": 1, "pred": 1, "s16": 2, "u16": 2}
_LINE = re.compile(r"=\s*(.*?)\s+(" + "|".join(KINDS) + r")(?:-start)?\(")
_ARRAY = re.compile(r"\b([a-z]+\d*)\[([\d,]*)\]")


def parse_collectives(hlo_text: str) -> list:
    """``[{"kind", "result", "bytes"}]`` for each collective instruction of an HLO module text
    (bytes: the per-device result, tuple elements summed, as XLA's summaries count them)."""
    out = []
    for line in hlo_text.splitlines():
        m = _LINE.search(line)
        if not m or "-done(" in line:
            continue
        nbytes = 0
        for dtype, dims in _ARRAY.findall(m.group(1)):
            size = math.prod(int(d) for d in dims.split(",") if d)
            nbytes += size * _ITEMSIZE.get(dtype, 4)
        out.append({"kind": m.group(2), "result": m.group(1), "bytes": nbytes})
    return out


# ---- the programs ---------------------------------------------------------------------------

# Programs whose name ends so are lowered (and compiled by XLA) with Shardy off: their
# shardings are GSPMD's mhlo.sharding strings, their shard_maps @SPMDFullToShardShape regions.
GSPMD = "_gspmd"


def _programs():
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P

    rng = np.random.default_rng(0)

    def normal(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    mesh2 = jax.make_mesh((2, 4), ("data", "model"))
    mesh1 = jax.make_mesh((8,), ("data",))

    def on(mesh, *spec):
        return NamedSharding(mesh, P(*spec))

    def mlp_2d(x, w1, w2):
        return jnp.maximum(x @ w1, 0.0) @ w2

    def conv_loss(x, k, t):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean((jnp.maximum(y, 0.0) - t) ** 2)

    def conv_batch(x, k, t):
        loss, grad = jax.value_and_grad(conv_loss, argnums=1)(x, k, t)
        return loss, k - 0.1 * grad

    def conv_spatial(x, k):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.maximum(y, 0.0)

    def conv_spatial_step(x, k, t):
        loss, grad = jax.value_and_grad(
            lambda k: jnp.mean((conv_spatial(x, k) - t) ** 2))(k)
        return loss, k - 0.1 * grad

    def fsdp_loss(x, w1, w2):
        return jnp.mean((jnp.maximum(x @ w1, 0.0) @ w2) ** 2)

    def fsdp(x, w1, w2):
        loss, (g1, g2) = jax.value_and_grad(fsdp_loss, argnums=(1, 2))(x, w1, w2)
        return loss, w1 - 0.1 * g1, w2 - 0.1 * g2

    def reduce_scatter(x, w):
        return x @ w

    def partial_manual(x, w):
        def inner(xs, ws):
            return jax.lax.psum(xs @ ws, "model")
        y = jax.shard_map(inner, mesh=mesh2, in_specs=(P(None, "model"), P("model", None)),
                          out_specs=P(), axis_names={"model"})(x, w)
        return jnp.tanh(y)

    def scan_carry(x, w):
        # a batch-split carry through a loop: each step is local
        return jax.lax.fori_loop(0, 4, lambda i, h: jnp.tanh(h @ w), x)

    def scan_seq(xs, h, w):
        # a scan over time of batch-split sequences: each step reads and writes one time step
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h * 2.0
        return jax.lax.scan(step, h, xs)

    def scan_grad(xs, h, w):
        # the weight gradient through a scan over batch-split sequences (a reverse scan)
        def loss(w):
            def step(h, x):
                h = jnp.tanh(h @ w + x)
                return h, jnp.sum(h)
            last, ys = jax.lax.scan(step, h, xs)
            return jnp.sum(ys) + jnp.sum(last)
        return jax.grad(loss)(w)

    def while_norm(x):
        # a loop whose condition reads a batch-split value: a partial sum all-reduced
        return jax.lax.while_loop(lambda v: jnp.sum(v * v) > 1.0, lambda v: v * 0.5, x)

    def train_loop(x, w):
        # a weight carried through training steps on a batch-split input: the gradient's
        # partial sums are all-reduced once per step, inside the loop
        def body(i, w):
            return w - 0.1 * jax.grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
        return jax.lax.fori_loop(0, 3, body, w)

    def branch(p, x):
        return jax.lax.cond(p > 0, lambda x: jnp.tanh(x) * 2.0, lambda x: x - 1.0, x)

    def embed(table, ids):
        return table[ids]

    def embed_grad(table, ids, g):
        # an update by the embedding gradient: a scatter-add of batch-split updates
        return table - 0.1 * jax.grad(lambda t: jnp.sum(t[ids] * g))(table)

    def some_in(x, w):
        # jitted with an unspecified in_sharding for w: w is replicated
        return jnp.tanh(x @ w)

    def attention(x, wq, wk, wv, wo):
        # Megatron attention: heads split over "model", the batch over "data"
        b, s, _ = x.shape
        heads = 4

        def split(t):
            return t.reshape(b, s, heads, -1)
        q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
        p = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, s, -1) @ wo

    def dp_tp_step(x, w1, w2):
        # a training step on a 2-D mesh: batch over "data", the MLP over "model"
        def loss(w1, w2):
            return jnp.mean((jnp.tanh(x @ w1) @ w2) ** 2)
        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.1 * g1, w2 - 0.1 * g2

    def layernorm(x, g):
        # normalized over a hidden dim split over "model": partial sums all-reduced
        mu = jnp.mean(x, axis=-1, keepdims=True)
        var = jnp.mean((x - mu) ** 2, axis=-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * g

    def conv_channels(x, k):
        # output channels split: each device convolves with its filters
        return jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def vocab_xent(h, w, labels):
        # a vocabulary-parallel loss: logits split along the vocabulary
        logits = h @ w
        logz = jax.nn.logsumexp(logits, axis=-1)
        picked = jnp.take_along_axis(logits, labels[:, None], axis=-1)[:, 0]
        return jnp.mean(logz - picked)

    def block_step(x, wq, wo, w1, w2):
        # a transformer block's training step on a 2-D mesh (attention, layer norm, MLP)
        def loss(wq, wo, w1, w2):
            h = x + attention(x, wq, wq, wq, wo)
            h = layernorm(h, jnp.ones(h.shape[-1]))
            y = h + jnp.tanh(h @ w1) @ w2
            return jnp.mean(y ** 2)
        grads = jax.grad(loss, argnums=(0, 1, 2, 3))(wq, wo, w1, w2)
        return tuple(w - 0.1 * g for w, g in zip((wq, wo, w1, w2), grads))

    def cumsum_split(x):
        # a scan along a split dim: gathered first, as XLA does
        return jnp.cumsum(x, axis=1)

    def argmax_split(x):
        # a variadic reduce (value, index) over a split dim: partial results gathered
        return jnp.argmax(x, axis=1)

    def pad_split(x):
        # padding a split dim, the result wanted whole
        return jnp.pad(x, ((0, 0), (1, 1))) * 3.0

    def fused_qkv(x, wqkv, wo):
        # Megatron attention with one fused QKV projection, its columns split over "model":
        # q, k and v are cut from pieces that do not line up with them
        b, s, _ = x.shape
        q, k, v = jnp.split(x @ wqkv, 3, axis=-1)

        def heads(t):
            return t.reshape(b, s, 4, -1)
        q, k, v = heads(q), heads(k), heads(v)
        p = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / 4.0, axis=-1)
        return jnp.einsum("bhqk,bkhd->bqhd", p, v).reshape(b, s, -1) @ wo

    def slice_split(x):
        # a slice of a split dim, wanted whole
        return x[:, 4:28] * 2.0

    def split_rows(x):
        # a gated unit's halves, split along a dim that is not split: local slices
        a, b = jnp.split(x, 2, axis=1)
        return jnp.tanh(a) * b

    def mesh3d(x, w):
        # a 3-D mesh, the batch split over two axes in transposed order (GSPMD: iota tile
        # assignments with transposes, partial replication): partial sums over the third
        return jnp.tanh(x @ w)

    def partial_manual_out(x, w):
        # a partially manual shard_map whose result stays split over its manual axis
        def inner(xs, ws):
            return jnp.tanh(xs @ ws)
        y = jax.shard_map(inner, mesh=mesh2, in_specs=(P(), P(None, "model")),
                          out_specs=P(None, "model"), axis_names={"model"})(x, w)
        return y * 2.0

    mesh3 = jax.make_mesh((2, 2, 2), ("a", "b", "c"))
    d, m = "data", "model"
    ids = np.random.default_rng(1).integers(0, 64, size=(16,)).astype(np.int32)
    # the unsharded math of a program whose jitted form needs the mesh
    refs = {"partial_manual": lambda x, w: jnp.tanh(x @ w),
            "partial_manual_gspmd": lambda x, w: jnp.tanh(x @ w),
            "partial_manual_out_gspmd": lambda x, w: jnp.tanh(x @ w) * 2.0}
    programs = {
        "mlp_2d": (mlp_2d, (normal(16, 32), normal(32, 64, scale=0.2), normal(64, 32, scale=0.2)),
                   (on(mesh2, d, None), on(mesh2, None, m), on(mesh2, m, None)),
                   on(mesh2, d, None)),
        "conv_batch": (conv_batch, (normal(8, 8, 8, 3), normal(3, 3, 3, 4, scale=0.3),
                                    normal(8, 8, 8, 4)),
                       (on(mesh1, d), on(mesh1), on(mesh1, d)), (on(mesh1), on(mesh1))),
        "conv_spatial": (conv_spatial, (normal(2, 16, 16, 3), normal(3, 3, 3, 4, scale=0.3)),
                         (on(mesh1, None, d), on(mesh1)), on(mesh1, None, d)),
        "conv_spatial_step": (conv_spatial_step, (normal(2, 16, 16, 3),
                                                  normal(3, 3, 3, 4, scale=0.3),
                                                  normal(2, 16, 16, 4)),
                              (on(mesh1, None, d), on(mesh1), on(mesh1, None, d)),
                              (on(mesh1), on(mesh1))),
        "fsdp": (fsdp, (normal(16, 32), normal(32, 64, scale=0.2), normal(64, 16, scale=0.2)),
                 (on(mesh1, d), on(mesh1, d, None), on(mesh1, d, None)),
                 (on(mesh1), on(mesh1, d, None), on(mesh1, d, None))),
        "reduce_scatter": (reduce_scatter, (normal(16, 64), normal(64, 32)),
                           (on(mesh1, None, d), on(mesh1, d, None)), on(mesh1, d, None)),
        "partial_manual": (partial_manual, (normal(16, 32), normal(32, 24, scale=0.2)),
                           (on(mesh2, d, m), on(mesh2, m, None)), on(mesh2, d, None)),
        "scan_carry": (scan_carry, (normal(16, 32), normal(32, 32, scale=0.2)),
                       (on(mesh1, d), on(mesh1)), on(mesh1, d)),
        # the loop's result wanted whole: it still runs on pieces, gathered after
        "scan_gathered": (scan_carry, (normal(16, 32), normal(32, 32, scale=0.2)),
                          (on(mesh1, d), on(mesh1)), on(mesh1)),
        "scan_seq": (scan_seq, (normal(4, 16, 32), normal(16, 32), normal(32, 32, scale=0.2)),
                     (on(mesh1, None, d), on(mesh1, d), on(mesh1)),
                     (on(mesh1, d), on(mesh1, None, d))),
        "scan_grad": (scan_grad, (normal(4, 16, 32), normal(16, 32),
                                  normal(32, 32, scale=0.2)),
                      (on(mesh1, None, d), on(mesh1, d), on(mesh1)), on(mesh1)),
        "while_norm": (while_norm, (normal(16, 8, scale=3.0),), (on(mesh1, d),), on(mesh1, d)),
        "train_loop": (train_loop, (normal(16, 32), normal(32, 16, scale=0.2)),
                       (on(mesh1, d), on(mesh1)), on(mesh1)),
        "branch": (branch, (np.float32(1.0), normal(16, 32)), (on(mesh1), on(mesh1, d)),
                   on(mesh1, d)),
        "embed_batch": (embed, (normal(64, 32), ids), (on(mesh1), on(mesh1, d)),
                        on(mesh1, d)),
        "embed_hidden": (embed, (normal(64, 32), ids), (on(mesh1, None, d), on(mesh1)),
                         on(mesh1, None, d)),
        "embed_grad": (embed_grad, (normal(64, 32), ids, normal(16, 32)),
                       (on(mesh1), on(mesh1, d), on(mesh1, d)), on(mesh1)),
        "embed_vocab": (embed, (normal(64, 32), ids), (on(mesh1, d), on(mesh1)), on(mesh1)),
        "embed_vocab_grad": (embed_grad, (normal(64, 32), ids, normal(16, 32)),
                             (on(mesh1, d), on(mesh1), on(mesh1)), on(mesh1, d)),
        "attention": (attention, (normal(4, 8, 32), normal(32, 32, scale=0.2),
                                  normal(32, 32, scale=0.2), normal(32, 32, scale=0.2),
                                  normal(32, 32, scale=0.2)),
                      (on(mesh2, d), on(mesh2, None, m), on(mesh2, None, m), on(mesh2, None, m),
                       on(mesh2, m, None)), on(mesh2, d)),
        "dp_tp_step": (dp_tp_step, (normal(16, 32), normal(32, 64, scale=0.2),
                                    normal(64, 8, scale=0.2)),
                       (on(mesh2, d), on(mesh2, None, m), on(mesh2, m, None)),
                       (on(mesh2, None, m), on(mesh2, m, None))),
        "layernorm": (layernorm, (normal(16, 64), normal(64)), (on(mesh2, d, m), on(mesh2, m)),
                      on(mesh2, d, m)),
        "conv_channels": (conv_channels, (normal(2, 8, 8, 3), normal(3, 3, 3, 16, scale=0.3)),
                          (on(mesh1), on(mesh1, None, None, None, d)),
                          on(mesh1, None, None, None, d)),
        "vocab_xent": (vocab_xent, (normal(16, 32), normal(32, 64, scale=0.2),
                                    np.random.default_rng(2).integers(0, 64, 16).astype(np.int32)),
                       (on(mesh1), on(mesh1, None, d), on(mesh1)), on(mesh1)),
        "block_step": (block_step, (normal(4, 8, 32), normal(32, 32, scale=0.2),
                                    normal(32, 32, scale=0.2), normal(32, 64, scale=0.2),
                                    normal(64, 32, scale=0.2)),
                       (on(mesh2, d), on(mesh2, None, m), on(mesh2, m, None),
                        on(mesh2, None, m), on(mesh2, m, None)),
                       (on(mesh2, None, m), on(mesh2, m, None), on(mesh2, None, m),
                        on(mesh2, m, None))),
        "cumsum_split": (cumsum_split, (normal(16, 32),), (on(mesh1, None, d),),
                         on(mesh1, None, d)),
        "argmax_split": (argmax_split, (normal(16, 32),), (on(mesh1, None, d),), on(mesh1)),
        "pad_split": (pad_split, (normal(16, 32),), (on(mesh1, None, d),), on(mesh1, None, None)),
        "fused_qkv": (fused_qkv, (normal(4, 8, 32), normal(32, 96, scale=0.2),
                                  normal(32, 32, scale=0.2)),
                      (on(mesh2, d), on(mesh2, None, m), on(mesh2, m, None)), on(mesh2, d)),
        "slice_split": (slice_split, (normal(16, 32),), (on(mesh1, None, d),), on(mesh1)),
        "split_rows": (split_rows, (normal(16, 32),), (on(mesh1, d),), on(mesh1, d)),
        "some_in": (some_in, (normal(16, 32), normal(32, 32, scale=0.2)),
                    (on(mesh1, d), None), None),
    }
    # lowered with Shardy off (GSPMD's mhlo.sharding strings, see GSPMD)
    programs["mlp_2d_gspmd"] = programs["mlp_2d"]
    programs["dp_tp_step_gspmd"] = programs["dp_tp_step"]
    programs["partial_manual_gspmd"] = programs["partial_manual"]
    programs["partial_manual_out_gspmd"] = (
        partial_manual_out, (normal(16, 32), normal(32, 24, scale=0.2)),
        (on(mesh2, d, None), on(mesh2, None, m)), on(mesh2, d, m))
    programs["mesh3d"] = programs["mesh3d_gspmd"] = (
        mesh3d, (normal(16, 32), normal(32, 24, scale=0.2)),
        (on(mesh3, ("c", "a"), "b"), on(mesh3, "b", None)), on(mesh3, ("c", "a"), None))
    return refs, programs


def build(outdir: pathlib.Path, names, dump: pathlib.Path) -> None:
    import jax

    refs, programs = _programs()
    shardy = jax.config.jax_use_shardy_partitioner
    for name in names or list(programs):
        fn, args, in_sh, out_sh = programs[name]
        folder = outdir / name
        folder.mkdir(parents=True, exist_ok=True)

        def step(*a, _fn=fn):
            return _fn(*a)
        step.__name__ = step.__qualname__ = f"heldout_{name}"
        jax.config.update("jax_use_shardy_partitioner", not name.endswith(GSPMD))
        try:
            lowered = jax.jit(step, in_shardings=in_sh, out_shardings=out_sh).lower(*args)
            (folder / "lowered.mlir").write_text(lowered.as_text())
            compiled = lowered.compile()
        finally:
            jax.config.update("jax_use_shardy_partitioner", shardy)
        final = parse_collectives(compiled.as_text())
        partitioned = sorted(dump.glob(f"*jit_heldout_{name}.*after_spmd-partitioning*"))
        emitted = parse_collectives(partitioned[-1].read_text()) if partitioned else None
        ref_fn = refs.get(name, fn)
        ref = jax.jit(ref_fn)(*[jax.device_put(a, jax.devices()[0]) for a in args])
        ref = ref if isinstance(ref, tuple) else (ref,)
        np.savez(folder / "args.npz", *args)
        np.savez(folder / "ref.npz", *[np.asarray(r) for r in ref])
        (folder / "xla.json").write_text(json.dumps({
            "partitioner": emitted, "final": final, "jax": jax.__version__}, indent=1))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    outdir = pathlib.Path(argv[0])
    dump = pathlib.Path(os.environ.get("HELDOUT_DUMP", outdir / "_dump"))
    build(outdir, argv[1:], dump)
    return 0


if __name__ == "__main__":
    sys.exit(main())
