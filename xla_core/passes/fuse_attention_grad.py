"""fuse-attention's backward: ``jax.grad`` of an attention that fuse_attention.py matches
-> ``openhlo.attention`` (with its row logsumexp) and ``openhlo.attention_grad``, so
neither direction materializes the [L, S] scores.

JAX's autodiff of softmax(q k^T * scale + bias, masked) v keeps three values of the softmax
for the backward: its exp ``e``, its row sum ``d`` and the probabilities ``p = e / d``. The
backward reads them as

* dv = p^T dO: a dot contracting p over the query dims with dO (the output's cotangent);
* g = dO v^T: a dot of dO with v over the value dim;
* dS, the cotangent of the scaled logits, from g, e and d: e g / d - e rowsum(e g) / d^2
  (that is p (g - rowsum(p g))), zeroed where the forward masked (``select(mask, ., 0)``),
  times the scale;
* dq = dS k and dk = dS^T q: dots reading the forward's q and k operands.

The ops from g, e and d to dS are evaluated symbolically (sums of monomials in e, g, d and
row sums of such), so whatever order autodiff and cpu-opt leave them in, and every value's
dims are tracked by label, as the forward matcher does (unit dims carry none here: a size-1
batch and a size-1 group are the same data). The forward's output may be gone (a program
that returns only gradients) or read (a training step's loss). Every value of the backward
chain must be read only inside it: a differentiated bias (its gradient reads dS) is left
alone, and so is a softmax whose max is differentiated (a hand-written ``exp(x - max(x))``
without ``stop_gradient``: its backward has more terms).

The rewrite builds the forward composite, with ``with_lse``, where the second dot was (or
with the backward where there is none) and the gradient composite before the first backward
dot, and replaces the results of the second dot and the three gradient dots.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from stablehlo.attention import FLOAT_TYPES, attention, attention_grad
from stablehlo.builder import Builder
from stablehlo.ir.core import Block, Module, Operation, Value

from xla_core.ir_utils import replace_uses
from xla_core.passes.fuse_attention import (
    K, Match, canonical, composite_operands, dot_dims, insert_before,
    match_forward, match_softmax, out_to_dot2, probability_labels, producer, reshape, split_qk,
    splat, static, transpose, walk_logits)

ANY = "any"   # the labels of a splat: it fits any dims
D = "d"       # label of the head dim of q and k
DV = "dv"     # label of the value dim
MAX_TERMS = 8  # a product that expands to more monomials is no attention's backward


@dataclass
class GradMatch:
    forward: Match
    dout: Value
    dout_labels: list
    v: Value
    v_labels: list
    dq: Operation          # the dots whose results the gradient composite replaces
    dk: Operation
    dv: Operation
    dq_labels: list
    dk_labels: list
    dv_labels: list
    first: Operation       # the first backward dot: the gradient composite goes before it


class _NoMatch(Exception):
    """The backward is not attention's."""


def match_grad(div: Operation, users: dict) -> GradMatch | None:
    """The attention whose softmax ends in ``div`` together with its backward, or None."""
    try:
        return _match_grad(div, users)
    except _NoMatch:
        return None


