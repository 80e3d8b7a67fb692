"""The JAX side of ``tools.spmd_heldout``: run in a subprocess with 8 host cpu devices.

``python -m tools.spmd_heldout_jax OUTDIR [NAME ...]`` writes, per held-out program, a folder
``OUTDIR/NAME`` with ``lowered.mlir`` (``jax.jit(...).lower(...).as_text()``, Shardy
shardings), ``args.npz`` and ``ref.npz`` (the inputs and the unsharded results: the same
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

    d, m = "data", "model"
    # the unsharded math of a program whose jitted form needs the mesh
    refs = {"partial_manual": lambda x, w: jnp.tanh(x @ w)}
    return refs, {
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
    }


def build(outdir: pathlib.Path, names, dump: pathlib.Path) -> None:
    import jax

    refs, programs = _programs()
    for name in names or list(programs):
        fn, args, in_sh, out_sh = programs[name]
        folder = outdir / name
        folder.mkdir(parents=True, exist_ok=True)

        def step(*a, _fn=fn):
            return _fn(*a)
        step.__name__ = step.__qualname__ = f"heldout_{name}"
        lowered = jax.jit(step, in_shardings=in_sh, out_shardings=out_sh).lower(*args)
        (folder / "lowered.mlir").write_text(lowered.as_text())
        compiled = lowered.compile()
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
