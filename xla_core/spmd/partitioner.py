"""spmd-partition: rewrite a propagated global program into the per-device program.

Input: the entry function after ``sharding-propagation`` (every op's results carry
``sdy.sharding``); a program without any sharding (no mesh, no annotation) is taken as already
per-device and left alone, as propagation leaves it. Output: an entry function of the same
name whose arguments and results are one device's pieces (local shapes), each still carrying
the ``sdy.sharding`` of the global value it is a piece of; the module is marked
``openhlo.spmd_partitioned`` (as ``spmd-manual`` does), so the runtime splits arguments and
reports shardings the same way for both.

Each global value has a home piece (the local value and the layout it was computed in);
consumers ask for it in the layout they need and ``_reshard`` builds (and caches per value and
layout) the collectives: see ``reshard.py``. Per op, by its rule in ``op_rules.SPMD_RULES``:
- elementwise ops, constraints, transpose, broadcast_in_dim: operands resharded to the
  result's layout mapped back (``rules.py``), the op run on the pieces;
- reshape: local when the result's layout maps back to an operand layout that maps forward to
  it again; else the operand is gathered whole, reshaped, and the result sliced;
- dot_general: contracting dims split alike on both sides stay split: the local dot gives
  partial sums, added up by an ``all_reduce`` over those axes (then sliced when the result is
  split over them, or, with ``reduce_scatter``, a ``reduce_scatter``); other operand dims are
  resharded to the result's layout;
- convolution (no feature/batch groups): the same, with the input batch dim and the kernel
  output feature dim mapping to the result and the input/kernel feature dims contracting;
  a spatial dim split on the input stays split when the window keeps its extent (stride 1,
  "same" padding): each piece is extended by halos from its neighbours
  (``collective_permute``) and convolved without padding on that dim; other spatial dims
  are computed whole and cut to the result's layout after; a spatial dim the window spans
  whole (a kernel gradient) split alike on both sides is summed like a contracting dim, the
  input pieces extended by halos;
- reduce: reduced dims stay split when the init is the reducer's identity (local reduce, then
  ``all_reduce`` with the same reducer): the identity of its monoid
  (``stablehlo.ir.regions``), or, for an argmax/argmin body (``region_argreduce``), a value
  init that is max's/min's identity; otherwise they are gathered first;
- while, case, if: their regions partitioned in place (``control_flow.py``);
- gather, scatter, dynamic_slice, dynamic_update_slice: passthrough and batch dims stay
  split, a scatter's split updates give partial results combined across devices
  (``indexing.py``);
- sdy.manual_computation (shard_map, also partially manual: manual on some mesh axes): its
  body runs in place on pieces split over the manual axes, whole along the free ones;
- anything else (``whole(reason)`` rules) runs on whole (replicated) operands.
Collectives use ``use_global_device_ids`` (not all_to_all) and channel handles 1, 2, ... with
replica groups over logical device ids, as XLA emits them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stablehlo.builder import Builder
from stablehlo.ir.attributes import ArrayAttr, StructAttr, UnitAttr, dense, i64_array, i64_attr
from stablehlo.ir.core import Func, Module, Operation, Value
from stablehlo.ir.regions import Monoid, region_argreduce, region_monoids
from stablehlo.ir.types import I32, FloatType, TensorType, numpy_dtype

from xla_core.ir_utils import clone_region
from xla_core.passes.base import Pass, PassContext
from xla_core.spmd import reshard, rules
from xla_core.spmd.annotations import (CONSTRAINT, MANUAL_COMPUTATION, ORIGIN, PER_VALUE,
                                       MeshInfo, automatic_target, manual_dims, op_dims,
                                       read_dims, replicated, with_sharding)
from xla_core.spmd.control_flow import ControlFlow
from xla_core.spmd.indexing import Indexing
from xla_core.spmd.manual import PARTITIONED
from xla_core.spmd.op_rules import Split, spmd_rule
from xla_core.spmd.sharding import SpmdUnsupportedError


@dataclass(frozen=True)
class SpmdPartitionPass(Pass):
    name = "spmd-partition"
    entry: str = "main"
    num_devices: int = 0
    # Partial sums whose result is split over the summed axes: reduce-scattered (each device
    # receives only its part) when true; else all-reduced, then sliced locally, as XLA's
    # partitioner does (and XLA's CPU pipeline leaves it). The default keeps our collectives
    # the kinds XLA emits; a backend whose reduce-scatter is cheaper turns it on.
    reduce_scatter: bool = False

    def run(self, module: Module, ctx: PassContext) -> bool:
        target = automatic_target(module, self.entry, self.num_devices)
        if target is None:
            return False
        _Partitioner(module, *target, reduce_scatter=self.reduce_scatter).run()
        module.attributes[PARTITIONED] = UnitAttr()
        return True


class _Partitioner(ControlFlow, Indexing):
    def __init__(self, module: Module, func: Func, info: MeshInfo, reduce_scatter: bool):
        self.module = module
        self.reduce_scatter = reduce_scatter
        self.func = func
        self.info = info
        self.b = Builder(Module())
        self.home: dict = {}  # global value -> (local value, dims)
        self.cache: dict = {}  # (global value, dims) -> local value
        self.channel = 0
        self.partition_index = None

    # -- the function ------------------------------------------------------------------

    def run(self) -> None:
        func, info = self.func, self.info
        args = func.body.arguments
        arg_dims = [self._annotation(func.arg_attrs(i), a.type, f"argument {i}")
                    for i, a in enumerate(args)]
        returned = func.body.terminator.operands
        res_dims = [self._annotation(func.result_attrs(i), v.type, f"result {i}")
                    for i, v in enumerate(returned)]
        with self.b.at(func.op.location), \
                self.b.function(func.name, [self._local_type(a.type, d)
                                            for a, d in zip(args, arg_dims)]) as (new, pieces):
            for arg, piece, dims in zip(args, pieces, arg_dims):
                self.home[arg] = (piece, dims)
            for op in func.body.operations[:-1]:
                self._op(op)
            with self.b.at(func.body.terminator.location):
                self.b.return_(*[self._reshard(v, d) for v, d in zip(returned, res_dims)])
        for key, value in func.op.attributes.items():
            if key not in ("function_type", "arg_attrs", "res_attrs", "sym_name"):
                new.op.attributes[key] = value
        new.op.attributes["arg_attrs"] = ArrayAttr(tuple(
            with_sharding(func.arg_attrs(i), info, d) for i, d in enumerate(arg_dims)))
        new.op.attributes["res_attrs"] = ArrayAttr(tuple(
            with_sharding(func.result_attrs(i), info, d) for i, d in enumerate(res_dims)))
        body = self.module.body.operations
        new.op.parent = self.module.body
        body[body.index(func.op)] = new.op

    def _annotation(self, attrs, t, what: str) -> tuple:
        dims = read_dims(self.info, attrs, t.shape, f"@{self.func.name} {what}")
        return dims if dims is not None else replicated(len(t.shape))

    def _local_type(self, t, dims) -> TensorType:
        return TensorType(self.info.local_shape(dims, t.shape), t.element_type, t.encoding)

    # -- ops ---------------------------------------------------------------------------

    def _op(self, op: Operation) -> None:
        # Everything built for ``op`` (its pieces, the reshards and collectives it needs)
        # takes its location: a profile's keys are the user program's places.
        with self.b.at(op.location):
            self._partition_op(op)

    def _partition_op(self, op: Operation) -> None:
        name = op.name
        if name == CONSTRAINT:
            # each constraint moves its operand itself, not through the cache: a value
            # constrained twice (an FSDP parameter a checkpointed block reads again in
            # backward) is gathered twice, instead of the first gather being kept alive
            dims = op_dims(self.info, op)[0]
            self.home[op.results[0]] = (self._reshard(op.operands[0], dims, cached=False),
                                        dims)
            return
        if name == MANUAL_COMPUTATION:
            self._manual(op)
            return
        if not op.results:
            self._whole(op)
            return
        split = spmd_rule(op).split
        outs = op_dims(self.info, op)
        if split is Split.CONTROL_FLOW:
            self._control_flow(op, outs)
        elif split is Split.CONTRACTION and rules.contraction(op) is None:
            self._whole(op)  # grouped convolutions: no dimension map
        elif split is Split.SCATTER and rules.scatter_positions(op) is None:
            self._whole(op)
        elif split in _BY_SPLIT:
            _BY_SPLIT[split](self, op, outs[0])
        else:
            self._whole(op)

    def _elementwise(self, op: Operation, out) -> None:
        self._mapped(op, out, [out if len(v.type.shape) else () for v in op.operands])

    def _transpose(self, op: Operation, out) -> None:
        perm = list(op.attributes["permutation"].values)
        self._mapped(op, out, [rules.transpose_backward(out, perm)])

    def _broadcast(self, op: Operation, out) -> None:
        mapping = list(op.attributes["broadcast_dimensions"].values)
        self._mapped(op, out, [rules.broadcast_backward(
            out, op.operands[0].type.shape, op.results[0].type.shape, mapping)])

    def _mapped(self, op: Operation, out, targets) -> None:
        """Run ``op`` on its operands in layouts ``targets``; its result is laid out ``out``."""
        operands = [self._reshard(v, t) for v, t in zip(op.operands, targets)]
        self._emit(op, operands, [out] * len(op.results))

    def _emit(self, op: Operation, operands, outs, regions=(), attrs=None) -> list:
        attrs = {**{k: v for k, v in op.attributes.items() if k not in (PER_VALUE, ORIGIN)},
                 **(attrs or {})}
        types = [self._local_type(r.type, d) for r, d in zip(op.results, outs)]
        new = self.b.op(op.name, operands, types, attrs, regions)
        for result, piece, dims in zip(op.results, new.results, outs):
            self.home[result] = (piece, tuple(dims))
        return new.results

    def _reshape(self, op: Operation, out) -> None:
        source, result = op.operands[0].type.shape, op.results[0].type.shape
        size = self.info.mesh.axis_size
        target = rules.reshape_map(out, result, source, size)
        if rules.reshape_map(target, source, result, size) == tuple(out):
            self._mapped(op, out, [target])
            return
        # no layout of the operand reshapes locally into ``out``: reshape the whole value
        self._mapped(op, replicated(len(result)), [replicated(len(source))])

    def _dot(self, op: Operation, out) -> None:
        lhs_at, rhs_at, pairs = rules.contraction(op)
        mapped = set(lhs_at.values()) | set(rhs_at.values())
        have_l = self._layout(op.operands[0])
        have_r = self._layout(op.operands[1])
        partial, scatter = [], {}
        for d, e in pairs:
            axes = have_l[d]
            if not axes or axes != have_r[e]:
                continue
            hit = [r for r, o in enumerate(out) if set(axes) & set(o)]
            if not hit:
                partial.append((d, e, axes))
            elif (len(hit) == 1 and hit[0] not in scatter
                  and tuple(out[hit[0]][-len(axes):]) == tuple(axes)):
                partial.append((d, e, axes))
                scatter[hit[0]] = axes
        # result dims no operand dim maps to (a convolution's windowed spatial dims) are
        # computed whole, then cut to ``out``
        computed = [tuple(o[:len(o) - len(scatter.get(r, ()))]) if r in mapped else ()
                    for r, o in enumerate(out)]
        conv = op.name == "stablehlo.convolution"
        halo = rules.conv_halo(op) if conv else {}
        sums = rules.conv_window_sums(op) if conv else {}
        lhs_shape = op.operands[0].type.shape
        for d, (r, lo, hi, _) in halo.items():
            pieces = self.info.tiles((computed[r],))
            if max(lo, hi) > lhs_shape[d] // pieces:
                computed[r] = ()  # a halo wider than a piece: computed on the whole dim
        for d, (_, lo, hi, _) in sums.items():
            split = [p for p in partial if p[0] == d]
            if split and max(lo, hi) > lhs_shape[d] // self.info.tiles((split[0][2],)):
                partial.remove(split[0])  # a halo wider than a piece: summed whole
        lhs_t = [computed[lhs_at[d]] if d in lhs_at else () for d in range(len(have_l))]
        rhs_t = [computed[rhs_at[d]] if d in rhs_at else () for d in range(len(have_r))]
        for d, e, axes in partial:
            lhs_t[d] = axes
            rhs_t[e] = axes
        operands = [self._reshard(op.operands[0], lhs_t), self._reshard(op.operands[1], rhs_t)]
        attrs = None
        windowed = {d: (lo, hi, i) for d, (_, lo, hi, i) in {**halo, **sums}.items()}
        if any(lhs_t[d] for d in windowed):
            padding = op.attributes["padding"].array.reshape(-1, 2).astype(np.int64)
            for d, (lo, hi, i) in windowed.items():
                if lhs_t[d]:
                    operands[0] = self._halo(operands[0], d, lhs_t[d], lo, hi)
                    padding[i] = (0, 0)
            attrs = {"padding": dense(padding)}
        (x,) = self._emit(op, operands, [computed], attrs=attrs)
        if not self.reduce_scatter:
            scatter = {}  # everything all-reduced; the reshard to ``out`` below slices
        scattered = {a for axes in scatter.values() for a in axes}
        summed = [a for _, _, axes in partial for a in axes if a not in scattered]
        if summed:
            x = self._all_reduce(x, summed, "stablehlo.add")
        for r, axes in scatter.items():
            pieces = len(self._groups(axes)[0])
            x = self._collective("stablehlo.reduce_scatter", x, axes,
                                 {"scatter_dimension": i64_attr(r)},
                                 _scaled(x.type, r, 1, pieces), [self._adder(x.type)])
        have = tuple(tuple(o) if r in scatter else c for r, (o, c) in enumerate(zip(out, computed)))
        self.home[op.results[0]] = (x, have)
        if have != tuple(out):
            self.home[op.results[0]] = (self._reshard(op.results[0], out), tuple(out))

    def _reduce(self, op: Operation, out) -> None:
        n = len(op.operands) // 2
        reduced = sorted(op.attributes["dimensions"].values)
        have = self._layout(op.operands[0])
        target = list(rules.reduce_backward(out, len(have), set(reduced)))
        summed = []
        if identity_init(op):
            used = {a for axes in out for a in axes}
            for d in reduced:
                if have[d] and not used & set(have[d]):
                    target[d] = have[d]
                    summed += list(have[d])
        operands = [self._reshard(v, target) for v in op.operands[:n]]
        operands += [self._reshard(v, ()) for v in op.operands[n:]]
        results = self._emit(op, operands, [out] * n, [clone_region(op.regions[0], {})])
        if summed and n == 1:
            x = self._all_reduce(results[0], summed, op.regions[0])
            self.home[op.results[0]] = (x, tuple(out))
        elif summed:  # a reducer across operands (argmax): gather the partials, reduce again
            self._combine_partials(op, results, summed, out)

    def _halo(self, x: Value, d: int, axes, lo: int, hi: int) -> Value:
        """``x`` (a piece split along ``d`` over ``axes``) extended by the ``lo`` last rows of
        the previous piece and the ``hi`` first rows of the next one, exchanged with
        ``collective_permute``s; the first and last pieces get zeros there (the padding)."""
        groups = self._groups(axes).tolist()
        shape = list(x.type.shape)
        n = shape[d]
        parts = []
        for rows, start, forward in ((lo, n - lo, True), (hi, 0, False)):
            if not rows:
                parts.append(None)
                continue
            begin = [0] * len(shape)
            begin[d] = start
            limit = list(shape)
            limit[d] = start + rows
            edge = self.b.slice(x, begin, limit)
            pairs = [(g[i], g[i + 1]) if forward else (g[i + 1], g[i])
                     for g in groups for i in range(len(g) - 1)]
            parts.append(self._permute(edge, pairs))
        left, right = parts
        return self.b.concatenate([p for p in (left, x, right) if p is not None], d)

    def _combine_partials(self, op: Operation, partials, axes, out) -> None:
        """Each device's partial results of a variadic reduce, all-gathered over ``axes``
        along a new leading dim and reduced over it with the same reducer and inits."""
        b = self.b
        gathered = []
        for x in partials:
            shape = tuple(x.type.shape)
            one = b.reshape(x, (1,) + shape)
            n = len(self._groups(axes)[0])
            gathered.append(self._collective(
                "stablehlo.all_gather", one, axes, {"all_gather_dim": i64_attr(0)},
                TensorType((n,) + shape, x.type.element_type, x.type.encoding)))
        inits = [self._reshard(v, ()) for v in op.operands[len(partials):]]
        combined = b.op("stablehlo.reduce", gathered + inits, [x.type for x in partials],
                        {"dimensions": i64_array([0])}, [clone_region(op.regions[0], {})])
        for result, value in zip(op.results, combined.results):
            self.home[result] = (value, tuple(out))

    def _permute(self, x: Value, pairs) -> Value:
        """``x`` sent along ``pairs`` of (source, target) device ids (a device no pair
        targets gets zeros)."""
        self.channel += 1
        return self.b.op("stablehlo.collective_permute", [x], [x.type], {
            "source_target_pairs": dense(np.asarray(pairs, dtype=np.int64).reshape(-1, 2)),
            "channel_handle": StructAttr("channel_handle",
                                         (("handle", self.channel), ("type", 1)))}).result

    def _manual(self, op: Operation) -> None:
        """A (fully or partially) manual computation: its body is already the per-device
        program along the manual axes; it runs in place on pieces split over those axes as
        ``in_shardings`` say and whole along the free ones (each free-axis replica computing
        the same), its explicit collectives kept (renumbered after ours) and its sharding
        constraints dropped."""
        in_dims, out_dims = manual_dims(self.info, op)
        block = op.regions[0].block
        mapping = {}
        for j, (operand, dims, arg) in enumerate(zip(op.operands, in_dims, block.arguments)):
            piece = self._reshard(operand, dims)
            if tuple(piece.type.shape) != tuple(arg.type.shape):
                raise SpmdUnsupportedError(
                    f"{op.where()}: body argument {j} has type {arg.type} but operand {j} cut "
                    f"over the manual axes is {piece.type}")
            mapping[arg] = piece
        for inner in block.operations[:-1]:
            if inner.name == CONSTRAINT:
                mapping[inner.results[0]] = mapping[inner.operands[0]]
                continue
            attrs = dict(inner.attributes)
            if "channel_handle" in attrs:
                self.channel += 1
                attrs["channel_handle"] = StructAttr("channel_handle",
                                                     (("handle", self.channel), ("type", 1)))
            regions = [_without_constraints(clone_region(r, mapping)) for r in inner.regions]
            with self.b.at(inner.location):
                new = self.b.op(inner.name, [mapping[v] for v in inner.operands],
                                [r.type for r in inner.results], attrs, regions)
            mapping.update(zip(inner.results, new.results))
        for result, value, dims in zip(op.results, block.terminator.operands, out_dims):
            self.home[result] = (mapping[value], tuple(dims))

    def _whole(self, op: Operation) -> None:
        """An op without a partitioning rule: run on whole values on every device."""
        inside = {v for inner in op.walk() for v in inner.results}
        inside |= {a for inner in op.walk() for r in inner.regions for blk in r.blocks
                   for a in blk.arguments}
        for inner in list(op.walk())[1:]:
            if inner.name == MANUAL_COMPUTATION:
                raise SpmdUnsupportedError(
                    f"{inner.where()}: a manual computation (shard_map) nested in "
                    f"{op.name}: partitioning it there is not implemented")
        for inner in list(op.walk())[1:]:
            if any(v not in inside for v in inner.operands):
                raise SpmdUnsupportedError(f"{op.where()}: a region using values from outside "
                                           f"it (partitioning such ops is not implemented)")
        operands = [self._reshard(v, replicated(len(v.type.shape))) for v in op.operands]
        self._emit(op, operands, [replicated(len(r.type.shape)) for r in op.results],
                   [clone_region(r, {}) for r in op.regions])

    # -- resharding --------------------------------------------------------------------

    def _layout(self, value: Value) -> tuple:
        return self.home[value][1]

    def _reshard(self, value: Value, target, cached: bool = True) -> Value:
        piece, have = self.home[value]
        target = tuple(tuple(axes) for axes in target)
        if have == target:
            return piece
        key = (value, target)
        if key not in self.cache or not cached:
            steps, _ = reshard.plan(have, target, piece.type.shape,
                                    np.dtype(numpy_dtype(piece.type.element_type)).itemsize,
                                    self.info.mesh.axis_size)
            moved = self._apply(piece, steps)
            if not cached:
                return moved
            self.cache[key] = moved
        return self.cache[key]

    def _apply(self, x: Value, steps) -> Value:
        slices = {}
        for step in steps:
            if step[0] == "all_to_all":
                _, i, j, a = step
                n = self.info.mesh.axis_size(a)
                x = self._collective("stablehlo.all_to_all", x, (a,), {
                    "split_dimension": i64_attr(j), "concat_dimension": i64_attr(i),
                    "split_count": i64_attr(n)}, _scaled(x.type, j, 1, n, i, n), global_ids=False)
            elif step[0] == "all_gather":
                _, i, axes = step
                n = len(self._groups(axes)[0])
                x = self._collective("stablehlo.all_gather", x, axes,
                                     {"all_gather_dim": i64_attr(i)}, _scaled(x.type, i, n, 1))
            else:
                slices[step[1]] = step[2]
        return self._slice(x, slices) if slices else x

    def _slice(self, x: Value, slices: dict) -> Value:
        """Each device cuts its part: ``slices`` maps a dim to the axes newly splitting it."""
        b = self.b
        zero = b.constant(np.int32(0))
        shape = list(x.type.shape)
        starts = []
        for d, extent in enumerate(x.type.shape):
            if d not in slices:
                starts.append(zero)
                continue
            shape[d] = extent // len(self._groups(slices[d])[0])
            starts.append(self._offset(slices[d], shape[d]))
        return b.dynamic_slice(x, starts, shape)

    def _offset(self, axes, extent: int) -> Value:
        """This device's start (an i32 scalar) in a dim split over ``axes`` into parts of
        ``extent``: looked up by partition id in a table of every device's."""
        info = self.info
        return self._per_device(reshard.slice_offsets(info.coordinates(), axes, extent,
                                                      info.mesh.axis_size))

    def _per_device(self, table) -> Value:
        """This device's entry (an i32 scalar) of ``table``, indexed by logical device id."""
        b = self.b
        if self.partition_index is None:
            self.partition_index = b.convert(b.partition_id(), I32)
        table = b.constant(np.asarray(table, dtype=np.int32))
        return b.reshape(b.dynamic_slice(table, [self.partition_index], [1]), ())

    def _groups(self, axes) -> np.ndarray:
        return self.info.groups(tuple(axes))

    def _collective(self, name: str, x: Value, axes, attrs: dict, result: TensorType,
                    regions=(), global_ids: bool = True) -> Value:
        self.channel += 1
        attrs = dict(attrs)
        attrs["replica_groups"] = dense(self._groups(axes).astype(np.int64))
        attrs["channel_handle"] = StructAttr("channel_handle",
                                             (("handle", self.channel), ("type", 1)))
        if global_ids:
            attrs["use_global_device_ids"] = UnitAttr()
        return self.b.op(name, [x], [result], attrs, regions).results[0]

    def _all_reduce(self, x: Value, axes, reducer) -> Value:
        region = clone_region(reducer, {}) if not isinstance(reducer, str) else \
            self._adder(x.type)
        return self._collective("stablehlo.all_reduce", x, axes, {}, x.type, [region])

    def _adder(self, t: TensorType):
        scalar = TensorType((), t.element_type)
        return self.b.region([scalar, scalar],
                             lambda lhs, rhs: self.b.op("stablehlo.add", [lhs, rhs]).result)


