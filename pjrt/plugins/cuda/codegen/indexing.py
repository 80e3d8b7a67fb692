"""Kernels of the data-dependent indexing ops: scatter, gather, dynamic_slice and
dynamic_update_slice, and of reduce_window (kind ``indexing`` in ptxas.json).

Fusion keeps these ops out, so each is a kernel of its own, written here from the op's
dimension numbers with the index helpers of xla_core/codegen (index.py) and the CUDA renderer
(the scatter update region through the scalar-op protocol, as a reduction's combiner). The
semantics are the reference interpreter's (stablehlo/interpreter/indexing.py, data_movement.py):

* ``gather`` and ``dynamic_slice``: a thread per result element (grid-stride); each start
  index is clamped so the slice fits in the operand.
* ``dynamic_update_slice``: a thread per result element, which is the update's element when
  it lies in the (clamped) window, else the operand's.
* ``scatter``: the executable copies each input into its result (byte copies), then ONE
  thread applies every update element in row-major order of the update index space, so
  overlapping updates combine in the interpreter's order; an update element whose result
  index is out of bounds is skipped. Its kernel's parameters are the indices, the updates,
  then the results (``scatter_operands``).
* ``reduce_window``: a thread per result element, looping over its window. The inputs are
  padded (``padding``; negative crops) and base-dilated with the init values, and each window
  (``window_dimensions`` taps ``window_dilations`` apart, windows ``window_strides`` apart) is
  folded from the init values in row-major order of its taps through the body region: a tap
  in the padding or in a dilation's hole reads the init value, so a body whose init is no
  identity (an add from 1) gives the interpreter's result. The body is rendered op by op as
  scatter's region is; a variadic reduce_window folds all its inputs at once.
"""
from __future__ import annotations

import numpy as np

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.base import ELEMENTWISE
from xla_core.codegen import NotGeneratable
from xla_core.codegen.attrs import attr
from xla_core.codegen.body import Body
from xla_core.codegen.index import linear

from pjrt.plugins.cuda.codegen.source import KernelText
from pjrt.plugins.cuda.codegen.target import CUDA_TARGET, CudaKernelTarget

KIND = "indexing"
INDEXING_OPS = ("stablehlo.scatter", "stablehlo.gather", "stablehlo.dynamic_slice",
                "stablehlo.dynamic_update_slice", "stablehlo.reduce_window")


def scatter_operands(op: Operation) -> list:
    """The operands a scatter kernel reads: its indices and updates (the inputs are copied
    into the results by the executable)."""
    return list(op.operands[len(op.results):])


def indexing_kernel(op: Operation) -> KernelText:
    """The kernel of one of ``INDEXING_OPS``; NotGeneratable when it cannot be written."""
    target = CudaKernelTarget()
    r = target.renderer
    for v in (*op.operands, *op.results):
        r.elem(v.type)
    if any(n == 0 for v in op.results for n in v.type.shape):
        raise NotGeneratable(f"a {op.name} with an empty result")
    if op.name == "stablehlo.scatter":
        return _scatter(op, target)
    if op.name == "stablehlo.reduce_window":
        return _reduce_window(op, target)
    tasks = int(np.prod(op.results[0].type.shape))
    ins = [r.ctype(v.type) for v in op.operands]
    body = {"stablehlo.gather": _gather, "stablehlo.dynamic_slice": _dynamic_slice,
            "stablehlo.dynamic_update_slice": _dynamic_update_slice}[op.name](op)
    text = target.kernel(target.bind(ins, [r.ctype(op.results[0].type)]) + body, tasks, 1)
    grid, block = target.launch()
    return KernelText(KIND, text, tuple(grid), tuple(block))


def _split(flat: str, shape) -> tuple[list[str], list[str]]:
    """Lines declaring the per-dimension indices of row-major ``flat`` in ``shape`` (the
    templates' delinearization), and the index expressions."""
    body = Body(CUDA_TARGET.renderer, {}, set(), [], "")
    names = body.delinearize(flat, shape)
    return body.lines, list(names)


def _sum(terms: list[str]) -> str:
    """An index that is the sum of ``terms``, parenthesized (``linear`` multiplies it)."""
    terms = [t for t in terms if t != "0"]
    if not terms:
        return "0"
    return terms[0] if len(terms) == 1 and terms[0].isidentifier() else \
        "(" + " + ".join(terms) + ")"


def _clamp(expr: str, hi: int) -> str:
    return f"({expr} < 0 ? 0 : ({expr} > {hi} ? {hi} : {expr}))"


def _start(indices: str, shape, at: list[str]) -> str:
    """The start index at ``at`` of an index tensor, as int64_t."""
    return f"(int64_t){indices}[{linear(at, shape)}]"


def _index_position(batch: list[str], ivd: int, rank: int, k: int) -> list[str]:
    """The position of component ``k`` of an index vector: ``batch`` (the batch indices, in
    order) with ``k`` at ``index_vector_dim``."""
    return [str(k) if j == ivd else batch[j - (j > ivd)] for j in range(rank)]


