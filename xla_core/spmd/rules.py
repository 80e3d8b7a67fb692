"""How shardings pass through ops, dimension by dimension: the rules propagation applies and
the partitioner relies on (a sharding these rules map is one the op can run on locally).

Every function takes and returns per-dimension axis tuples (see ``annotations``).
"""
from __future__ import annotations

import math

from stablehlo.ir.core import Operation

from xla_core.spmd.op_rules import Split, spmd_rule


def dot_dims(op: Operation) -> tuple:
    """``(lhs_batch, rhs_batch, lhs_contracting, rhs_contracting, lhs_free, rhs_free)``;
    the result's dimensions are batch, then lhs free, then rhs free."""
    dnums = op.attributes["dot_dimension_numbers"]
    lb = tuple(dnums.get("lhs_batching_dimensions", ()) or ())
    rb = tuple(dnums.get("rhs_batching_dimensions", ()) or ())
    lc = tuple(dnums.get("lhs_contracting_dimensions", ()) or ())
    rc = tuple(dnums.get("rhs_contracting_dimensions", ()) or ())
    lhs_rank = len(op.operands[0].type.shape)
    rhs_rank = len(op.operands[1].type.shape)
    lf = tuple(d for d in range(lhs_rank) if d not in lb + lc)
    rf = tuple(d for d in range(rhs_rank) if d not in rb + rc)
    return lb, rb, lc, rc, lf, rf


def dot_result_positions(op: Operation) -> tuple:
    """Result dimension of each lhs and rhs dimension (None for contracting ones)."""
    lb, rb, _, _, lf, rf = dot_dims(op)
    lhs = {d: i for i, d in enumerate(lb)}
    rhs = {d: i for i, d in enumerate(rb)}
    lhs.update({d: len(lb) + i for i, d in enumerate(lf)})
    rhs.update({d: len(lb) + len(lf) + i for i, d in enumerate(rf)})
    return lhs, rhs


def contraction(op: Operation):
    """How a dot_general or convolution maps its operands' dims: ``(lhs positions, rhs
    positions, contracting pairs)``, the positions mapping an operand dim to the result dim it
    becomes and the pairs ``(lhs dim, rhs dim)`` summed over together. A convolution's spatial
    dims are in neither (they are windowed: the partitioner keeps them whole); grouped
    convolutions have no mapping (None)."""
    if op.name == "stablehlo.dot_general":
        _, _, lc, rc, _, _ = dot_dims(op)
        lhs, rhs = dot_result_positions(op)
        return lhs, rhs, list(zip(lc, rc))
    if op.name == "stablehlo.convolution":
        groups = [op.attributes.get(k) for k in ("feature_group_count", "batch_group_count")]
        if any(g is not None and g.value != 1 for g in groups):
            return None
        dn = op.attributes["dimension_numbers"]
        lhs = {dn.input_batch_dimension: dn.output_batch_dimension}
        lhs.update({d: out for d, (out, _, _, _) in conv_halo(op).items()})
        pairs = [(dn.input_feature_dimension, dn.kernel_input_feature_dimension)]
        pairs += [(d, e) for d, (e, _, _, _) in conv_window_sums(op).items()]
        return (lhs, {dn.kernel_output_feature_dimension: dn.output_feature_dimension}, pairs)
    return None


def _ints(attr, name: str) -> tuple:
    return tuple(attr.get(name, ()) or ())