def _without_constraints(region):
    """``region`` with its ``sdy.sharding_constraint`` ops removed (uses take the operand)."""
    for block in region.blocks:
        for inner in list(block.operations):
            for sub in inner.regions:
                _without_constraints(sub)
            if inner.name == CONSTRAINT:
                source = inner.operands[0]
                for other in block.operations:
                    other.operands = [source if v is inner.results[0] else v
                                      for v in other.operands]
                block.operations.remove(inner)
    return region


def _scaled(t: TensorType, dim: int, mul: int, div: int, dim2=None, mul2: int = 1) -> TensorType:
    shape = list(t.shape)
    shape[dim] = shape[dim] * mul // div
    if dim2 is not None:
        shape[dim2] *= mul2
    return TensorType(tuple(shape), t.element_type, t.encoding)


__all__ = ["SpmdPartitionPass", "identity_init"]



# The partitioner's handler of each split kind that runs on one result layout (control flow
# takes all its results' layouts; WHOLE and REPLICATED ops run whole).
_BY_SPLIT = {
    Split.ELEMENTWISE: _Partitioner._elementwise,
    Split.TRANSPOSE: _Partitioner._transpose,
    Split.BROADCAST: _Partitioner._broadcast,
    Split.RESHAPE: _Partitioner._reshape,
    Split.CONTRACTION: _Partitioner._dot,
    Split.REDUCE: _Partitioner._reduce,
    Split.GATHER: _Partitioner._gather,
    Split.SCATTER: _Partitioner._scatter,
    Split.SLICE: _Partitioner._static_slice,
    Split.DYNAMIC_SLICE: _Partitioner._dynamic_slice,
}