def _gather(op: Operation) -> list[str]:
    operand, indices = op.operands
    dn = attr(op, "dimension_numbers")
    offset_dims = list(dn.get("offset_dims", []))
    collapsed = list(dn.get("collapsed_slice_dims", []))
    operand_batching = list(dn.get("operand_batching_dims", []))
    indices_batching = list(dn.get("start_indices_batching_dims", []))
    start_index_map = list(dn.get("start_index_map", []))
    ivd = int(dn.get("index_vector_dim", 0))
    sizes = list(attr(op, "slice_sizes"))
    if 0 in sizes:  # a collapsed empty slice: the interpreter fills the result with zeros
        raise NotGeneratable("a gather of empty slices")
    shape, src = list(op.results[0].type.shape), list(operand.type.shape)
    ishape = list(indices.type.shape)
    lines, out = _split("b", shape)
    batch_dims = [d for d in range(len(shape)) if d not in offset_dims]
    batch = [out[d] for d in batch_dims]
    offset_operand_dims = [d for d in range(len(src))
                           if d not in collapsed and d not in operand_batching]
    at = []
    for d in range(len(src)):
        terms = []
        if d in start_index_map:
            start = _start("in1", ishape, _index_position(batch, ivd, len(ishape),
                                                          start_index_map.index(d)))
            lines.append(f"const int64_t s{d} = {start};")
            terms.append(_clamp(f"s{d}", src[d] - sizes[d]))
        if d in operand_batching:
            j = indices_batching[operand_batching.index(d)]
            terms.append(batch[j - (j > ivd)])
        if d in offset_operand_dims:
            terms.append(out[offset_dims[offset_operand_dims.index(d)]])
        at.append(_sum(terms))
    return lines + [f"out0[b] = in0[{linear(at, src)}];"]


def _dynamic_slice(op: Operation) -> list[str]:
    src = list(op.operands[0].type.shape)
    sizes = list(attr(op, "slice_sizes"))
    lines, out = _split("b", list(op.results[0].type.shape))
    at = []
    for d, (n, size) in enumerate(zip(src, sizes)):
        start = _clamp(f"(int64_t)in{1 + d}[0]", n - size) if n != size else "0"
        at.append(_sum([start, out[d]]))
    return lines + [f"out0[b] = in0[{linear(at, src)}];"]


def _dynamic_update_slice(op: Operation) -> list[str]:
    shape = list(op.operands[0].type.shape)
    sizes = list(op.operands[1].type.shape)
    lines, at = _split("b", shape)
    inside, local = [], []
    for d, (n, size) in enumerate(zip(shape, sizes)):
        lines.append(f"const int64_t s{d} = {_clamp(f'(int64_t)in{2 + d}[0]', n - size)};")
        inside.append(f"{at[d]} >= s{d} && {at[d]} < s{d} + {size}")
        local.append(f"({at[d]} - s{d})" if at[d] != "0" else "0")
    window = " && ".join(inside) or "true"
    return lines + [f"out0[b] = ({window}) ? in1[{linear(local, sizes)}] : in0[b];"]


def _scatter(op: Operation, target: CudaKernelTarget) -> KernelText:
    r = target.renderer
    n = len(op.results)
    indices, updates = op.operands[n], op.operands[n + 1:]
    dn = attr(op, "scatter_dimension_numbers")
    window_dims = list(dn.get("update_window_dims", []))
    inserted = list(dn.get("inserted_window_dims", []))
    input_batching = list(dn.get("input_batching_dims", []))
    indices_batching = list(dn.get("scatter_indices_batching_dims", []))
    to_operand = list(dn.get("scatter_dims_to_operand_dims", []))
    ivd = int(dn.get("index_vector_dim", 0))
    shape = list(op.results[0].type.shape)
    ushape = list(updates[0].type.shape)
    ishape = list(indices.type.shape)
    region = op.regions[0].blocks[0]
    for u, a, res in zip(updates, region.arguments[n:], op.results):
        if r.elem(u.type) != r.elem(a.type) or r.elem(a.type) != r.elem(res.type):
            raise NotGeneratable("a scatter whose updates convert to another element type")
    lines, upd = _split("u", ushape)
    scatter_dims = [d for d in range(len(ushape)) if d not in window_dims]
    batch = [upd[d] for d in scatter_dims]
    window_input_dims = [d for d in range(len(shape))
                         if d not in inserted and d not in input_batching]
    at, bounds = [], []
    for d in range(len(shape)):
        terms = []
        if d in to_operand:
            terms.append(_start("in0", ishape, _index_position(
                batch, ivd, len(ishape), to_operand.index(d))))
        if d in input_batching:
            j = indices_batching[input_batching.index(d)]
            terms.append(batch[j - (j > ivd)])
        if d in window_input_dims:
            terms.append(upd[window_dims[window_input_dims.index(d)]])
        lines.append(f"const int64_t t{d} = {_sum(terms)};")
        at.append(f"t{d}")
        bounds.append(f"t{d} >= 0 && t{d} < {shape[d]}")
    lines.append(f"if (!({' && '.join(bounds) or 'true'})) continue;")
    lines.append(f"const int64_t o = {linear(at, shape)};")
    olds = [f"out{k}[o]" for k in range(n)]
    news = [f"in{1 + k}[u]" for k in range(n)]
    combined = _region(r, region, olds + news, lines)
    # every result's new value before any is stored: a variadic region may return another
    # result's old value
    lines += [f"const {r.ctype(res.type)} c{k} = {v};"
              for k, (v, res) in enumerate(zip(combined, op.results))]
    lines += [f"out{k}[o] = c{k};" for k in range(n)]
    count = int(np.prod(ushape))
    params = target.bind([r.ctype(v.type) for v in (indices, *updates)],
                         [r.ctype(v.type) for v in op.results])
    loop = [f"for (int64_t u = 0; u < {count}; ++u) {{", *("  " + line for line in lines), "}"]
    text = target.kernel(params + loop, 1, 1)
    return KernelText(KIND, text, (1, 1, 1), (1, 1, 1))


