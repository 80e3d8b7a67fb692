"""The partitioner's indexing ops: gather, scatter, dynamic_slice, dynamic_update_slice
(``rules.gather_positions``, ``rules.scatter_positions``, ``rules.slice_positions`` say which
dims map to the result).

- gather: the operand's passthrough dims and the indices' batch dims keep the result's split,
  the operand's indexed dims are whole: each device gathers its part of the result from its
  part of the operand (an embedding lookup with batch-split ids, or from a table split along
  the hidden dim). Result dims nothing maps to are gathered whole, then cut. A lookup in a
  table split along the looked-up dim (a vocabulary-parallel embedding) keeps it split, as
  XLA does: each device looks up the indices that fall in its rows, zeroes the others, and
  an ``all_reduce`` sums the parts (result bytes, not the table's).
- scatter: the input's passthrough dims and the update window dims over them keep the
  result's split. Update dims split over axes the result does not use stay split (the
  indices split alike) when the scatter's reducer has an identity: each device scatters its
  updates into the identity, the parts are combined by an ``all_reduce`` with the reducer
  and then with the input (the embedding gradient: a scatter-add of batch-split updates).
- slice, dynamic_slice, dynamic_update_slice: the dims sliced (updated) whole keep the
  result's split, the others are whole (a scan's step reading and writing one time step of
  batch-split sequences runs on each device's part of the batch).
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import i64_array
from stablehlo.ir.core import Operation
from stablehlo.ir.types import numpy_dtype

from xla_core.ir_utils import clone_region
from xla_core.spmd import rules


class Indexing:
    """Mixed into ``_Partitioner`` (``partitioner.py``), whose state and helpers it uses."""

    def _gather(self, op: Operation, out) -> None:
        positions = rules.gather_positions(op)
        targets = [list(_targets(v, at, out)) for v, at in zip(op.operands, positions)]
        lookup = rules.point_lookup_dim(op)
        split = ()
        if lookup is not None:  # a table split along the looked-up dim stays split
            have = self._layout(op.operands[0])[lookup]
            if have and not {a for axes in out for a in axes} & set(have):
                split = targets[0][lookup] = tuple(have)
        operand, indices = (self._reshard(v, t) for v, t in zip(op.operands, targets))
        shape = op.operands[0].type.shape
        sizes = list(op.attributes["slice_sizes"].values)
        for d in positions[0]:
            if sizes[d] == shape[d]:  # a passthrough dim: the slice spans the local piece
                sizes[d] = operand.type.shape[d]
        mask = None
        if split:
            indices, mask = self._local_indices(indices, split, operand.type.shape[lookup])
        computed = _computed(out, positions)
        (x,) = self._emit(op, [operand, indices], [computed],
                          attrs={"slice_sizes": i64_array(sizes)})
        if split:  # rows found elsewhere are zero here; the sum over the split has them all
            b = self.b
            dims = [r for j, r in sorted(positions[1].items())]
            mask = b.broadcast_in_dim(b.reshape(mask, tuple(x.type.shape[r] for r in dims)),
                                      x.type.shape, dims)
            zero = b.broadcast_in_dim(b.constant(np.zeros((), numpy_dtype(
                x.type.element_type)), x.type.element_type), x.type.shape, [])
            x = self._all_reduce(b.select(mask, x, zero), split, "stablehlo.add")
        self._settle(op, x, computed, out)

    def _local_indices(self, indices, axes, extent: int):
        """Indices into a dim split over ``axes`` made local to this device's part of
        ``extent`` rows, and whether each falls in it (XLA's masked lookup)."""
        b = self.b
        etype = indices.type.element_type
        offset = b.broadcast_in_dim(b.convert(self._offset(axes, extent), etype),
                                    indices.type.shape, [])
        local = b.subtract(indices, offset)

        def bound(v):
            return b.broadcast_in_dim(b.constant(np.array(v, numpy_dtype(etype)), etype),
                                      indices.type.shape, [])
        inside = b.and_(b.compare(local, bound(0), "GE"), b.compare(local, bound(extent), "LT"))
        return local, inside

    def _dynamic_slice(self, op: Operation, out) -> None:
        positions = rules.slice_positions(op)
        operands = [self._reshard(v, _targets(v, at, out))
                    for v, at in zip(op.operands, positions)]
        attrs = None
        if op.name == "stablehlo.slice":  # the dims spanned whole: the local piece whole
            limits = list(op.attributes["limit_indices"].values)
            for d in positions[0]:
                limits[d] = operands[0].type.shape[d]
            attrs = {"limit_indices": i64_array(limits)}
        elif op.name == "stablehlo.dynamic_slice":
            sizes = list(op.attributes["slice_sizes"].values)
            for d in positions[0]:  # spans the dim whole: the local piece whole
                sizes[d] = operands[0].type.shape[d]
            attrs = {"slice_sizes": i64_array(sizes)}
        computed = _computed(out, positions)
        (x,) = self._emit(op, operands, [computed], attrs=attrs)
        self._settle(op, x, computed, out)

    def _scatter(self, op: Operation, out) -> None:
        inputs_at, indices_at, updates_at, pairs = rules.scatter_positions(op)
        source, index, update = op.operands
        indices_t = list(_targets(index, indices_at, out))
        updates_t = list(_targets(update, updates_at, out))
        dtype = np.dtype(numpy_dtype(op.results[0].type.element_type))
        reducer = rules.reducer_identity(op.regions[0], dtype)
        summed = []
        if reducer is not None:
            have = self._layout(update)
            used = {a for axes in out for a in axes}
            for j, u in pairs:
                if have[u] and not used & set(have[u]):
                    indices_t[j] = updates_t[u] = have[u]
                    used |= set(have[u])
                    summed += list(have[u])
        base = self._reshard(source, _targets(source, inputs_at, out))
        start = base
        if summed:  # devices scatter their parts of the updates into the identity
            name, identity = reducer
            start = self.b.broadcast_in_dim(
                self.b.constant(np.array(identity, dtype), op.results[0].type.element_type),
                base.type.shape, [])
        operands = [start, self._reshard(index, indices_t), self._reshard(update, updates_t)]
        computed = _computed(out, [inputs_at])
        (x,) = self._emit(op, operands, [computed], [clone_region(op.regions[0], {})])
        if summed:
            x = self._all_reduce(x, summed, op.regions[0])
            x = self.b.op(name, [base, x]).result
        self._settle(op, x, computed, out)

    def _settle(self, op: Operation, x, computed, out) -> None:
        """``x``, ``op``'s result laid out ``computed``, becomes its home piece, resharded
        to ``out``."""
        self.home[op.results[0]] = (x, computed)
        out = tuple(tuple(axes) for axes in out)
        if computed != out:
            self.home[op.results[0]] = (self._reshard(op.results[0], out), out)


def _computed(out, positions) -> tuple:
    """The layout an op computes its result in: ``out`` on the result dims some operand dim
    maps to (``positions``), the others whole."""
    mapped = {r for at in positions for r in at.values()}
    return tuple(tuple(axes) if r in mapped else () for r, axes in enumerate(out))


def _targets(value, at: dict, out) -> tuple:
    """The layout of an operand whose dims ``at`` maps to result dims laid out ``out``."""
    return tuple(tuple(out[at[d]]) if d in at else () for d in range(len(value.type.shape)))


__all__ = ["Indexing"]
