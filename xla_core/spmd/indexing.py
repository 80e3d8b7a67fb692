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
- slice: as below, and a cut dim split alike on operand and result stays split, each
  device fetching its part from the pieces that hold it with ``collective_permute``s (XLA's
  way; a fused QKV projection split three ways along a column-split dim).
- slice, dynamic_slice, dynamic_update_slice: the dims sliced (updated) whole keep the
  result's split, the others are whole (a scan's step reading and writing one time step of
  batch-split sequences runs on each device's part of the batch).
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.attributes import i64_array
from stablehlo.ir.core import Operation
from stablehlo.ir.regions import region_monoid
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

    def _static_slice(self, op: Operation, out) -> None:
        """A static slice: the dims it spans whole keep the result's split; a dim it cuts
        that is split alike on the operand and the result (stride 1, both divisible) stays
        split, each device fetching its part from the pieces holding it
        (``_fetch_slice``); other cut dims are sliced whole."""
        attrs = op.attributes
        starts, limits = list(attrs["start_indices"].values), list(attrs["limit_indices"].values)
        strides = list(attrs["strides"].values)
        shape = op.operands[0].type.shape
        spanned = {d for d in range(len(shape))
                   if starts[d] == 0 and limits[d] == shape[d] and strides[d] == 1}
        have = self._layout(op.operands[0])
        split = None
        for d in range(len(shape)):
            axes = tuple(out[d])
            if d in spanned or strides[d] != 1 or not axes or tuple(have[d]) != axes:
                continue
            n = self.info.tiles((axes,))
            if shape[d] % n == 0 and (limits[d] - starts[d]) % n == 0:
                split = d
                break
        kept = set(spanned) | ({split} if split is not None else set())
        target = tuple(tuple(out[d]) if d in kept else () for d in range(len(shape)))
        x = self._reshard(op.operands[0], target)
        local = [(0, x.type.shape[d]) if d in kept else (starts[d], limits[d])
                 for d in range(len(shape))]
        x = self.b.slice(x, [lo for lo, _ in local], [hi for _, hi in local],
                         [1 if d in kept else strides[d] for d in range(len(shape))])
        if split is not None:
            x = self._fetch_slice(x, split, target[split], starts[split],
                                  limits[split] - starts[split], shape[split])
        self._settle(op, x, target, out)

    def _fetch_slice(self, x, d: int, axes, start: int, length: int, extent: int):
        """This device's part of ``[start, start + length)`` of dim ``d`` (``extent`` long,
        split over ``axes``; ``x`` is this device's piece), as XLA does it: each part lies on
        one or a few neighbouring pieces; per shift between the piece and the part's device,
        every sender cuts the rows its receiver needs (offsets looked up per device, one
        static width: the widest), a ``collective_permute`` delivers them, and the receiver
        writes them at their place in its part. Writes go in order of source piece, so the
        tail of a shorter fragment is overwritten by the next one or falls in padding."""
        b = self.b
        n = self.info.tiles((axes,))
        piece, part = extent // n, length // n
        blocks = []  # per coordinate along axes: {shift: (offset in piece, offset in part, rows)}
        for i in range(n):
            lo, hi = start + i * part, start + (i + 1) * part
            found = {}
            for j in range(lo // piece, (hi - 1) // piece + 1):
                begin, end = max(lo, j * piece), min(hi, (j + 1) * piece)
                found[j - i] = (begin - j * piece, begin - lo, end - begin)
            blocks.append(found)
        width: dict = {}  # per shift, the widest fragment any device needs from it
        for found in blocks:
            for r, (_, _, rows) in found.items():
                width[r] = max(width.get(r, 0), rows)
        pad = max(width.values())
        shape = list(x.type.shape)
        etype = x.type.element_type
        zero = b.constant(np.zeros((), numpy_dtype(etype)), etype)
        high = [pad if k == d else 0 for k in range(len(shape))]
        source = b.pad(x, zero, [0] * len(shape), high)
        buffer = b.broadcast_in_dim(zero, tuple(part + pad if k == d else e
                                                for k, e in enumerate(shape)), [])
        index_zero = b.constant(np.int32(0))
        groups = self._groups(axes).tolist()
        devices = len(self.info.coordinates())
        for r in sorted(width):
            send, place = np.zeros(devices, np.int32), np.full(devices, part, np.int32)
            pairs = []
            for group in groups:
                for i, device in enumerate(group):
                    if r in blocks[i]:
                        src_offset, part_offset, _ = blocks[i][r]
                        send[group[i + r]] = src_offset
                        place[device] = part_offset
                        pairs.append((group[i + r], device))
            starts = [index_zero] * len(shape)
            starts[d] = self._per_device(send)
            sizes = [width[r] if k == d else e for k, e in enumerate(shape)]
            fragment = b.dynamic_slice(source, starts, sizes)
            if r:
                fragment = self._permute(fragment, pairs)
            starts = [index_zero] * len(shape)
            starts[d] = self._per_device(place)
            buffer = b.dynamic_update_slice(buffer, fragment, starts)
        return b.slice(buffer, [0] * len(shape),
                       [part if k == d else e for k, e in enumerate(shape)])

    def _dynamic_slice(self, op: Operation, out) -> None:
        positions = rules.slice_positions(op)
        operands = [self._reshard(v, _targets(v, at, out))
                    for v, at in zip(op.operands, positions)]
        attrs = None
        if op.name == "stablehlo.dynamic_slice":
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
        element_type = op.results[0].type.element_type
        monoid = region_monoid(op.regions[0])
        identity = monoid.identity(element_type) if monoid is not None else None
        summed = []
        if identity is not None:
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
            dtype = np.dtype(numpy_dtype(element_type))
            start = self.b.broadcast_in_dim(
                self.b.constant(np.array(identity, dtype), element_type),
                base.type.shape, [])
        operands = [start, self._reshard(index, indices_t), self._reshard(update, updates_t)]
        computed = _computed(out, [inputs_at])
        (x,) = self._emit(op, operands, [computed], [clone_region(op.regions[0], {})])
        if summed:
            x = self._all_reduce(x, summed, op.regions[0])
            x = self.b.op(monoid.op, [base, x]).result
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