def _match_grad(div: Operation, users: dict) -> GradMatch | None:
    softmax = match_softmax(div)
    chain = walk_logits(softmax.x, users) if softmax is not None else None
    if chain is None or chain[0].batch_split is not None:
        return None
    pre, labels_x = chain   # the forward as far as the backward needs it (scale, select)
    p = div.results[0]
    p_labels = probability_labels(softmax, labels_x)
    if p_labels is None:
        return None
    p_labels = _unit_free(p_labels, p.type.shape)
    dot1 = pre.dot1
    q, k = dot1.operands
    q_labels, k_labels = _qk_labels(dot1)
    query = {lab for lab in q_labels if lab is not None and lab[0] == "q"}
    batch = {lab for lab in q_labels if lab is not None and lab[0] == "b"}

    # dv = p^T dO, g = dO v^T (each may read its operand through relayouts)
    dv_dot, p_read, p_read_labels, p_path = _read_by_dot(p, p_labels, users, query, ())
    dout, dout_labels = _other_operand_labels(dv_dot, p_read, p_read_labels, DV)
    dv_labels = _dot_labels(dv_dot, *_sides(dv_dot, p_read, p_read_labels, dout, dout_labels),
                            query)
    g_dot, dout_read, dout_read_labels, dout_path = _read_by_dot(dout, dout_labels, users,
                                                                {DV}, (dv_dot,))
    v, v_labels = _other_operand_labels(g_dot, dout_read, dout_read_labels, K)
    g_labels = _dot_labels(g_dot, *_sides(g_dot, dout_read, dout_read_labels, v, v_labels),
                           {DV})
    _require(_same(dout_labels, batch | query | {DV}) and _same(v_labels, batch | {K, DV})
             and _same(dv_labels, batch | {K, DV}))

    # dq = dS k, dk = dS^T q
    dq_dot, k_read, k_read_labels, k_path = _read_by_dot(k, k_labels, users, {K}, (dot1,))
    dk_dot, q_read, q_read_labels, q_path = _read_by_dot(q, q_labels, users, query, (dot1,))
    ds_q, ds_k = _other(dq_dot, k_read), _other(dk_dot, q_read)

    e, total = div.operands[0], _sum_of(div)
    walk = _Walk({e: ({_mono(("E", 1)): 1.0}, p_labels),
                  total: ({_mono(("D", 1)): 1.0}, _unit_free(
                      [lab for i, lab in enumerate(p_labels) if i != softmax.sum_axis],
                      total.type.shape)),
                  p: ({_mono(("E", 1), ("D", -1)): 1.0}, p_labels),
                  g_dot.results[0]: ({_mono(("G", 1)): 1.0}, g_labels)}, pre)
    labels = {}
    for ds in (ds_q, ds_k):
        ds_expr, labels[ds] = walk.value(ds)
        _require(_same(labels[ds], batch | query | {K}) and
                 _is_softmax_backward(ds_expr, pre.scale))
    dq_labels = _dot_labels(dq_dot, *_sides(dq_dot, ds_q, labels[ds_q], k_read, k_read_labels),
                            {K})
    dk_labels = _dot_labels(dk_dot, *_sides(dk_dot, ds_k, labels[ds_k], q_read, q_read_labels),
                            query)
    _require(_same(dq_labels, batch | query | {D}) and _same(dk_labels, batch | {K, D}))

    # the backward's values are read inside it only (it may read the forward's spread of
    # the row sum); the forward then matches without it
    backward = (walk.ops - set(softmax.sum_spread)) | {g_dot, dq_dot, dk_dot, dv_dot} | \
        set(p_path + dout_path + k_path + q_path)
    for op in backward - {dq_dot, dk_dot, dv_dot}:
        for r in op.results:
            _require(set(users.get(r, [])) <= backward)
    forward_users = {value: [op for op in ops if op not in backward]
                     for value, ops in users.items()}
    m = match_forward(div, forward_users, output_optional=True)
    _require(m is not None and m.dot1 is dot1 and static(m) and (
        m.dot2 is None or m.dot2.op.operands[1 - m.dot2.p_side] is v))
    _require(all(getattr(x.type, "is_static", True) for x in
                 (dout, dq_dot.results[0], dk_dot.results[0], dv_dot.results[0])))
    # the rewrite puts the composites into the softmax's block, in order
    _require(all(op.parent is div.parent for op in backward) and
             (m.dot2 is None or m.dot2.op.parent is div.parent))
    first = min((dv_dot, g_dot), key=div.parent.operations.index)
    return GradMatch(m, dout, dout_labels, v, v_labels, dq_dot, dk_dot, dv_dot, dq_labels,
                     dk_labels, dv_labels, first)


def _require(condition: bool) -> None:
    if not condition:
        raise _NoMatch


def _read_by_dot(x: Value, labels: list, users: dict, contracted: set, skip: tuple):
    """The one dot_general (not in ``skip``) that reads ``x``, directly or through
    transposes and unit-dim reshapes, contracting its dims labelled ``contracted``: (the
    dot, the value it reads, that value's labels, the relayouts between)."""
    found = []
    stack = [(x, labels, [])]
    while stack:
        v, v_labels, path = stack.pop()
        for op in users.get(v, []):
            if op in skip:
                continue
            if op.name == "stablehlo.dot_general":
                lb, rb, lc, rc = dot_dims(op)
                mine = lc if op.operands[0] is v else rc
                if op.operands[0] is not op.operands[1] and \
                        {v_labels[i] for i in mine} - {None} == contracted:
                    found.append((op, v, v_labels, path))
            elif op.name == "stablehlo.transpose":
                stack.append((op.results[0], [v_labels[i] for i in op.attr("permutation").values],
                              path + [op]))
            elif op.name == "stablehlo.reshape" and _keeps_big_dims(op):
                stack.append((op.results[0], _reshaped_labels(op, v_labels), path + [op]))
    _require(len(found) == 1)
    return found[0]


