"""Auto-sharded ``jax.jit`` on openhlo devices: the in/out shardings auto-sharding chooses.

JAX has no auto-sharding entry point of its own any more, so this one works beside
``jax.jit``: it lowers ``fn`` for example arguments, runs ``xla_core.spmd.auto_sharding`` on
the StableHLO and returns the chosen argument and result layouts as ``NamedSharding``s on
the user's mesh, which ``jax.jit`` takes as they are:

    mesh = Mesh(np.array(jax.devices()), ("model",))        # OPENHLO_JAX_NUM_DEVICES=8
    chosen = auto_shardings(mlp, mesh, x, w1, w2, memory_limit="64MiB")
    print("\\n".join(chosen.plan.explain()))                 # what was chosen, and why
    step = jax.jit(mlp, in_shardings=chosen.in_shardings, out_shardings=chosen.out_shardings)

The example arguments only give shapes and dtypes (arrays or ``jax.ShapeDtypeStruct``s,
in any pytree); their own placements are ignored. Layouts inside ``fn`` are propagation's
from the chosen argument and result shardings when the program is compiled; a
``jax.lax.with_sharding_constraint`` inside ``fn`` is kept by the plan as a constraint.
"""
from __future__ import annotations

from dataclasses import dataclass

import jax
from jax.sharding import NamedSharding, PartitionSpec

from stablehlo.ir.sharding import Mesh as SpmdMesh
from stablehlo.text import parse_module
from pjrt.plugins.compiler_services import (DEFAULT_TIME_LIMIT_S, AutoShardingError, Plan,
                                            auto_shard, run_passes)


@dataclass(frozen=True)
class AutoShardings:
    """What ``auto_shardings`` chose: ``in_shardings`` (a tuple with one pytree of
    ``NamedSharding``s per positional argument of ``fn``), ``out_shardings`` (a pytree shaped
    like ``fn``'s result) and the ``plan`` they come from (``plan.explain()``)."""
    in_shardings: tuple
    out_shardings: object
    plan: Plan


def auto_shardings(fn, mesh: jax.sharding.Mesh, *example_args, memory_limit=None,
                   hardware: str = "cpu",
                   time_limit_s: float = DEFAULT_TIME_LIMIT_S) -> AutoShardings:
    """The shardings auto-sharding picks for ``fn(*example_args)`` on ``mesh`` (a
    ``jax.sharding.Mesh``; only its axis names and sizes matter to the choice), under
    ``memory_limit`` bytes per device (an int or text such as ``"2GiB"``; None: no limit),
    costed on the ``xla_core.cost`` hardware description ``hardware``, solved within
    ``time_limit_s`` seconds (then the greedy plan is used, and the plan says so)."""
    if not isinstance(mesh, jax.sharding.Mesh):
        raise AutoShardingError(f"auto_shardings: mesh must be a jax.sharding.Mesh, got "
                                f"{type(mesh).__name__}")
    shapes = jax.tree.map(_shape_of, example_args)
    # keep_unused: the program's arguments are then exactly the example arguments' leaves
    lowered = jax.jit(fn, keep_unused=True).lower(*shapes)
    module = parse_module(lowered.as_text(), f"<jax.jit({_name(fn)})>")
    # auto-sharding sees a call as one opaque op: JAX lowers jax.nn functions as calls
    run_passes(module, "inline")
    plan = auto_shard(module, _spmd_mesh(mesh), memory_limit=memory_limit,
                      hardware=hardware, time_limit_s=time_limit_s)
    if len(plan.arguments) != lowered.in_tree.num_leaves:
        raise AutoShardingError(f"auto_shardings: jax lowered {_name(fn)} to "
                                f"{len(plan.arguments)} argument(s) for "
                                f"{lowered.in_tree.num_leaves} example leaves")
    args, _ = jax.tree.unflatten(lowered.in_tree,
                                 [_named(mesh, dims) for dims in plan.arguments])
    out = jax.tree.unflatten(lowered.out_tree, [_named(mesh, dims) for dims in plan.results])
    return AutoShardings(tuple(args), out, plan)


def _shape_of(leaf):
    """An example leaf as its shape and dtype alone (its placement must not constrain the
    plan); Python scalars stay as they are (JAX lowers them weakly typed)."""
    if hasattr(leaf, "shape") and hasattr(leaf, "dtype"):
        return jax.ShapeDtypeStruct(leaf.shape, leaf.dtype)
    return leaf


def _spmd_mesh(mesh: jax.sharding.Mesh) -> SpmdMesh:
    return SpmdMesh(tuple((name, int(size)) for name, size in mesh.shape.items()))


def _named(mesh: jax.sharding.Mesh, dims) -> NamedSharding:
    """A layout (per dimension, the mesh axes splitting it) as a ``NamedSharding``; a value
    without one (not a tensor) is replicated."""
    entries = [None if not axes else axes[0] if len(axes) == 1 else tuple(axes)
               for axes in dims or ()]
    return NamedSharding(mesh, PartitionSpec(*entries))


def _name(fn) -> str:
    return getattr(fn, "__name__", type(fn).__name__)


__all__ = ["AutoShardings", "auto_shardings"]