def _ints(op: Operation, name: str, rank: int, default: int) -> list[int]:
    value = op.attributes.get(name)
    return [default] * rank if value is None else [int(v) for v in attr(op, name)]


def _reduce_window(op: Operation, target: CudaKernelTarget) -> KernelText:
    r = target.renderer
    n = len(op.results)
    inputs, inits = op.operands[:n], op.operands[n:]
    shape = list(inputs[0].type.shape)
    rank = len(shape)
    region = op.regions[0].blocks[0]
    for x, a, res in zip(inputs, region.arguments[n:], op.results):
        if r.elem(x.type) != r.elem(a.type) or r.elem(a.type) != r.elem(res.type):
            raise NotGeneratable("a reduce_window whose body converts to another element type")
    window = _ints(op, "window_dimensions", rank, 1)
    strides = _ints(op, "window_strides", rank, 1)
    base = _ints(op, "base_dilations", rank, 1)
    wdil = _ints(op, "window_dilations", rank, 1)
    padding = np.zeros((rank, 2), np.int64) if op.attributes.get("padding") is None else \
        np.asarray(attr(op, "padding"), np.int64).reshape(rank, 2)
    out_shape = list(op.results[0].type.shape)
    lines, out = _split("b", out_shape)
    types = [r.ctype(v.type) for v in op.results]
    lines += [f"{t} acc{k} = in{n + k}[0];" for k, t in enumerate(types)]
    taps, inside, at = [], [], []
    for d in range(rank):
        # q: the tap's place in the dilated input (padding low removed)
        dilated = (shape[d] - 1) * base[d] + 1 if shape[d] else 0
        q = f"{out[d]} * {strides[d]} + w{d} * {wdil[d]} - ({int(padding[d, 0])})"
        taps.append(f"for (int64_t w{d} = 0; w{d} < {window[d]}; ++w{d}) {{")
        taps.append(f"const int64_t q{d} = {q};")
        inside.append(f"q{d} >= 0 && q{d} < {dilated}" +
                      (f" && q{d} % {base[d]} == 0" if base[d] > 1 else ""))
        at.append(f"q{d} / {base[d]}" if base[d] > 1 else f"q{d}")
    body = [f"const bool tap = {' && '.join(inside) or 'true'};"]
    body += [f"const {t} x{k} = tap ? in{k}[{linear(at, shape)}] : in{n + k}[0];"
             for k, t in enumerate(types)]
    combined = _region(r, region, [f"acc{k}" for k in range(n)] +
                             [f"x{k}" for k in range(n)], body)
    # every new accumulator before any is stored: a variadic body may return another's
    body += [f"const {t} c{k} = {v};" for k, (t, v) in enumerate(zip(types, combined))]
    body += [f"acc{k} = c{k};" for k in range(n)]
    lines += taps + body + ["}"] * rank
    lines += [f"out{k}[b] = acc{k};" for k in range(n)]
    params = target.bind([r.ctype(v.type) for v in op.operands], types)
    text = target.kernel(params + lines, int(np.prod(out_shape)), 1)
    grid, block = target.launch()
    return KernelText(KIND, text, tuple(grid), tuple(block))


def _region(r, block, args: list[str], lines: list[str]) -> list[str]:
    """The values an update (or reduce_window) region returns for argument expressions
    ``args``: each op a local of ``lines``, through the scalar-op protocol."""
    names = dict(zip(block.arguments, args))
    for k, inner in enumerate(block.operations):
        if inner.name == "stablehlo.return":
            return [names[v] for v in inner.operands]
        result = inner.results[0] if len(inner.results) == 1 else None
        if result is None or result.type.shape:
            raise NotGeneratable(f"a region op {inner.name}")
        if inner.name == "stablehlo.constant":
            value = np.asarray(inner.attributes["value"].array).reshape(-1)[0]
            expr = r.literal(value, r.elem(result.type))
        elif inner.opdef is not None and inner.opdef.has(ELEMENTWISE):
            expr = r.expression(inner, [names[v] for v in inner.operands], set())
        else:
            raise NotGeneratable(f"a region op {inner.name}")
        lines.append(f"const {r.ctype(result.type)} v{k} = {expr};")
        names[result] = f"v{k}"
    raise NotGeneratable("a region without a return")