def _keeps_big_dims(op: Operation) -> bool:
    """Whether a reshape keeps the non-unit dims, in order (only unit dims come or go)."""
    before, after = op.operands[0].type.shape, op.results[0].type.shape
    return [n for n in before if n != 1] == [n for n in after if n != 1]


def _reshaped_labels(op: Operation, labels: list) -> list:
    """The labels of a reshape's result that keeps the non-unit dims in order."""
    _require(_keeps_big_dims(op))
    before, after = op.operands[0].type.shape, op.results[0].type.shape
    big = iter([lab for lab, n in zip(labels, before) if n != 1])
    return [next(big) if n != 1 else None for n in after]


def _other(dot: Operation, x: Value) -> Value:
    a, b = dot.operands
    _require((a is x) != (b is x))
    return b if a is x else a


def _unit_free(labels: list, shape) -> list:
    """``labels`` with None for each unit dim."""
    return [None if n == 1 else lab for lab, n in zip(labels, shape)]


def _same(labels: list, wanted: set) -> bool:
    """Whether the labelled dims are exactly ``wanted``, each once (unit dims aside)."""
    named = [lab for lab in labels if lab is not None]
    return len(named) == len(set(named)) and set(named) == wanted - {None}


def _qk_labels(dot1: Operation):
    """The labels of q's and k's dims, as fuse_attention.py labels q.k's result."""
    lb, rb, lc, rc = dot_dims(dot1)
    q, k = dot1.operands
    q_labels, k_labels = [None] * len(q.type.shape), [None] * len(k.type.shape)
    for i, (dq, dk) in enumerate(zip(lb, rb)):
        q_labels[dq] = k_labels[dk] = ("b", i)
    q_labels[lc[0]] = k_labels[rc[0]] = D
    q_free = [d for d in range(len(q_labels)) if d not in lb and d not in lc]
    for j, d in enumerate(q_free):
        q_labels[d] = ("q", j)
    k_labels[[d for d in range(len(k_labels)) if d not in rb and d not in rc][0]] = K
    return _unit_free(q_labels, q.type.shape), _unit_free(k_labels, k.type.shape)


def _sides(dot: Operation, x: Value, x_labels: list, y: Value, y_labels: list):
    """The labels of a dot's lhs and rhs, given those of its operands ``x`` and ``y``."""
    return (x_labels, y_labels) if dot.operands[0] is x else (y_labels, x_labels)


def _other_operand_labels(dot: Operation, x: Value, x_labels: list, free_label):
    """The other operand of a dot reading ``x`` and its dims' labels: those it is batched or
    contracted with on ``x``'s side, ``free_label`` for its one free dim (unit dims None)."""
    y = _other(dot, x)
    lb, rb, lc, rc = dot_dims(dot)
    x_pairs, y_pairs = (lb + lc, rb + rc) if dot.operands[0] is x else (rb + rc, lb + lc)
    labels = [None] * len(y.type.shape)
    for i, j in zip(x_pairs, y_pairs):
        labels[j] = x_labels[i]
    free = [j for j in range(len(labels)) if j not in y_pairs and y.type.shape[j] != 1]
    _require(len(free) == 1)
    labels[free[0]] = free_label
    return y, _unit_free(labels, y.type.shape)


def _dot_labels(dot: Operation, lhs: list, rhs: list, contracted: set) -> list:
    """The labels of a dot_general's result, where its batch pairs agree and the labelled
    contracted dims are ``contracted``."""
    lb, rb, lc, rc = dot_dims(dot)
    _require(all(lhs[i] == rhs[j] for i, j in zip(lb + lc, rb + rc)))
    _require({lhs[i] for i in lc} - {None} == contracted)
    l_free = [i for i in range(len(lhs)) if i not in lb and i not in lc]
    r_free = [j for j in range(len(rhs)) if j not in rb and j not in rc]
    out = [lhs[i] for i in lb] + [lhs[i] for i in l_free] + [rhs[j] for j in r_free]
    named = [lab for lab in out if lab is not None]
    _require(len(named) == len(set(named)))
    return _unit_free(out, dot.results[0].type.shape)


