"""The fusion kinds of the fusion contract, as registered objects.

A fusion is one of three kinds, decided by what it holds (README.md, "the representation"):

* ``loop``: elementwise and data-movement ops; every result has one shape. A result may be
  written over a parameter's storage (buffers/inplace.py asks ``writes_in_place``).
* ``reduction``: one or more reduces of one input shape S over the same prefix or suffix of
  dims R, plus ops on S or on the reduced shape (up to size-1 dims), results of either.
* ``output``: one dot_general fed by parameters, plus an epilogue of the dot's shape.

The passes ask a kind for its name (the composite's ``kind`` attribute and the
``@fused_<kind>_<n>`` names), which shapes its values and results may have, and whether it
writes in place; a backend's code generator keys its kernel templates on the name
(xla_core/codegen). ``FUSION_KINDS`` holds them; ``kind_of_fusion`` reads the kind of an
outlined ``openhlo.fusion`` composite back.
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.attributes import DictAttr
from stablehlo.ir.core import Operation
from stablehlo.registry import Registry


def squeeze(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)


def reduced_shape(reduction: tuple) -> tuple:
    shape, dims = reduction
    return tuple(d for i, d in enumerate(shape) if i not in dims)


@dataclass(frozen=True)
class FusionKind:
    """One kind of fusion; ``summary`` arguments are ``legality.Summary`` objects."""
    name: str
    writes_in_place: bool  # a result may take the storage of a parameter read at its index

    def why_not(self, summary, op_set: set, names: dict) -> str | None:
        """Why ops with ``summary`` (the ops in ``op_set``) are no valid fusion of this kind;
        ``names`` are the values' printed names (``FusionGraph.names``). A loop holds any
        fusible ops."""
        return None

    def result_shapes(self, summary, shapes: list) -> tuple[set, list]:
        """(allowed result shapes, ``shapes`` as compared with them) for results of the
        sorted shapes ``shapes``."""
        return ({shapes[0]} if shapes else set()), shapes


class _ReductionKind(FusionKind):
    def _allowed(self, summary) -> set:
        return {squeeze(summary.reduction[0]), squeeze(reduced_shape(summary.reduction))}

    def why_not(self, summary, op_set: set, names: dict) -> str | None:
        allowed = self._allowed(summary)
        bad = sorted(shape for shape in summary.shapes if squeeze(shape) not in allowed)
        if bad:
            return (f"a value of shape {shape_text(bad[0])} is neither the reduction input "
                    f"{shape_text(summary.reduction[0])} nor its reduced shape "
                    f"{shape_text(reduced_shape(summary.reduction))}")
        return None

    def result_shapes(self, summary, shapes: list) -> tuple[set, list]:
        return self._allowed(summary), sorted({squeeze(shape) for shape in shapes})


class _OutputKind(FusionKind):
    def why_not(self, summary, op_set: set, names: dict) -> str | None:
        dot = summary.dots[0]
        inner = next((v for v in dot.operands if v.owner in op_set), None)
        if inner is not None:
            return (f"the dot's operands must be fusion parameters ({names[inner]} would be "
                    f"computed inside)")
        shape = dot.results[0].type.shape
        bad = sorted(s for s in summary.shapes if s != shape)
        if bad:
            return (f"a dot epilogue must keep the dot's shape {shape_text(shape)}"
                    f" (would hold {shape_text(bad[0])})")
        return None

    def result_shapes(self, summary, shapes: list) -> tuple[set, list]:
        return {summary.dots[0].results[0].type.shape}, shapes


def shape_text(shape: tuple) -> str:
    return "[" + ",".join(str(d) for d in shape) + "]"


FUSION_KINDS: Registry[FusionKind] = Registry("fusion kind")
LOOP = FUSION_KINDS.register("loop", FusionKind("loop", writes_in_place=True))
REDUCTION = FUSION_KINDS.register("reduction", _ReductionKind("reduction", writes_in_place=False))
OUTPUT = FUSION_KINDS.register("output", _OutputKind("output", writes_in_place=False))


def kind_for(summary) -> FusionKind:
    """The kind of a fusion with ``summary``: a dot makes it an output fusion, a reduce a
    reduction fusion, anything else is a loop."""
    if summary.dots:
        return OUTPUT
    return REDUCTION if summary.reduction else LOOP


def kind_of_fusion(op: Operation) -> FusionKind | None:
    """The kind of an outlined fusion composite (its ``kind`` attribute), or None when it
    names no registered kind."""
    attrs = op.attributes.get("composite_attributes")
    kind = attrs.get("kind") if isinstance(attrs, DictAttr) else None
    name = getattr(kind, "value", None)
    return FUSION_KINDS.lookup(name) if isinstance(name, str) else None


def fusion_where(op: Operation) -> str:
    """A fusion's place for profiles and logs: ``file:1:2: 'stablehlo.composite'
    @fused_loop_0 (loop)`` (its decomposition's name and its kind)."""
    callee = op.attributes.get("decomposition")
    name = getattr(callee, "name", None) or "?"
    kind = kind_of_fusion(op)
    return f"{op.where()} @{name} ({kind.name if kind is not None else 'unknown kind'})"