def identity_init(op: Operation) -> bool:
    """Whether the reduce's inits are its reducer's identity (partial reductions of the
    pieces then combine to the whole one)."""
    n = len(op.operands) // 2
    inits = [v.owner for v in op.operands[n:]]
    if any(getattr(i, "name", None) != "stablehlo.constant" for i in inits):
        return False
    monoids = region_monoids(op.regions[0])
    if monoids is not None:
        return all(_is_monoid_identity(m, i) for m, i in zip(monoids, inits))
    # An argmax/argmin: its value init must be max's/min's identity; the index init then
    # only meets a tie with that extreme value, where pieces and whole alike keep the
    # lower index.
    argreduce = region_argreduce(op.regions[0])
    return argreduce is not None and _is_monoid_identity(argreduce.value_monoid, inits[0])


def _is_monoid_identity(monoid: Monoid, init: Operation) -> bool:
    """Whether the constant ``init`` holds ``monoid``'s identity everywhere; for a float
    maximum (minimum) the lowest (highest) finite value bounds as well as infinity does."""
    value = init.attributes["value"].array
    element_type = init.results[0].type.element_type
    identity = monoid.identity(element_type)
    if identity is None:
        return False
    found = value == identity
    if isinstance(element_type, FloatType) and monoid.op in ("stablehlo.maximum",
                                                             "stablehlo.minimum"):
        finite = element_type.format.max
        found |= value == (-finite if monoid.op == "stablehlo.maximum" else finite)
    return bool(np.all(found))