def _sum_of(div: Operation) -> Value:
    """The row sum the softmax divides by (the reduce's result)."""
    v = div.operands[1]
    op = producer(v)
    while op is not None and op.name != "stablehlo.reduce":
        v = op.operands[0]
        op = producer(v)
    _require(op is not None)
    return v


# -- the symbolic walk -------------------------------------------------------------------
# An expression is {monomial: coefficient}; a monomial is a sorted tuple of (atom, power),
# the atoms "E" (the exp), "G" (dO v^T), "D" (the row sum) and ("sum", monomial of E and G)
# (a row sum over the keys).

def _mono(*factors) -> tuple:
    powers: dict = {}
    for atom, power in factors:
        powers[atom] = powers.get(atom, 0) + power
    return tuple(sorted(((a, p) for a, p in powers.items() if p), key=repr))


def _add(x: dict, y: dict, sign: float = 1.0) -> dict:
    out = dict(x)
    for mono, c in y.items():
        out[mono] = out.get(mono, 0.0) + sign * c
    return {mono: c for mono, c in out.items() if c != 0.0}


def _multiply(x: dict, y: dict) -> dict:
    out: dict = {}
    for mx, cx in x.items():
        for my, cy in y.items():
            out = _add(out, {_mono(*mx, *my): cx * cy})
    _require(len(out) <= MAX_TERMS)
    return out


def _inverse(x: dict) -> dict:
    _require(len(x) == 1)
    (mono, c), = x.items()
    return {tuple((a, -p) for a, p in mono): 1.0 / c}


def _row_sum(x: dict) -> dict:
    """The sum over the keys: row factors (D, row sums) come out of it."""
    out: dict = {}
    for mono, c in x.items():
        full = tuple((a, p) for a, p in mono if a in ("E", "G"))
        _require(bool(full))
        row = [(a, p) for a, p in mono if a not in ("E", "G")]
        out = _add(out, {_mono(*row, (("sum", full), 1)): c})
    return out


def _is_softmax_backward(x: dict, scale: float) -> bool:
    """Whether ``x`` is scale * (E G / D - E rowsum(E G) / D^2)."""
    direct = _mono(("E", 1), ("G", 1), ("D", -1))
    through_sum = _mono(("E", 1), ("D", -2), (("sum", _mono(("E", 1), ("G", 1))), 1))
    return set(x) == {direct, through_sum} and np.isclose(x[direct], -x[through_sum],
                                                          rtol=1e-6) \
        and np.isclose(x[direct], scale, rtol=1e-6)


class _Walk:
    """Evaluates values symbolically back to the atoms, with their dims' labels; ``ops``
    collects the ops it went through."""

    def __init__(self, atoms: dict, forward: Match):
        self.known = dict(atoms)
        self.forward = forward
        self.ops: set = set()

    def value(self, v: Value):
        if v in self.known:
            return self.known[v]
        c = splat(v)
        if c is not None:
            result = ({(): float(c)} if c else {}), ANY
        else:
            op = producer(v)
            _require(op is not None)
            self.ops.add(op)
            result = self._op(op)
        self.known[v] = result
        return result

    def _op(self, op: Operation):
        name = op.name
        if name in ("stablehlo.add", "stablehlo.subtract", "stablehlo.multiply",
                    "stablehlo.divide"):
            (x, lx), (y, ly) = (self.value(a) for a in op.operands)
            labels = _unify(lx, ly)
            if name == "stablehlo.add":
                return _add(x, y), labels
            if name == "stablehlo.subtract":
                return _add(x, y, -1.0), labels
            return _multiply(x, y if name == "stablehlo.multiply" else _inverse(y)), labels
        if name == "stablehlo.negate":
            x, labels = self.value(op.operands[0])
            return _add({}, x, -1.0), labels
        if name == "stablehlo.convert":
            _require(str(op.results[0].type.element_type) in FLOAT_TYPES)
            return self.value(op.operands[0])
        if name == "stablehlo.select":
            return self._select(op)
        x, labels = self.value(op.operands[0])
        _require(labels != ANY)
        if name == "stablehlo.transpose":
            return x, [labels[i] for i in op.attr("permutation").values]
        if name == "stablehlo.reshape":
            return x, _reshaped_labels(op, labels)
        if name == "stablehlo.broadcast_in_dim":
            return x, _spread_labels(op, labels)
        if name == "stablehlo.reduce":
            return self._reduce(op, x, labels)
        raise _NoMatch

    def _select(self, op: Operation):
        """The backward of the forward's mask: select(mask, ., 0)."""
        keep, on_true, on_false = op.operands
        select = self.forward.select
        _require(select is not None and keep is select[0] and splat(on_false) == 0)
        x, labels = self.value(on_true)
        _require(labels == _unit_free(select[1], keep.type.shape))
        return x, labels

    def _reduce(self, op: Operation, x: dict, labels: list):
        body = op.regions[0].blocks[0].operations
        _require(len(op.operands) == 2 and len(body) == 2 and body[0].name == "stablehlo.add"
                 and splat(op.operands[1]) == 0)
        dims = list(op.attr("dimensions").values)
        _require([labels[d] for d in dims if labels[d] is not None] == [K])
        return _row_sum(x), [lab for i, lab in enumerate(labels) if i not in dims]


