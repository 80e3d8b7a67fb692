"""The SPMD rule of every op, in one registry keyed by the op's registered name.

A rule says how shardings pass through the op (``propagation``) and how the partitioner runs
it on pieces (``partitioner``, ``indexing``, ``control_flow``): its ``Split`` kind names the
dimension mapping, whose functions are in ``rules.py``. An op without a split rule is
registered as ``Split.WHOLE`` with the reason: it runs on whole (replicated) operands on every
device, and its results are replicated.

Every op of ``stablehlo.ir.ops.OPS`` has a rule (a test checks it); elementwise ops get theirs
from the op's elementwise trait, so a new elementwise op needs no entry here. ``spmd_rule``
of an op nobody registered a rule for names it; ops of dialects OpenHLO does not model
(``sdy.*`` and others, handled by name where they matter) run whole.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass

from stablehlo.ir.core import Operation
from stablehlo.ir.ops import OPS
from stablehlo.ir.ops.base import ELEMENTWISE
from stablehlo.registry import Registry, RegistryError

from xla_core.spmd.sharding import SpmdUnsupportedError


class Split(enum.Enum):
    """How an op's operand dimensions map to its result dimensions."""
    ELEMENTWISE = "one to one"
    TRANSPOSE = "permuted"
    BROADCAST = "operand dims that are not expanded"
    RESHAPE = "major dims of runs of equal element count"
    REDUCE = "reduced dims dropped (partial results combined)"
    CONTRACTION = "batch and free dims mapped, contracting dims summed (dot, convolution)"
    GATHER = "operand passthrough and index batch dims"
    SCATTER = "input passthrough dims, scattered update dims summed"
    SLICE = "unit-stride dims"
    DYNAMIC_SLICE = "dims spanned whole"
    CONTROL_FLOW = "regions partitioned in place"
    REPLICATED = "built whole on every device"
    WHOLE = "not partitioned: runs on whole operands"


@dataclass(frozen=True)
class SpmdRule:
    split: Split
    reason: str = ""  # why a WHOLE op is not partitioned


SPMD_RULES: Registry[SpmdRule] = Registry("SPMD rule")

# Dimension maps the partitioner takes from ``rules.dim_map`` (positions and summed pairs).
DIM_MAPPED = frozenset({Split.CONTRACTION, Split.GATHER, Split.SCATTER, Split.SLICE,
                        Split.DYNAMIC_SLICE})


def whole(reason: str) -> SpmdRule:
    return SpmdRule(Split.WHOLE, reason)


def spmd_rule(op: Operation) -> SpmdRule:
    """The rule of ``op``; a registered op without one is an error naming it."""
    if op.opdef is None:
        return _UNMODELLED
    try:
        return SPMD_RULES.get(op.name)
    except RegistryError:
        raise SpmdUnsupportedError(f"{op.where()}: {op.name} has no SPMD rule (register one "
                                   f"in xla_core/spmd/op_rules.py)") from None


_UNMODELLED = whole("an op OpenHLO does not model")

_NOT_YET = "no split rule yet: computed on whole operands on every device"
_COLLECTIVE = "a collective written in the global program runs on whole values"
_EFFECT = "acts on the world or on tokens: once per device, on whole values"
_OPAQUE = "opaque to the compiler: runs on whole operands"
_RANDOM = "random values of the whole shape: pieces must not repeat each other's bits"
_DYNAMIC = "a dynamic shape: only static shapes are partitioned"
_STRUCTURE = "structure, not computation: the partitioner walks it"

_RULES = {
    Split.TRANSPOSE: ["stablehlo.transpose"],
    Split.BROADCAST: ["stablehlo.broadcast_in_dim"],
    Split.RESHAPE: ["stablehlo.reshape"],
    Split.REDUCE: ["stablehlo.reduce"],
    Split.CONTRACTION: ["stablehlo.dot_general", "stablehlo.convolution"],
    Split.GATHER: ["stablehlo.gather"],
    Split.SCATTER: ["stablehlo.scatter"],
    Split.SLICE: ["stablehlo.slice"],
    Split.DYNAMIC_SLICE: ["stablehlo.dynamic_slice", "stablehlo.dynamic_update_slice"],
    Split.CONTROL_FLOW: ["stablehlo.while", "stablehlo.case", "stablehlo.if"],
    Split.REPLICATED: ["stablehlo.constant", "stablehlo.iota"],
}
_WHOLE = {
    _NOT_YET: [
        "stablehlo.broadcast", "stablehlo.concatenate", "stablehlo.pad", "stablehlo.reverse",
        "stablehlo.torch_index_select", "stablehlo.get_tuple_element", "stablehlo.tuple",
        "stablehlo.get_dimension_size", "stablehlo.bitcast_convert", "stablehlo.dot",
        "stablehlo.einsum", "stablehlo.unary_einsum", "stablehlo.fft", "stablehlo.cholesky",
        "stablehlo.triangular_solve", "stablehlo.batch_norm_training",
        "stablehlo.batch_norm_inference", "stablehlo.batch_norm_grad", "stablehlo.sort",
        "stablehlo.map", "stablehlo.reduce_window", "stablehlo.select_and_scatter",
        "chlo.top_k", "chlo.ragged_dot", "chlo.scan",
    ],
    _COLLECTIVE: [
        "stablehlo.replica_id", "stablehlo.partition_id", "stablehlo.all_gather",
        "stablehlo.all_reduce", "stablehlo.reduce_scatter", "stablehlo.all_to_all",
        "stablehlo.collective_permute", "stablehlo.collective_broadcast",
        "stablehlo.collective_reduce",
    ],
    _EFFECT: [
        "stablehlo.infeed", "stablehlo.outfeed", "stablehlo.send", "stablehlo.recv",
        "stablehlo.after_all", "stablehlo.create_token", "stablehlo.async_start",
        "stablehlo.async_done", "openhlo.async_start", "openhlo.async_done",
        "check.expect_eq", "check.expect_eq_const",
        "check.expect_almost_eq", "check.expect_almost_eq_const", "check.expect_close",
        "check.expect_serialized_eq", "interpreter.probe", "interpreter.run_parallel",
        "interpreter.print",
    ],
    _OPAQUE: ["stablehlo.custom_call", "stablehlo.composite", "func.call",
              "stablehlo.optimization_barrier"],
    _RANDOM: ["stablehlo.rng", "stablehlo.rng_bit_generator"],
    _DYNAMIC: [
        "stablehlo.set_dimension_size", "stablehlo.dynamic_iota",
        "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_reshape",
        "stablehlo.dynamic_pad", "stablehlo.real_dynamic_slice", "stablehlo.dynamic_gather",
        "stablehlo.dynamic_conv",
    ],
    _STRUCTURE: ["builtin.module", "func.func", "func.return", "stablehlo.return"],
}

for _split, _names in _RULES.items():
    for _name in _names:
        SPMD_RULES.register(_name, SpmdRule(_split))
for _reason, _names in _WHOLE.items():
    for _name in _names:
        SPMD_RULES.register(_name, whole(_reason))
# Elementwise ops (convert, compare, select, clamp included) map dims one to one.
for _name in OPS.names():
    if OPS.get(_name).has(ELEMENTWISE):
        SPMD_RULES.register(_name, SpmdRule(Split.ELEMENTWISE))


__all__ = ["DIM_MAPPED", "SPMD_RULES", "Split", "SpmdRule", "spmd_rule", "whole"]