def gather_positions(op: Operation) -> tuple:
    """How a gather maps its operands' dims to the result's: ``(operand positions, indices
    positions)``, each mapping an operand dim to the result dim it becomes. The operand's
    passthrough dims (sliced whole and never indexed) map to their offset dims, its batching
    dims and the indices' batch dims to the result's batch dims: split alike there, each
    device gathers its own part. Indexed operand dims are in neither (kept whole)."""
    dn = op.attributes["dimension_numbers"]
    offset = _ints(dn, "offset_dims")
    collapsed, operand_batch = _ints(dn, "collapsed_slice_dims"), _ints(dn, "operand_batching_dims")
    start_map, ivd = _ints(dn, "start_index_map"), dn.get("index_vector_dim")
    sizes = list(op.attributes["slice_sizes"].values)
    shape = op.operands[0].type.shape
    batch = [r for r in range(len(op.results[0].type.shape)) if r not in offset]
    indices = {j: r for j, r in zip((j for j in range(len(op.operands[1].type.shape))
                                     if j != ivd), batch)}
    window = [d for d in range(len(shape)) if d not in collapsed + operand_batch]
    operand = {d: r for d, r in zip(window, offset) if d not in start_map and sizes[d] == shape[d]}
    for d, j in zip(operand_batch, _ints(dn, "start_indices_batching_dims")):
        operand[d] = indices[j]
    return operand, indices


def point_lookup_dim(op: Operation):
    """The operand dim a gather reads one position of per index (an embedding lookup, or
    ``take_along_axis`` with its batching dims: one start index component, slice size 1
    there), or None."""
    dn = op.attributes["dimension_numbers"]
    start_map = _ints(dn, "start_index_map")
    if len(start_map) != 1:
        return None
    ishape, ivd = op.operands[1].type.shape, dn.get("index_vector_dim")
    if ivd is not None and ivd < len(ishape) and ishape[ivd] != 1:
        return None
    d = start_map[0]
    return d if op.attributes["slice_sizes"].values[d] == 1 else None


def scatter_positions(op: Operation):
    """How a one-input scatter maps its operands' dims to the result's: ``(input positions,
    indices positions, updates positions, pairs)``. The input's passthrough dims (never
    indexed, the update window spanning them whole) and the update window dims over them map
    to those result dims; the input's batching dims, with the indices' batching dims and the
    update dims paired with them, to theirs. ``pairs`` are the ``(indices dim, updates dim)``
    the updates are scattered over: split alike, each device scatters its part of the
    updates and the parts are combined by the scatter's reducer across devices. None for a
    scatter of several inputs."""
    if len(op.operands) != 3:
        return None
    dn = op.attributes["scatter_dimension_numbers"]
    window, inserted = _ints(dn, "update_window_dims"), _ints(dn, "inserted_window_dims")
    input_batch = _ints(dn, "input_batching_dims")
    indices_batch = _ints(dn, "scatter_indices_batching_dims")
    to_operand, ivd = _ints(dn, "scatter_dims_to_operand_dims"), dn.get("index_vector_dim")
    shape, updates_shape = op.operands[0].type.shape, op.operands[2].type.shape
    source = [d for d in range(len(shape)) if d not in inserted + input_batch]
    inputs, updates = {}, {}
    for d, w in zip(source, window):
        if d not in to_operand and updates_shape[w] == shape[d]:
            inputs[d] = updates[w] = d
    scattered = [u for u in range(len(updates_shape)) if u not in window]
    pairs = list(zip((j for j in range(len(op.operands[1].type.shape)) if j != ivd), scattered))
    indices = {}
    for d, j in zip(input_batch, indices_batch):
        u = dict(pairs)[j]
        inputs[d] = indices[j] = updates[u] = d
        pairs.remove((j, u))
    return inputs, indices, updates, pairs


def slice_positions(op: Operation) -> list:
    """How a slice, dynamic_slice or dynamic_update_slice maps its operands' dims to the
    result's: the dims a dynamic slice (update) spans whole, where every start index is
    clamped to 0, map to themselves, the others are cut at run-time offsets (kept whole);
    a static slice maps its unit-stride dims (the partitioner fetches a split part that
    does not line up with the operand's pieces). Dynamic start indices are scalars."""
    shape = op.operands[0].type.shape
    if op.name == "stablehlo.slice":  # unit strides: a split piece of the result is fetched
        strides = op.attributes["strides"].values
        return [{d: d for d in range(len(shape)) if strides[d] == 1}]
    if op.name == "stablehlo.dynamic_slice":
        sizes = list(op.attributes["slice_sizes"].values)
        spans = [{d: d for d in range(len(shape)) if sizes[d] == shape[d]}]
    else:
        update = op.operands[1].type.shape
        spans = [{d: d for d in range(len(shape)) if update[d] == shape[d]}] * 2
    return spans + [{}] * (len(op.operands) - len(spans))