def _unify(x, y):
    if x == ANY:
        return y
    _require(y == ANY or x == y)
    return x


def _spread_labels(op: Operation, labels: list) -> list:
    """The labels of a broadcast's result: its one new (or widened) dim is the key dim."""
    before, after = op.operands[0].type.shape, op.results[0].type.shape
    out = [None] * len(after)
    for i, d in enumerate(op.attr("broadcast_dimensions").values):
        out[d] = labels[i] if before[i] == after[d] else None
    new = [d for d, n in enumerate(after) if n != 1 and out[d] is None]
    _require(len(new) <= 1 and K not in out)
    if new:
        out[new[0]] = K
    return out


# -- the rewrite ---------------------------------------------------------------------------

def rewrite_grad(module: Module, func_op: Operation, block: Block, g: GradMatch) -> None:
    m = g.forward
    b = Builder(module)
    forward, backward = Block(), Block()
    replacements = {}
    with b.inserting_into(forward):
        q_s, k_s, layout = split_qk(b, m)
        n_batch, sizes = layout.n_batch, layout.sizes
        batch = layout.labels[:n_batch]
        dv_size = g.v.type.shape[g.v_labels.index(DV)]
        v_s = _relayout(b, g.v, g.v_labels, batch + [K, DV],
                        [sizes[lab] for lab in batch] + [sizes[K], dv_size])
        operands = composite_operands(b, m, q_s, k_s, v_s, layout)
        out, lse = attention(b, *operands, scale=m.scale, causal=m.causal, fill=m.fill,
                             with_lse=True)
        if m.dot2 is not None:
            replacements[m.dot2.op.results[0]] = out_to_dot2(b, m, out, layout, v_s)
    with b.inserting_into(backward):
        query = layout.labels[n_batch:-1]
        dout = _relayout(b, g.dout, g.dout_labels, batch + query + [DV],
                         q_s.type.shape[:-1] + (dv_size,))
        dout = canonical(b, dout, n_batch, layout.grouped)
        if dout.type.element_type != out.type.element_type:
            dout = b.convert(dout, out.type.element_type)
        grads = attention_grad(b, *operands, out, lse, dout, scale=m.scale, causal=m.causal,
                               fill=m.fill)
        for grad, split, split_labels, dot, labels in (
                (grads[0], q_s, batch + query + [D], g.dq, g.dq_labels),
                (grads[1], k_s, batch + [K, D], g.dk, g.dk_labels),
                (grads[2], v_s, batch + [K, DV], g.dv, g.dv_labels)):
            result = dot.results[0]
            x = _relayout(b, reshape(b, grad, split.type.shape), split_labels, labels,
                          result.type.shape)
            if x.type.element_type != result.type.element_type:
                x = b.convert(x, result.type.element_type)
            replacements[result] = x
    ops = block.operations
    if m.dot2 is not None and ops.index(m.dot2.op) < ops.index(g.first):
        insert_before(block, backward, g.first)
        insert_before(block, forward, m.dot2.op)
    else:
        forward.operations.extend(backward.operations)
        insert_before(block, forward, g.first)
    replace_uses(func_op, replacements)


def _relayout(b: Builder, x: Value, labels: list, target: list, shape) -> Value:
    """``x`` (dims labelled ``labels``) as dims labelled ``target`` of ``shape``: unit dims
    dropped, the others transposed into order, then reshaped."""
    present = [lab for lab, n in zip(labels, x.type.shape) if n != 1]
    wanted = [lab for lab, n in zip(target, shape) if n != 1]
    x = reshape(b, x, [n for n in x.type.shape if n != 1])
    x = transpose(b, x, [present.index(lab) for lab in wanted])
    return reshape(b, x, shape)
