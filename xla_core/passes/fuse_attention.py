"""fuse-attention's forward: softmax(q k^T * scale + bias, masked) v -> one
``openhlo.attention`` (the pass: fuse_attention_pass.py; the backward that JAX's autodiff
writes for it: fuse_attention_grad.py).

Matched on the IR's structure, from the softmax outwards (run after ``inline``: JAX's
``_where`` and ``tril`` helpers are calls until then):

* the softmax: ``p = e / broadcast(reduce_add(e))``, ``e = exp(x - broadcast(m))``,
  ``m = reduce_max(x)`` (or ``maximum(-inf, reduce_max(x))``, as JAX writes it), over one
  axis of the logits ``x``; the max and the subtract may read ``x`` through transposes and
  unit-dim reshapes of their own (what cpu-opt leaves of JAX's transposes of a size-1 batch
  or group), and each row's max and sum must be spread back along its own row;
* the logits, walked back to a ``dot_general`` (q . k, one contracting dim, exactly one free
  dim on the k side: the key axis, which must be the softmax axis) through ``transpose``,
  ``convert``, multiplication or division by a splat constant (the scale), ``add`` of a
  bias and ``select(mask, s, splat)`` (the fill);
* ``p`` (through ``convert``/``transpose``) contracted over the key axis with v by a second
  ``dot_general``, its batch dims those of the first.

Every value between the two dots must have no other reader. Dims are tracked by label
(batch dims of q.k, query dims, the key dim) so any layout, any number of leading dims and
either operand order work. Two query-side free dims are grouped-query attention as JAX
writes it (q reshaped to [..., T, Hkv, G, D]): the second is the group, folded into the
heads. A k or v repeated over heads (``broadcast_in_dim`` + ``reshape``, what
transformers' ``repeat_kv`` lowers to) is read from before the repeat, as grouped-query.
Which unit dim a reshape gave which unit label is arbitrary (a size-1 batch and a size-1
group are the same data): unit labels are reassigned to meet the second dot's batch dims.
A mask that is ``query >= key`` of iotas (or the constant lower triangle, unit dims aside) becomes
``causal``; all-true conjuncts go; what is left is the mask operand.

The rewrite puts q, k, v, bias and mask in the composite's layout with transposes and
reshapes (stablehlo/attention.py) and the result back in the second dot's; the old ops are
left for ``dce``. Anything the pattern does not cover is left alone, softmax included.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from stablehlo.attention import FLOAT_TYPES, attention
from stablehlo.builder import Builder
from stablehlo.ir.core import Block, Module, Operation, Value

from xla_core.ir_utils import replace_uses

K = "k"   # label of the key dim; batch dims are ("b", i), query dims ("q", j)
MERGED = ("b", "merged")  # the batch dims, merged into one (before a framework's 3-D matmul)


def static(match: "Match") -> bool:
    """Whether every value the attention reads has a static shape: the composite's
    decomposition is built for the shapes it sees (a `?` dim, from an export with a
    dynamic batch, would leave it disagreeing with its operands)."""
    values = list(match.dot1.operands) + list(match.dot1.results)
    if match.dot2 is not None:
        values += list(match.dot2.op.operands) + list(match.dot2.op.results)
    values += [v for v, _ in ([match.bias] if match.bias else []) + list(match.masks)]
    return all(getattr(v.type, "is_static", True) for v in values)


def users_of(block: Block) -> dict:
    users: dict = {}
    for op in block.walk():
        for v in op.operands:
            users.setdefault(v, []).append(op)
    return users


def producer(v: Value):
    owner = v.owner
    return owner if isinstance(owner, Operation) else None


def splat(v: Value):
    """The float value of a splat (a constant through broadcasts, reshapes, converts)."""
    op = producer(v)
    while op is not None and op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape",
                                         "stablehlo.convert"):
        op = producer(op.operands[0])
    if op is None or op.name != "stablehlo.constant":
        return None
    array = np.asarray(op.attr("value").array)
    if array.size == 0 or not np.all(array == array.flat[0]):
        return None
    return array.flat[0].item()


def _single_use(v: Value, users: dict, reader: Operation) -> bool:
    return users.get(v, []) == [reader]


@dataclass
class Match:
    dot1: Operation
    dot2: "_Dot2 | None"
    labels_x: list            # labels of the logits' dims
    scale: float = 1.0
    fill: float = -np.inf
    bias: tuple | None = None  # (value, its labels)
    masks: list = field(default_factory=list)  # (value, labels) conjuncts
    causal: bool = False
    batch_split: tuple | None = None  # the batch dims of q.k split right after it
    select: tuple | None = None  # (the forward's select predicate, the logits' labels there)


def match_forward(div: Operation, users: dict, output_optional: bool = False) -> Match | None:
    """The attention whose softmax ends in ``div``, or None. With ``output_optional`` the
    probabilities may have no reader (``dot2`` None: only a backward read them)."""
    softmax = match_softmax(div)
    if softmax is None:
        return None
    if any(set(users.get(v, [])) - allowed for v, allowed in softmax.readers):
        return None  # the logits or probabilities are needed whole elsewhere
    chain = walk_logits(softmax.x, users)
    if chain is None:
        return None
    match, labels_x = chain
    p_labels = probability_labels(softmax, labels_x)
    if p_labels is None:
        return None
    match.labels_x = labels_x
    if not output_optional or users.get(div.results[0]):
        match.dot2 = _follow_probabilities(div.results[0], users, p_labels)
        if match.dot2 is None or _dot2_layout(match) is None:
            return None
    n_batch = sum(1 for lab in labels_x if lab[0] == "b")
    if n_batch == 0 and any(lab == ("q", 1) for lab in labels_x):
        return None  # a group with no heads dim to fold it into
    return match if _causal_and_masks(match) else None


def probability_labels(softmax: "_Softmax", labels_x: list):
    """The labels of the probabilities' dims (those of the softmax's subtract), or None
    where the max or the sum is not over the key dim, row by row."""
    max_labels = _labels_after(softmax.max_path, labels_x)
    p_labels = _labels_after(softmax.sub_path, labels_x)
    if max_labels is None or p_labels is None or max_labels[softmax.max_axis] != K or \
            p_labels[softmax.sum_axis] != K or \
            not _spreads_rows(softmax.max_spread, max_labels, softmax.max_axis, p_labels) or \
            not _spreads_rows(softmax.sum_spread, p_labels, softmax.sum_axis, p_labels):
        return None
    return p_labels


def _reduced(v: Value, kind: str):
    """(operand, dims, the reduce, the ops that spread its result to ``v``, first first)
    of a ``reduce`` with the ``kind`` combiner behind broadcasts, reshapes and transposes,
    or None."""
    op = producer(v)
    spread = []
    while op is not None and op.name in ("stablehlo.broadcast_in_dim", "stablehlo.reshape",
                                         "stablehlo.transpose"):
        spread.append(op)
        op = producer(op.operands[0])
    if op is not None and kind == "stablehlo.maximum" and op.name == "stablehlo.maximum":
        a, b = op.operands   # JAX: maximum(-inf, reduce_max(x))
        other = b if splat(a) == -np.inf else (a if splat(b) == -np.inf else None)
        op = producer(other) if other is not None else None
    if op is None or op.name != "stablehlo.reduce" or len(op.operands) != 2:
        return None
    body = op.regions[0].blocks[0].operations
    if len(body) != 2 or body[0].name != kind:
        return None
    return op.operands[0], list(op.attr("dimensions").values), op, spread[::-1]


def _spreads_rows(spread: list, labels: list, axis: int, target: list) -> bool:
    """Whether ``spread`` takes the reduction over ``axis`` of values labelled ``labels``
    back to values labelled ``target`` with each row's result spread along its own row:
    every dim of the target but the key dim (and unit dims) reads the dim of its label."""
    labels = [lab for i, lab in enumerate(labels) if i != axis]
    for op in spread:
        before, after = op.operands[0].type.shape, op.results[0].type.shape
        if op.name == "stablehlo.transpose":
            labels = [labels[p] for p in op.attr("permutation").values]
        elif op.name == "stablehlo.reshape":
            if [n for n in before if n != 1] != [n for n in after if n != 1]:
                return False
            big = iter([lab for lab, n in zip(labels, before) if n != 1])
            labels = [next(big) if n != 1 else None for n in after]
        else:
            wide = [None] * len(after)
            for i, d in enumerate(op.attr("broadcast_dimensions").values):
                wide[d] = labels[i] if before[i] == after[d] else None
            labels = wide
    shape = spread[-1].results[0].type.shape if spread else ()
    return len(labels) == len(target) == len(shape) and all(
        lab == want or lab is None and (want == K or n == 1)
        for lab, want, n in zip(labels, target, shape))


@dataclass
class _Softmax:
    x: Value                  # the logits
    max_path: list            # relayouts from x to the max's operand
    max_axis: int             # the max's axis there
    max_spread: list          # the ops that spread the max back to the subtract
    sub_path: list            # relayouts from x to the subtract's operand
    sum_axis: int
    sum_spread: list
    readers: list             # (value, the ops that may read it)


def match_softmax(div: Operation) -> _Softmax | None:
    """The softmax ending in ``div``, or None. The max and the subtract may read the logits
    through relayouts of their own (transposes, and reshapes that only move unit dims: what
    cpu-opt makes of JAX's transposes of a size-1 dim)."""
    e, denominator = div.operands
    summed = _reduced(denominator, "stablehlo.add")
    exp = producer(e)
    if summed is None or summed[0] is not e or len(summed[1]) != 1 or exp is None or \
            exp.name != "stablehlo.exponential":
        return None
    sub = producer(exp.operands[0])
    if sub is None or sub.name != "stablehlo.subtract":
        return None
    top = _reduced(sub.operands[1], "stablehlo.maximum")
    if top is None or len(top[1]) != 1:
        return None
    sub_side, max_side = _relayouts(sub.operands[0]), _relayouts(top[0])
    common = [(i, j) for i, v in enumerate(sub_side) for j, w in enumerate(max_side)
              if v is w]
    if not common:
        return None
    i, j = common[0]
    x = sub_side[i]
    if str(x.type.element_type) not in FLOAT_TYPES:
        return None
    sub_path = [producer(v) for v in sub_side[:i]][::-1]
    max_path = [producer(v) for v in max_side[:j]][::-1]
    # who may read each value of the softmax: its own ops
    first = {(sub_path or [sub])[0], (max_path or [top[2]])[0]}
    readers = [(x, first), (sub.results[0], {exp}), (e, {summed[2], div})]
    for path, last in ((sub_path, sub), (max_path, top[2])):
        readers += [(op.results[0], {nxt}) for op, nxt in zip(path, path[1:] + [last])]
    return _Softmax(x, max_path, top[1][0], top[3], sub_path, summed[1][0], summed[3],
                    readers)


def _relayouts(v: Value) -> list:
    """``v`` and the values it is a relayout of, back through transposes and reshapes that
    only move unit dims, nearest first."""
    chain = [v]
    op = producer(v)
    while op is not None and (op.name == "stablehlo.transpose" or (
            op.name == "stablehlo.reshape" and _moves_unit_dims(op.operands[0].type.shape,
                                                               op.results[0].type.shape))):
        chain.append(op.operands[0])
        op = producer(op.operands[0])
    return chain


def _labels_after(path: list, labels: list):
    """The labels of the result of a chain of relayouts (``_relayouts``)."""
    for op in path:
        if labels is None:
            return None
        if op.name == "stablehlo.transpose":
            labels = [labels[p] for p in op.attr("permutation").values]
        else:
            labels = _reshape_labels(op.operands[0].type.shape, op.results[0].type.shape,
                                     labels)
    return labels


def walk_logits(x: Value, users: dict):
    """From the logits back to q.k: (match, labels of x's dims), or None."""
    steps = []
    v = x
    while True:
        op = producer(v)
        if op is None:
            return None
        if op.name == "stablehlo.dot_general":
            break
        operand = _logits_operand(op)
        if operand is None:
            return None
        steps.append(op)
        v = op.operands[operand]
        if not _single_use(v, users, op):
            return None
    dot1 = op
    labels = _dot1_labels(dot1)
    if labels is None:
        return None
    match = Match(dot1, None, [])
    seen_mask = False
    for i, step in enumerate(reversed(steps)):
        name = step.name
        if name == "stablehlo.transpose":
            labels = [labels[p] for p in step.attr("permutation").values]
        elif name == "stablehlo.reshape":
            before, after = step.operands[0].type.shape, step.results[0].type.shape
            split = _batch_split(before, after, labels) if i == 0 else None
            if split is not None:
                match.batch_split = split
                labels = [("b", j) for j in range(len(split))] + labels[-(len(after) -
                                                                         len(split)):]
            else:
                labels = _reshape_labels(before, after, labels)
            if labels is None:
                return None
        elif name in ("stablehlo.multiply", "stablehlo.divide"):
            factor = splat(step.operands[1])
            if factor is None and name == "stablehlo.multiply":
                factor = splat(step.operands[0])
            if match.bias is not None or seen_mask or not factor:
                return None  # scaling after the bias or mask is not the composite's order
            match.scale *= (1.0 / factor) if name == "stablehlo.divide" else factor
        elif name == "stablehlo.add":
            if match.bias is not None or seen_mask:
                return None
            s_index = _logits_operand(step)
            match.bias = (step.operands[1 - s_index], list(labels))
        elif name == "stablehlo.select":
            if seen_mask:
                return None
            seen_mask = True
            match.fill = float(splat(step.operands[2]))
            match.masks = [(step.operands[0], list(labels))]
            match.select = match.masks[0]
    return match, labels


def _logits_operand(op: Operation):
    """Which operand of a step between q.k and the softmax carries the logits, or None."""
    name = op.name
    if name == "stablehlo.reshape":
        return 0  # which reshapes keep the dims apart is decided with the labels
    if name in ("stablehlo.transpose", "stablehlo.convert"):
        if name == "stablehlo.convert" and \
                str(op.results[0].type.element_type) not in FLOAT_TYPES:
            return None
        return 0
    if name == "stablehlo.multiply":
        if splat(op.operands[1]) is not None:
            return 0
        return 1 if splat(op.operands[0]) is not None else None
    if name == "stablehlo.divide":
        return 0 if splat(op.operands[1]) is not None else None
    if name == "stablehlo.add":
        a, b = (producer(v) for v in op.operands)
        # the logits come from the dot's side of the chain: the operand that is no broadcast
        if b is not None and b.name == "stablehlo.broadcast_in_dim":
            return 0
        if a is not None and a.name == "stablehlo.broadcast_in_dim":
            return 1
        return 0
    if name == "stablehlo.select" and splat(op.operands[2]) is not None:
        return 1
    return None


def _batch_split(before, after, labels):
    """The new leading dims of a reshape that splits the batch dims right after q.k (a
    framework's 3-D batched matmul: [B*H, L, S] -> [B, H, L, S]), or None."""
    n = sum(1 for lab in labels if lab[0] == "b")
    rest = len(labels) - n
    if n == 0 or len(after) <= rest or tuple(before[n:]) != tuple(after[-rest:]):
        return None
    split = tuple(after[:len(after) - rest])
    return split if int(np.prod(split)) == int(np.prod(before[:n])) else None


def _batch_merge(before, after, labels):
    """Whether a reshape merges the leading batch dims (all of them, in order) into one."""
    n = sum(1 for lab in labels if lab[0] == "b")
    return n > 0 and labels[:n] == [("b", i) for i in range(n)] and \
        len(after) == len(before) - n + 1 and tuple(after[1:]) == tuple(before[n:])


def _moves_unit_dims(before, after) -> bool:
    """Whether a reshape only moves unit dims (keeps the others, in order, and as many
    unit dims)."""
    return [n for n in before if n != 1] == [n for n in after if n != 1] and \
        sum(1 for n in before if n == 1) == sum(1 for n in after if n == 1)


def _reshape_labels(before, after, labels):
    """The labels of a reshape's result, for a reshape that moves unit dims only (what
    canonicalize makes of such a transpose): the other dims keep their order, unit dims
    their labels in order. None for any other reshape."""
    if not _moves_unit_dims(before, after):
        return None
    big = iter([lab for lab, n in zip(labels, before) if n != 1])
    unit = iter([lab for lab, n in zip(labels, before) if n == 1])
    return [next(unit) if n == 1 else next(big) for n in after]


def dot_dims(dot: Operation) -> tuple:
    """lhs batch, rhs batch, lhs contracting, rhs contracting dims of a dot_general."""
    dn = dot.attr("dot_dimension_numbers")
    return tuple(list(dn.get(f, ()) or ()) for f in (
        "lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions",
        "rhs_contracting_dimensions"))


def _dot1_labels(dot: Operation):
    lb, rb, lc, rc = dot_dims(dot)
    lhs, rhs = (v.type.shape for v in dot.operands)
    if len(lc) != 1 or len(rc) != 1:
        return None
    l_free = [d for d in range(len(lhs)) if d not in lb and d not in lc]
    r_free = [d for d in range(len(rhs)) if d not in rb and d not in rc]
    if len(r_free) != 1 or len(l_free) not in (1, 2):
        return None
    return [("b", i) for i in range(len(lb))] + [("q", j) for j in range(len(l_free))] + [K]


def _follow_probabilities(p: Value, users: dict, labels: list):
    """The dot_general contracting p (through converts/transposes) with v over the key dim;
    stores p's labels at the dot on the op as a side note via the returned tuple."""
    v = p
    while True:
        readers = users.get(v, [])
        if len(readers) != 1:
            return None
        op = readers[0]
        if op.name == "stablehlo.transpose":
            labels = [labels[i] for i in op.attr("permutation").values]
        elif op.name == "stablehlo.reshape":
            before, after = v.type.shape, op.results[0].type.shape
            if _batch_merge(before, after, labels):
                n = sum(1 for lab in labels if lab[0] == "b")
                labels = [MERGED] + labels[n:]
            else:
                labels = _reshape_labels(before, after, labels)
            if labels is None:
                return None
        elif op.name == "stablehlo.convert":
            pass
        elif op.name == "stablehlo.dot_general" and op.operands[0] is not op.operands[1]:
            return _Dot2(op, 0 if op.operands[0] is v else 1, labels)
        else:
            return None
        v = op.results[0]


@dataclass
class _Dot2:
    op: Operation
    p_side: int
    p_labels: list


def _dot2_layout(m: Match):
    """(v dims in [batch..., key, value-dim] order, output labels), or None."""
    d = m.dot2
    lb, rb, lc, rc = dot_dims(d.op)
    batch, contract = [lb, rb], [lc, rc]
    ps, vs = d.p_side, 1 - d.p_side
    if len(contract[ps]) != 1 or d.p_labels[contract[ps][0]] != K:
        return None
    n_batch = sum(1 for x in m.labels_x if x[0] == "b")
    d.p_labels = _unit_labels_for_batch(d.p_labels, d.op.operands[ps].type.shape, batch[ps],
                                        n_batch)
    p_batch = [d.p_labels[i] for i in batch[ps]]
    merged = p_batch == [MERGED]
    if not merged and sorted(p_batch, key=str) != [("b", i) for i in range(n_batch)]:
        return None
    p_free = [i for i in range(len(d.p_labels)) if i not in batch[ps] and i not in contract[ps]]
    v_rank = len(d.op.operands[vs].type.shape)
    v_free = [i for i in range(v_rank) if i not in batch[vs] and i not in contract[vs]]
    if len(v_free) != 1:
        return None
    by_label = dict(zip(p_batch, batch[vs]))
    batch_order = [MERGED] if merged else [("b", i) for i in range(n_batch)]
    v_dims = [by_label[lab] for lab in batch_order] + contract[vs] + v_free
    free_labels = [d.p_labels[i] for i in p_free]
    out = p_batch + (free_labels + ["dv"] if ps == 0 else ["dv"] + free_labels)
    return v_dims, out


def _unit_labels_for_batch(labels: list, shape, batch_dims: list, n_batch: int) -> list:
    """``labels`` with the labels of unit dims reassigned so that the unit dims among
    ``batch_dims`` carry the batch labels: which unit label a reshape gave which unit dim
    is arbitrary (a size-1 batch dim and a size-1 group are the same data)."""
    unit = [i for i, n in enumerate(shape) if n == 1]
    pool = [labels[i] for i in unit]
    kept = {labels[i] for i in batch_dims if i not in unit}
    wanted = [("b", j) for j in range(n_batch) if ("b", j) not in kept and ("b", j) in pool]
    batch_unit = [i for i in batch_dims if i in unit]
    if len(wanted) != len(batch_unit):
        return labels
    rest = iter([lab for lab in pool if lab not in wanted])
    given = dict(zip(batch_unit, wanted))
    return [given[i] if i in given else (next(rest) if i in unit else lab)
            for i, lab in enumerate(labels)]


# -- masks --------------------------------------------------------------------------------

def _widened(value: Value, labels: list):
    """One step back through an op that only widens ``value`` to the scores' dims: a
    ``broadcast_in_dim``, or a ``reshape`` that inserts or drops unit dims. (operand, its
    labels; None for a unit dim that stands for no dim of the scores), or None."""
    op = producer(value)
    if op is None:
        return None
    wide = op.results[0].type.shape
    if op.name == "stablehlo.broadcast_in_dim":
        inner = op.operands[0]
        dims = list(op.attr("broadcast_dimensions").values)
        return inner, [labels[d] if inner.type.shape[i] == wide[d] else None
                       for i, d in enumerate(dims)]
    if op.name == "stablehlo.reshape":
        inner = op.operands[0]
        kept = [labels[d] for d, n in enumerate(wide) if n != 1]
        if [n for n in inner.type.shape if n != 1] != [n for n in wide if n != 1]:
            return None
        it = iter(kept)
        return inner, [next(it) if n != 1 else None for n in inner.type.shape]
    return None


def _conjuncts(v: Value, labels: list) -> list:
    """``and`` trees (through widening ops) as (value, labels) leaves."""
    op = producer(v)
    if op is not None and op.name == "stablehlo.and":
        return _conjuncts(op.operands[0], labels) + _conjuncts(op.operands[1], labels)
    step = _widened(v, labels)
    if step is not None:
        return _conjuncts(*step)
    return [(v, labels)]


def _is_all_true(v: Value) -> bool:
    s = splat(v)
    return s is True or s == 1 and str(v.type.element_type) == "i1"


def _lower_triangle_labels(v: Value, labels: list) -> bool:
    """Whether ``v`` (dims labelled ``labels``: the query and key dims, and unit dims, what
    constant folding leaves of a reshaped triangle) is query >= key."""
    dims = [i for i, n in enumerate(v.type.shape) if n != 1]
    if len(dims) != 2:
        return False
    labels = [labels[i] for i in dims]
    if labels != [("q", 0), K]:
        return False
    op = producer(v)
    if op is not None and op.name == "stablehlo.select" and _is_all_true(op.operands[1]) and \
            splat(op.operands[2]) in (False, 0):
        op = producer(op.operands[0])   # JAX: tril(ones) = select(cmp, true, false)
    if op is not None and op.name == "stablehlo.constant":
        array = np.asarray(op.attr("value").array)
        array = array.reshape([array.shape[i] for i in dims])
        return array.dtype == bool and np.array_equal(array, np.tril(np.ones_like(array)))
    if op is None or op.name != "stablehlo.compare":
        return False
    direction = str(op.attr("comparison_direction").value)
    rows, cols = op.operands if direction == "GE" else (
        op.operands[::-1] if direction == "LE" else (None, None))
    return rows is not None and _iota_dim(rows) == dims[0] and _iota_dim(cols) == dims[1]


def _iota_dim(v: Value):
    op = producer(v)
    if op is not None and op.name == "stablehlo.add" and splat(op.operands[1]) == 0:
        op = producer(op.operands[0])
    if op is None or op.name != "stablehlo.iota":
        return None
    return op.attr("iota_dimension").value


def _causal_and_masks(m: Match) -> bool:
    if not m.masks:
        return True
    kept = []
    for value, labels in _conjuncts(*m.masks[0]):
        if _is_all_true(value):
            continue
        if not m.causal and _lower_triangle_labels(value, labels):
            m.causal = True
            continue
        kept.append((value, labels))
    if len(kept) > 1:
        return False
    m.masks = kept
    return True


# -- the rewrite --------------------------------------------------------------------------

def rewrite_forward(module: Module, func_op: Operation, block: Block, m: Match) -> None:
    """Replaces the second dot's result with an ``openhlo.attention`` built before it."""
    v_dims, out_labels = _dot2_layout(m)
    b = Builder(module)
    scratch = Block()
    with b.inserting_into(scratch):
        q_s, k_s, layout = split_qk(b, m)
        v_s = transpose(b, m.dot2.op.operands[1 - m.dot2.p_side], v_dims)
        if MERGED in out_labels:
            v_s = reshape(b, v_s, q_s.type.shape[:layout.n_batch] + v_s.type.shape[1:])
        operands = composite_operands(b, m, q_s, k_s, v_s, layout)
        out = attention(b, *operands, scale=m.scale, causal=m.causal, fill=m.fill)[0]
        out = out_to_dot2(b, m, out, layout, v_s)
    insert_before(block, scratch, m.dot2.op)
    replace_uses(func_op, {m.dot2.op.results[0]: out})


def insert_before(block: Block, scratch: Block, op: Operation) -> None:
    """Moves the ops built in ``scratch`` into ``block``, right before ``op``."""
    position = block.operations.index(op)
    for new in scratch.operations:
        new.parent = block
    block.operations[position:position] = scratch.operations


@dataclass
class Layout:
    """The split layout, [batch..., (group), query, key] for the scores."""
    labels: list       # the scores' dims
    sizes: dict        # label -> size
    grouped: bool      # whether there is a group dim (grouped-query attention as JAX writes it)
    n_batch: int


def split_qk(b: Builder, m: Match):
    """q and k as [batch..., (group), length, dim] (the split layout), and the layout."""
    q, k = m.dot1.operands
    lb, rb, lc, rc = dot_dims(m.dot1)
    q_free = [d for d in range(len(q.type.shape)) if d not in lb and d not in lc]
    k_free = [d for d in range(len(k.type.shape)) if d not in rb and d not in rc]
    grouped = len(q_free) == 2
    q_s = transpose(b, q, lb + q_free[::-1] + lc)   # the group before the queries
    k_s = transpose(b, k, rb + k_free + rc)
    batch = m.batch_split or tuple(q_s.type.shape[:len(lb)])
    q_s = reshape(b, q_s, batch + q_s.type.shape[len(lb):])
    k_s = reshape(b, k_s, batch + k_s.type.shape[len(rb):])
    labels = [("b", i) for i in range(len(batch))] + ([("q", 1)] if grouped else []) + \
        [("q", 0), K]
    sizes = dict(zip(labels[:-1], q_s.type.shape[:-1]))
    sizes[K] = k.type.shape[k_free[0]]
    return q_s, k_s, Layout(labels, sizes, grouped, len(batch))


def composite_operands(b: Builder, m: Match, q_s: Value, k_s: Value, v_s: Value,
                       layout: Layout) -> list:
    """q, k, v, bias, mask (None where absent) in the composite's layout."""
    labels, sizes, grouped, n_batch = layout.labels, layout.sizes, layout.grouped, \
        layout.n_batch
    q_c, k_c, v_c = (canonical(b, x, n_batch, grouped) for x in (q_s, k_s, v_s))
    bias = None if m.bias is None else _canonical_operand(
        b, *m.bias, labels, sizes, grouped, n_batch, q_s.type.element_type)
    mask = None if not m.masks else \
        _canonical_operand(b, *m.masks[0], labels, sizes, grouped, n_batch, None)
    return [q_c, k_c, v_c, bias, mask]


def out_to_dot2(b: Builder, m: Match, out: Value, layout: Layout, v_s: Value) -> Value:
    """The composite's output in the layout and type of the second dot's result."""
    _, out_labels = _dot2_layout(m)
    labels, sizes, n_batch = layout.labels, layout.sizes, layout.n_batch
    out_split_labels = labels[:-1] + ["dv"]
    out = reshape(b, out, [sizes[lab] for lab in labels[:-1]] + [v_s.type.shape[-1]])
    if MERGED in out_labels:
        out = reshape(b, out, (int(np.prod(out.type.shape[:n_batch])),)
                       + out.type.shape[n_batch:])
        out_split_labels = [MERGED] + out_split_labels[n_batch:]
    out = transpose(b, out, [out_split_labels.index(lab) for lab in out_labels])
    result_type = m.dot2.op.results[0].type.element_type
    return out if out.type.element_type == result_type else b.convert(out, result_type)


def transpose(b: Builder, x: Value, perm) -> Value:
    perm = list(perm)
    return x if perm == sorted(perm) else b.transpose(x, perm)


def reshape(b: Builder, x: Value, shape) -> Value:
    """``x`` reshaped (a reshape of a reshape reads the first one's operand, so a k or v
    repeated over heads stays recognisable to stablehlo.attention.unrepeated_heads)."""
    if tuple(shape) == tuple(x.type.shape):
        return x
    inner = producer(x)
    if inner is not None and inner.name == "stablehlo.reshape":
        return reshape(b, inner.operands[0], shape)
    return b.reshape(x, shape)


def canonical(b: Builder, x: Value, n_batch: int, grouped: bool) -> Value:
    """Split layout -> the composite's [..., heads, length, dim] (rank >= 3)."""
    shape = x.type.shape
    if grouped and len(shape) == n_batch + 3:   # merge the group into the heads
        return reshape(b, x, shape[:n_batch - 1] + (shape[n_batch - 1] * shape[n_batch],)
                         + shape[n_batch + 1:])
    if len(shape) < 3:
        return reshape(b, x, (1,) * (3 - len(shape)) + shape)
    return x


def _canonical_operand(b: Builder, value: Value, labels: list, split_labels: list,
                       sizes: dict, grouped: bool, n_batch: int, dtype) -> Value:
    """A bias or mask (dims ``labels``, broadcasting the score's other dims) in the
    composite's layout: transposed into split order, unit dims where it broadcasts."""
    source, source_labels = _unbroadcast(value, labels)
    if None in source_labels:  # size-1 dims the scores broadcast: no label, reshaped away
        kept = [i for i, lab in enumerate(source_labels) if lab is not None]
        source = reshape(b, source, [source.type.shape[i] for i in kept])
        source_labels = [source_labels[i] for i in kept]
    order = sorted(range(len(source_labels)), key=lambda i: split_labels.index(
        source_labels[i]))
    x = transpose(b, source, order)
    present = [source_labels[i] for i in order]
    unit_shape = tuple(x.type.shape[present.index(lab)] if lab in present else 1
                       for lab in split_labels)
    x = reshape(b, x, unit_shape)
    if grouped and (unit_shape[n_batch - 1] != 1 or unit_shape[n_batch] != 1):
        full = list(unit_shape)
        full[n_batch - 1] = sizes[split_labels[n_batch - 1]]
        full[n_batch] = sizes[split_labels[n_batch]]
        if tuple(full) != tuple(unit_shape):
            x = b.broadcast_in_dim(x, full, list(range(len(full))))
    x = canonical(b, x, n_batch, grouped)
    if dtype is not None and x.type.element_type != dtype:
        x = b.convert(x, dtype)
    return x


def _unbroadcast(value: Value, labels: list):
    """The value before the ops that widened it to the scores' shape, with its dims'
    labels (None for a unit dim that stands for no dim of the scores)."""
    step = _widened(value, labels)
    while step is not None:
        value, labels = step
        step = _widened(value, labels)
    return value, labels