def dim_map(op: Operation):
    """``(positions, pairs)`` of an op whose operand dims map to result dims one to one
    (dot_general, convolution, gather, one-input scatter, dynamic slices), else None:
    ``positions[i]`` maps operand ``i``'s dims to result dims; ``pairs`` are
    ``((i, d), (j, e))``: dims of two operands that are summed over (or scattered over)
    together, kept split alike."""
    split = spmd_rule(op).split
    if split in (Split.SLICE, Split.DYNAMIC_SLICE):
        return slice_positions(op), []
    if split is Split.CONTRACTION:
        mapped = contraction(op)
        if mapped is None:
            return None
        lhs, rhs, pairs = mapped
        return [lhs, rhs], [((0, d), (1, e)) for d, e in pairs]
    if split is Split.GATHER:
        return list(gather_positions(op)), []
    if split is Split.SCATTER:
        mapped = scatter_positions(op)
        if mapped is None:
            return None
        inputs, indices, updates, pairs = mapped
        return [inputs, indices, updates], [((1, j), (2, u)) for j, u in pairs]
    return None


def _window(op: Operation, name: str, count: int, default: int) -> list:
    attr = op.attributes.get(name)
    return list(attr.values) if attr is not None else [default] * count


def conv_window_sums(op: Operation) -> dict:
    """The spatial dims of a convolution whose window spans the whole input dim (as in a
    kernel gradient: the "kernel" is the output gradient): stride and dilations 1, no window
    reversal, window and
    input of the same extent. Splitting both alike gives partial sums of every output position
    once each input piece has a halo of ``lo`` rows before and ``hi`` after.
    ``{input dim: (kernel dim, lo, hi, index among the spatial dims)}``."""
    dn = op.attributes["dimension_numbers"]
    spatial = list(dn.input_spatial_dimensions)
    count = len(spatial)
    dilations = zip(_window(op, "window_strides", count, 1), _window(op, "lhs_dilation", count, 1),
                    _window(op, "rhs_dilation", count, 1))
    padding = op.attributes.get("padding")
    pads = padding.array.reshape(-1, 2).tolist() if padding is not None else [[0, 0]] * count
    lhs, rhs = op.operands[0].type.shape, op.operands[1].type.shape
    reversal = _window(op, "window_reversal", count, False)
    halo = conv_halo(op)
    out = {}
    for i, (d, steps) in enumerate(zip(spatial, dilations)):
        if reversal[i] or d in halo:  # a halo dim maps to the result instead
            continue  # a reversed window pairs a piece with another part of the input
        e = dn.kernel_spatial_dimensions[i]
        lo, hi = (int(p) for p in pads[i])
        if steps == (1, 1, 1) and lhs[d] == rhs[e] and lo >= 0 and hi >= 0 and lhs[d] > 1:
            out[d] = (e, lo, hi, i)
    return out


