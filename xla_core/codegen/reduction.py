"""The reduction template: a reduction fusion's reduces, row by row or by blocks of columns.

* row (reduced dims are a suffix): the part's range is rows; per row the reductions run in
  program order, each over the row with LANES independent accumulators (combined as a tree at
  the end: the compiler vectorizes the lanes, IEEE semantics stay otherwise), then the
  row-shaped and element results are written. Per-row scalars computed from the reductions
  (a log of the sum, a reciprocal) are computed once per row, ahead of the loops; a costly
  reduced operand that later loops use too (softmax's exp) is kept in a row buffer. A target
  may split a row over threads (``KernelTarget.row_split``, a GPU's warp or block): each
  then takes every count-th element in every loop over the row (so a row buffer's elements
  are its own, and the target may hold only those: ``row_buffer``, which may also decline,
  and later loops recompute), and ``row_combine`` joins their accumulators (warp shuffles,
  shared memory).
* column (reduced dims are a prefix): the range is blocks of columns; each reduction
  accumulates a block of columns over all rows, from the init value, then the results are
  written.
  Both orders are the cpu backend's native kernels' too (Note [float sum order] in
  pjrt/plugins/cpu/native/kernels_reduction.cc), so a program gives the same bits before
  and after its kernels are compiled.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE
from stablehlo.ir.regions import Monoid, region_monoid

from xla_core.codegen.attrs import attr
from xla_core.codegen.kernel import Kernel, loop_vars, size
from xla_core.codegen.loop import loop_kernel
from xla_core.codegen.scalar import NotGeneratable


def combiner(reduce: Operation) -> tuple[Monoid, Operation]:
    """The monoid a single-operand ``reduce`` combines with, and the body's op that is it
    (rendered on the accumulator and the element: every monoid is commutative, so the
    body's operand order does not matter)."""
    if len(reduce.operands) != 2:
        raise NotGeneratable("a variadic reduce")
    region = reduce.regions[0]
    monoid = region_monoid(region)
    if monoid is None:
        raise NotGeneratable("a reduce whose body is not a single monoid op")
    return monoid, region.blocks[0].operations[0]


def _identity(r, monoid: Monoid, type) -> str:
    """The identity of ``monoid`` on the element type of ``type``, as renderer ``r``
    spells it."""
    value = monoid.identity(type.element_type)
    if value is None:
        raise NotGeneratable(f"{monoid.op} has no identity on {type.element_type}")
    return r.literal(value, r.elem(type))


def why_not_reduce(r, reduce: Operation) -> str | None:
    """None when the reduction template, with renderer ``r``, generates the single-operand
    ``reduce``'s accumulation, else why not (a backend's fusion hook asks this)."""
    try:
        monoid, op = combiner(reduce)
        _identity(r, monoid, reduce.results[0].type)
    except NotGeneratable as exc:
        return str(exc)
    return r.why_not(op)


def reduction_kernel(k: Kernel) -> str:
    reduces = [op for op in k.ops if op.name == "stablehlo.reduce"]
    if not reduces:
        # Simplification after fusion (a reduce over size-1 dims became elementwise) can
        # leave a reduction fusion with nothing to reduce: it is a loop.
        return loop_kernel(k)
    if any(op.name == "stablehlo.dot_general" for op in k.ops):
        raise NotGeneratable("dot_general in a reduction fusion")
    shape = list(reduces[0].operands[0].type.shape)
    dims = sorted(attr(reduces[0], "dimensions"))
    for op in reduces:
        if list(op.operands[0].type.shape) != shape or sorted(attr(op, "dimensions")) != dims:
            raise NotGeneratable("reductions of different shapes or dimensions")
    rank = len(shape)
    if dims == list(range(rank - len(dims), rank)):
        return _row_reduction(k, reduces, shape, dims)
    if dims == list(range(len(dims))):
        return _column_reduction(k, reduces, shape, dims)
    raise NotGeneratable(f"reduced dimensions {dims} are neither a prefix nor a suffix")


def _classify(k: Kernel, shape, kept):
    rows, elems = [], []
    for i, r in enumerate(k.results):
        n = size(r.type.shape)
        if n == size(kept):
            rows.append((i, r))
        elif n == size(shape):
            elems.append((i, r))
        else:
            raise NotGeneratable(f"result #{i} is neither row- nor element-shaped")
    return rows, elems


def _reduce_step(k: Kernel, op, acc: str, lane: str, idx, keep: str | None = None) -> list[str]:
    """Statements of one accumulation of ``op``'s operand at ``idx`` into ``acc[lane]`` (and
    into ``keep``, the row buffer's element ``j``, when given)."""
    body = k.body
    saved = body.open()
    v = body.at(op.operands[0], idx)
    if keep is not None:
        body.lines.append(f"{keep} = {v};")
    comb = k.renderer.expression(combiner(op)[1], [f"{acc}[{lane}]", v], k.math)
    body.lines.append(f"{acc}[{lane}] = {comb};")
    return body.close(saved)


# Ops worth computing once per element and keeping in a row buffer rather than recomputing in a
# later loop over the row (a buffered value costs a store and a load from L1/L2).
_EXPENSIVE = frozenset({
    "stablehlo.exponential", "stablehlo.exponential_minus_one", "stablehlo.log",
    "stablehlo.log_plus_one", "stablehlo.tanh", "stablehlo.logistic", "chlo.erf", "chlo.erfc",
    "stablehlo.power", "stablehlo.atan2", "stablehlo.sine", "stablehlo.cosine",
    "stablehlo.sqrt", "stablehlo.rsqrt", "stablehlo.cbrt", "stablehlo.divide"})


def _squeezed(shape) -> list[int]:
    return [n for n in shape if n != 1]


def _uniform(v) -> bool:
    """Whether ``v`` is the same at every index of a row: a scalar, a constant, or a broadcast
    of a one-element one of those."""
    if v.type.rank == 0:
        return True
    if v.is_block_argument:
        return False
    op = v.owner
    if op.name == "stablehlo.constant":
        return True
    return op.name == "stablehlo.broadcast_in_dim" and size(op.operands[0].type.shape) == 1 \
        and _uniform(op.operands[0])


def _row_values(k: Kernel, reduces, kept) -> list[tuple]:
    """(value, reductions it depends on) of the row-shaped values computed from reduction
    results (reshapes of them, elementwise ops on them and uniform values), in program order.

    A kernel computes each once per row, ahead of the loops over the row: left inside a loop,
    a per-row scalar (a log of the sum, a reciprocal) is recomputed per element and its calls
    keep GCC from vectorizing the loop."""
    want = _squeezed(kept)
    deps = {op.results[0]: {op} for op in reduces}
    out = []
    for op in k.ops:
        if op.name == "stablehlo.reduce" or len(op.results) != 1:
            continue
        v = op.results[0]
        if _squeezed(v.type.shape) != want or v.type.rank == 0:
            continue
        elementwise = op.opdef is not None and ELEMENTWISE in op.opdef.traits
        if op.name != "stablehlo.reshape" and not elementwise:
            continue
        found, ok = set(), True
        for x in op.operands:
            if x in deps:
                found |= deps[x]
            elif not _uniform(x):
                ok = False
        if ok and found:
            deps[v] = found
            out.append((v, found))
    return out


def _buffered(k: Kernel, reduces, shape) -> dict:
    """reduce op -> its operand, for the operands to keep in a row buffer: element-shaped,
    used by other ops of the fusion too (a later loop over the row) and costly to compute
    (a transcendental or a division on the way from the parameters)."""
    uses: dict = {}
    for op in k.ops:
        for x in op.operands:
            uses[x] = uses.get(x, 0) + 1
    for r in k.results:
        uses[r] = uses.get(r, 0) + 1

    def costly(v, seen) -> bool:
        if v.is_block_argument or v in seen or list(v.type.shape) != list(shape):
            return False
        seen.add(v)
        op = v.owner
        return op.name in _EXPENSIVE or any(costly(x, seen) for x in op.operands)

    return {op: op.operands[0] for op in reduces
            if uses.get(op.operands[0], 0) > 1 and costly(op.operands[0], set())}


def _row_reduction(k: Kernel, reduces, shape, dims) -> str:
    body = k.body
    kept = shape[:len(shape) - len(dims)]
    red = shape[len(shape) - len(dims):]
    n = size(red)
    rows, elems = _classify(k, shape, kept)
    keep = _buffered(k, reduces, shape)
    split = k.target.row_split(n)
    first, last = [], []
    for bi, (op, v) in enumerate(list(keep.items())):
        made = k.target.row_buffer(f"rowbuf{bi}", k.renderer.ctype(v.type), n)
        if made is None:  # the target keeps no buffer this long: later loops recompute
            del keep[op]
            continue
        declare, release, element = made
        first.append(declare)
        if release is not None:
            last.append(release)
        keep[op] = (v, element)
    part = first + ["for (int64_t r = b; r < e; ++r) {"]
    saved = body.open()
    row_memo = body.memo[-1]
    kidx = loop_vars(body, kept, "r")
    row_values = _row_values(k, reduces, kept)
    done: set = set()

    def hoist() -> None:
        # Row values whose reductions are all computed, at the indices later loops ask for.
        nonlocal row_values
        for v, needs in row_values:
            if needs <= done:
                body.at(v, k._idx_for(v, kidx, kept))
        row_values = [(v, needs) for v, needs in row_values if not needs <= done]

    for ri, op in enumerate(reduces):
        hoist()
        elem = k.renderer.elem(op.results[0].type)
        t = k.renderer.TYPES[elem]
        monoid, comb = combiner(op)
        buf = keep.get(op, (None, None))[1]
        # Lanes only pay off on rows of at least that many elements; a loop that runs zero
        # times (the main one on a short row, the tail on a multiple of LANES) is not emitted:
        # GCC would spend time on it all the same.
        lanes = k.target.lanes(elem) if n >= k.target.lanes(elem) and split is None else 1
        acc = f"acc{ri}"
        body.lines.append(f"{t} {acc}[{lanes}];")
        body.lines.append(f"for (int l = 0; l < {lanes}; ++l) {acc}[l] = "
                          f"{_identity(k.renderer, monoid, op.results[0].type)};")
        # Main loop: LANES elements per step, one accumulator each; then the tail.
        outer = body.open()
        ridx = loop_vars(body, red, "j")
        step = body.lines + _reduce_step(k, op, acc, "l", kidx + ridx, buf)
        body.close(outer)
        outer = body.open()
        ridx = loop_vars(body, red, "j")
        tail = body.lines + _reduce_step(k, op, acc, "0", kidx + ridx, buf)
        body.close(outer)
        if buf is not None:
            # Later loops over the row read the operand back (j: the flat position in the row).
            row_memo[(op.operands[0], tuple(kidx + ridx))] = buf
        if split is not None:  # this thread's elements of the row, then the row's threads
            body.lines.append(f"for (int64_t j = {split[0]}; j < {n}; j += {split[1]}) {{")
            body.lines += ["  " + x for x in tail]
            body.lines.append("}")
            body.lines += k.target.row_combine(
                f"{acc}[0]", lambda a, b: k.renderer.expression(comb, [a, b], k.math), t)
        else:
            main = n // lanes * lanes
            body.lines.append(f"for (int64_t j0 = 0; j0 < {main}; j0 += {lanes}) {{")
            body.lines.append(f"  for (int64_t l = 0; l < {lanes}; ++l) {{")
            body.lines.append("    const int64_t j = j0 + l;")
            body.lines += ["    " + x for x in step]
            body.lines += ["  }", "}"]
            if main < n:
                body.lines.append(f"for (int64_t j = {main}; j < {n}; ++j) {{")
                body.lines += ["  " + x for x in tail]
                body.lines.append("}")
        w = lanes // 2
        while w:
            pair = k.renderer.expression(comb, [f"{acc}[l]", f"{acc}[l + {w}]"], k.math)
            body.lines.append(f"for (int l = 0; l < {w}; ++l) {acc}[l] = {pair};")
            w //= 2
        init = body.at(op.operands[1], ())
        final = body.temp(t, k.renderer.expression(comb, [init, f"{acc}[0]"], k.math), "red")
        body.fixed[op.results[0]] = (kidx, final)
        done.add(op)
    hoist()
    for i, r in rows:
        body.lines.append(k.store(i, r, kidx, kept))
    if elems:
        outer = body.open()
        ridx = loop_vars(body, red, "j")
        stores = [k.store(i, r, kidx + ridx, shape) for i, r in elems]
        inner = body.close(outer)
        body.lines.append(f"for (int64_t j = 0; j < {n}; ++j) {{" if split is None else
                          f"for (int64_t j = {split[0]}; j < {n}; j += {split[1]}) {{")
        body.lines += ["  " + x for x in inner + stores]
        body.lines.append("}")
    lines = body.close(saved)
    part += ["  " + x for x in lines] + ["}"] + last
    return k.source(part, size(kept), max(1, k.target.task // max(1, n)))


def _column_reduction(k: Kernel, reduces, shape, dims) -> str:
    body = k.body
    red = shape[:len(dims)]
    kept = shape[len(dims):]
    ncols, nred = size(kept), size(red)
    if ncols == 0:  # nothing to compute: the executor handles empty results
        raise NotGeneratable("a reduction with no columns")
    cb = min(k.target.columns, ncols)
    blocks = -(-ncols // cb)
    rows, elems = _classify(k, shape, kept)
    bounds = (f"c0 = blk * {cb}, c1 = c0 + {cb} < {ncols} ? c0 + {cb} : {ncols};" if blocks > 1
              else f"c0 = 0, c1 = {ncols};")
    part = ["for (int64_t blk = b; blk < e; ++blk) {", f"  const int64_t {bounds}"]
    saved = body.open()

    def column_loop(make) -> None:
        outer = body.open()
        kidx = loop_vars(body, kept, "c")
        extra = make(kidx)
        inner = body.close(outer)
        body.lines.append("for (int64_t c = c0; c < c1; ++c) {")
        body.lines += ["  " + x for x in inner + extra]
        body.lines.append("}")

    for ri, op in enumerate(reduces):
        t = k.renderer.ctype(op.results[0].type)
        _, comb = combiner(op)
        acc = f"acc{ri}"
        # Each column folds its rows in order from the init value, as the native kernel
        # does (Note [float sum order] in native/kernels_reduction.cc).
        init = body.at(op.operands[1], ())
        body.lines.append(f"{t} {acc}[{cb}];")
        body.lines.append(f"for (int64_t c = 0; c < {cb}; ++c) {acc}[c] = {init};")
        body.lines.append(f"for (int64_t q = 0; q < {nred}; ++q) {{")
        outer = body.open()
        ridx = loop_vars(body, red, "q")
        head = body.close(outer)
        body.lines += ["  " + x for x in head]
        inner_saved = body.lines
        body.lines = []
        body.memo.append({})
        column_loop(lambda kidx: _reduce_step(k, op, acc, "c - c0", ridx + kidx))
        body.memo.pop()
        body.lines = inner_saved + ["  " + x for x in body.lines]
        body.lines.append("}")
        outer = body.open()
        kidx = loop_vars(body, kept, "c")
        body.close(outer)
        body.fixed[op.results[0]] = (kidx, f"{acc}[c - c0]")
    if rows:
        column_loop(lambda kidx: [k.store(i, r, kidx, kept) for i, r in rows])
    if elems:
        body.lines.append(f"for (int64_t q = 0; q < {nred}; ++q) {{")
        outer = body.open()
        ridx = loop_vars(body, red, "q")
        head = body.lines
        body.lines = []
        column_loop(lambda kidx: [k.store(i, r, ridx + kidx, shape) for i, r in elems])
        inner = body.lines
        body.lines = head + inner
        lines = body.close(outer)
        body.lines += ["  " + x for x in lines] + ["}"]
    lines = body.close(saved)
    part += ["  " + x for x in lines] + ["}"]
    return k.source(part, blocks, 1)