def conv_halo(op: Operation) -> dict:
    """The spatial dims of a convolution that a split input can keep split, each device
    extending its piece by a halo from its neighbours: stride 1, no input dilation, padding
    ``(lo, hi)`` with ``lo + hi`` the (dilated) window extent less one, so the output dim has
    the input's extent and output piece i needs input rows ``[i n - lo, (i + 1) n + hi)``.
    ``{input dim: (output dim, lo, hi, index among the spatial dims)}``."""
    dn = op.attributes["dimension_numbers"]
    spatial = list(dn.input_spatial_dimensions)
    count = len(spatial)
    strides = _window(op, "window_strides", count, 1)
    lhs_dilation = _window(op, "lhs_dilation", count, 1)
    rhs_dilation = _window(op, "rhs_dilation", count, 1)
    padding = op.attributes.get("padding")
    pads = padding.array.reshape(-1, 2).tolist() if padding is not None else [[0, 0]] * count
    kernel = op.operands[1].type.shape
    out = {}
    for i, d in enumerate(spatial):
        lo, hi = (int(p) for p in pads[i])
        window = (kernel[dn.kernel_spatial_dimensions[i]] - 1) * rhs_dilation[i]
        if strides[i] == 1 and lhs_dilation[i] == 1 and lo >= 0 and hi >= 0 and \
                lo + hi == window:
            out[d] = (dn.output_spatial_dimensions[i], lo, hi, i)
    return out


def transpose_forward(dims, permutation) -> tuple:
    return tuple(dims[p] for p in permutation)


def transpose_backward(dims, permutation) -> tuple:
    out = [()] * len(dims)
    for k, p in enumerate(permutation):
        out[p] = dims[k]
    return tuple(out)


def broadcast_forward(dims, operand_shape, result_shape, mapping) -> tuple:
    """Operand dims keep their axes where they are not expanded; new dims are whole."""
    out = [()] * len(result_shape)
    for i, d in enumerate(mapping):
        if operand_shape[i] == result_shape[d]:
            out[d] = dims[i]
    return tuple(out)


def broadcast_backward(dims, operand_shape, result_shape, mapping) -> tuple:
    return tuple(dims[d] if operand_shape[i] == result_shape[d] else ()
                 for i, d in enumerate(mapping))


def reduce_forward(dims, reduced) -> tuple:
    return tuple(axes for d, axes in enumerate(dims) if d not in reduced)


def reduce_backward(dims, rank: int, reduced) -> tuple:
    kept = iter(dims)
    return tuple(() if d in reduced else next(kept) for d in range(rank))


def reshape_groups(source, target) -> list:
    """Runs of dimensions with equal element counts: ``[(source dims, target dims)]``."""
    groups, i, j = [], 0, 0
    while i < len(source) or j < len(target):
        gi, gj, pi, pj = [], [], 1, 1
        if i < len(source):
            gi.append(i)
            pi *= source[i]
            i += 1
        if j < len(target):
            gj.append(j)
            pj *= target[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(source):
                gi.append(i)
                pi *= source[i]
                i += 1
            elif j < len(target):
                gj.append(j)
                pj *= target[j]
                j += 1
            else:
                break
        groups.append((gi, gj))
    return groups


def reshape_map(dims, source, target, axis_size) -> tuple:
    """The sharding of a reshape's other side: within each run of dimensions of equal element
    count, a split of the run's major (first non-1) dimension maps to the other side's major
    dimension when it divides it: each device then holds one contiguous chunk of the run on
    both sides. Splits of minor dimensions map to nothing (the partitioner gathers them)."""
    out = [()] * len(target)
    for gi, gj in reshape_groups(source, target):
        major = next((d for d in gi if source[d] > 1), None)
        if major is None or any(dims[d] for d in gi if d != major) or not dims[major]:
            continue
        pieces = math.prod(axis_size(a) for a in dims[major])
        goal = next((d for d in gj if target[d] > 1), None)
        if goal is not None and target[goal] % pieces == 0:
            out[goal] = dims[major]
    return tuple(out)


__all__ = ["broadcast_backward", "broadcast_forward", "contraction", "conv_halo",
           "conv_window_sums", "dim_map", "dot_dims", "dot_result_positions", "gather_positions",
           "point_lookup_dim", "reduce_backward",
           "reduce_forward", "reshape_groups", "reshape_map",
           "scatter_positions", "slice_positions", "transpose_backward", "transpose_forward"]
