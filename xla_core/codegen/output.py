"""The output template: one dot_general through the target's GEMM, tile by tile (rows x
columns, each tile one task), each tile written into the result buffer and its epilogue
applied to it while it is in cache.

A dot_general is a GEMM per batch element when each operand, with its batch dimensions
fixed, is a strided matrix: its free dimensions collapse into one dimension (consecutive in
memory, in the dot's order) and so do its contracting dimensions, one of the two with unit
stride (the GEMM's trans flag says which). So [2,256,768] x [768,N] is one [512,768] x
[768,N] GEMM, and attention's [B,S,H,D] x [B,S,H,D] with batch dims (B,H) is B*H GEMMs of
[S,D] x [D,S]^T with leading dimension H*D. The result's dimensions are batch, lhs free,
rhs free (dot_general's order), so each batch element's [M,N] block is contiguous.
"""
from __future__ import annotations

from xla_core.codegen.attrs import attr
from xla_core.codegen.index import strides
from xla_core.codegen.kernel import Kernel, loop_vars, size
from xla_core.codegen.scalar import NotGeneratable


def _collapse(shape, dims) -> tuple[int, int | None]:
    """(size, stride) of ``dims`` of a row-major ``shape`` taken as one dimension (stride
    None: size 1, any stride fits); NotGeneratable when they are not one strided run."""
    st = strides(shape)
    kept = [d for d in dims if shape[d] != 1]
    for a, b in zip(kept, kept[1:]):
        if st[a] != st[b] * shape[b]:
            raise NotGeneratable(f"dot dimensions {list(dims)} of {list(shape)} are not one "
                                 "strided run")
    return size([shape[d] for d in dims]), (st[kept[-1]] if kept else None)


def _matrix(rows, cols) -> int | None:
    """Leading dimension of (rows, cols) as a row-major matrix, or None if cols is strided."""
    (_, rs), (cn, cs) = rows, cols
    if cs not in (None, 1):
        return None
    return max(cn, 1) if rs is None else rs


def operand_layout(shape, batch, contracting, lhs: bool):
    """(trans flag, leading dimension, stride of the free dimension, size of the free
    dimension) of one dot operand as the GEMM's A (lhs: [M,K]) or B (rhs: [K,N])."""
    free = [d for d in range(len(shape)) if d not in batch and d not in contracting]
    f, c = _collapse(shape, free), _collapse(shape, contracting)
    plain_, flipped = (f, c), (c, f)  # A = [free, K] untransposed; B = [K, free]
    if not lhs:
        plain_, flipped = flipped, plain_
    ld = _matrix(*plain_)
    trans = 0
    if ld is None:
        ld, trans = _matrix(*flipped), 1
        if ld is None:
            raise NotGeneratable(f"no unit-stride dimension in dot operand {list(shape)}")
    return trans, ld, f[1] or 0, f[0]


def gemm_layout(renderer, dot) -> tuple:
    """(element type, (lhs batch dims, lhs contracting dims, lhs layout), (the same of rhs))
    of ``dot`` as GEMMs (layouts: ``operand_layout``); NotGeneratable when it is none."""
    lhs, rhs = dot.operands
    elem = renderer.elem(dot.results[0].type)
    # no GEMM of a narrow type here: the native low-precision kernels multiply those
    if elem not in renderer.FLOATS or elem in renderer.NARROW or \
            renderer.elem(lhs.type) != elem or renderer.elem(rhs.type) != elem:
        raise NotGeneratable(f"dot of {lhs.type} x {rhs.type} -> {dot.results[0].type}")
    dn = attr(dot, "dot_dimension_numbers")
    lb, rb = list(dn.get("lhs_batching_dimensions", [])), list(dn.get("rhs_batching_dimensions", []))
    lcd, rcd = list(dn["lhs_contracting_dimensions"]), list(dn["rhs_contracting_dimensions"])
    return (elem, (lb, lcd, operand_layout(list(lhs.type.shape), lb, lcd, True)),
            (rb, rcd, operand_layout(list(rhs.type.shape), rb, rcd, False)))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _tile_shape(target, batches: int, m: int, n: int, kk: int, elem: str) -> tuple[int, int]:
    """Rows and columns of the output template's GEMM tiles: at most the target's tile, cut
    evenly, and halved further (columns first: a column tile packs only its own part of the
    rhs, a row tile packs all of it again) while the tiles stay fewer than the work has
    ``task_macs``, and at most ``max_tiles``. Whole-width tiles would leave a small model's
    [34,192] x [192,192] projection on one thread, and 512-column tiles split a [34,576] one
    512 : 64."""
    lanes = target.lanes(elem)
    tiles_m, tiles_n = _ceil_div(m, target.tile_m), _ceil_div(n, target.tile_n)
    wanted = min(target.max_tiles, batches * m * n * max(1, kk) // target.task_macs)
    while batches * tiles_m * tiles_n * 2 <= wanted:
        if n // (2 * tiles_n) >= 2 * lanes:
            tiles_n *= 2
        elif m // (2 * tiles_m) >= target.min_tile_rows:
            tiles_m *= 2
        else:
            break
    columns = _ceil_div(_ceil_div(n, tiles_n), lanes) * lanes  # whole vectors of columns
    return max(1, _ceil_div(m, tiles_m)), max(1, min(n, columns))


# Note [Few-row GEMMs transposed]
#     A linear layer's dot is x [m,k] times a weight stored [n,k] (PyTorch's layout), a GEMM
#     with a transposed rhs. For few rows (a small transformer's 34 tokens) OpenBLAS runs it
#     at two thirds of the speed it runs the transposed product, weight [n,k] times x^T, into
#     a [n,m] tile (on AVX-512: 62-67 against 81-91 GFLOP/s from [34,192] x [192,192] to
#     [34,768] x [768,192]); each element is the same sum of the same products in the same
#     order, so with those kernels the results are the same bits. (OpenBLAS's AVX2 kernels,
#     on an AMD EPYC, round by panel: there any other cut of a GEMM changes bits too, see
#     the cpu backend's blas.py, gemm_bits_depend_on_panels.) The tile then goes
#     to a scratch array and the epilogue reads it transposed.


def output_kernel(k: Kernel) -> str:
    dots = [op for op in k.ops if op.name == "stablehlo.dot_general"]
    if len(dots) != 1 or any(op.name == "stablehlo.reduce" for op in k.ops):
        raise NotGeneratable("an output fusion needs exactly one dot_general and no reduce")
    dot = dots[0]
    lhs, rhs = dot.operands
    if lhs not in k.params or rhs not in k.params:
        raise NotGeneratable("dot operands must be fusion parameters")
    elem_name = k.renderer.elem
    elem, (lb, lcd, (ta, lda, a_stride, m)), (rb, _, (tb, ldb, b_stride, n)) = \
        gemm_layout(k.renderer, dot)
    lshape, rshape = list(lhs.type.shape), list(rhs.type.shape)
    kk = size([lshape[d] for d in lcd])
    shape = list(dot.results[0].type.shape)
    batch = shape[:len(lb)]
    nb = size(batch)
    # The dot goes into the buffer of a result of its element type and size (the first one:
    # a reshape of the dot's shape has the same row-major layout), read back only at the
    # element being computed; other results come from the epilogue.
    into = next((i for i, r in enumerate(k.results)
                 if size(r.type.shape) == m * n * nb and elem_name(r.type) == elem), None)
    if into is None:
        raise NotGeneratable("no result of the dot's type to compute it into")
    for r in k.results:
        if size(r.type.shape) != size(shape):
            raise NotGeneratable("output fusion results of another size than the dot")
    ia, ib = k.params.index(lhs), k.params.index(rhs)
    target = k.target
    tm, tn = _tile_shape(target, nb, m, n, kk, k.renderer.elem(dot.results[0].type))
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    per_batch = tiles_m * tiles_n
    body = k.body
    # Three scopes: the tile (batch indices), the row (lhs free indices), the element.
    tile_scope = body.open()
    bidx = loop_vars(body, batch, "bt")
    a_off = " + ".join([f"{x} * {strides(lshape)[d]}" for x, d in zip(bidx, lb) if x != "0"]
                       + ([f"i0 * {a_stride}"] if a_stride else [])) or "0"
    b_off = " + ".join([f"{x} * {strides(rshape)[d]}" for x, d in zip(bidx, rb) if x != "0"]
                       + ([f"j0 * {b_stride}"] if b_stride else [])) or "0"
    row_scope = body.open()
    lfree = len(lshape) - len(lb) - len(lcd)
    midx = loop_vars(body, shape[len(lb):len(lb) + lfree], "i")
    elem_scope = body.open()
    nidx = loop_vars(body, shape[len(lb) + lfree:], "jj")
    body.fixed[dot.results[0]] = (bidx + midx + nidx, "dv")
    stores = [k.store(ri, r, bidx + midx + nidx, shape) for ri, r in enumerate(k.results)]
    inner = body.close(elem_scope)
    row = body.close(row_scope)
    head = body.close(tile_scope)
    part = ["for (int64_t tile = b; tile < e; ++tile) {"]
    if nb > 1:
        part.append(f"  const int64_t bt = tile / {per_batch}, t = tile % {per_batch};")
    else:
        part.append("  const int64_t t = tile;")
    part.append(f"  const int64_t i0 = {(f't / {tiles_n} * {tm}' if tiles_n > 1 else f't * {tm}') if tiles_m > 1 else '0'}, "
                f"j0 = {f't % {tiles_n} * {tn}' if tiles_n > 1 else '0'};")
    part.append(f"  const int64_t i1 = {f'i0 + {tm} < {m} ? i0 + {tm} : {m}' if tiles_m > 1 else m}, "
                f"j1 = {f'j0 + {tn} < {n} ? j0 + {tn} : {n}' if tiles_n > 1 else n};")
    t = k.renderer.TYPES[elem]
    part.append(f"  {t}* cb = out{into}{f' + bt * {m * n}' if nb > 1 else ''};")
    part += ["  " + x for x in head]
    a, b = f"in{ia} + {a_off}", f"in{ib} + {b_off}"
    if ta == 0 and tb == 1 and m <= target.transposed_gemm_rows:
        # Note [Few-row GEMMs transposed]
        declare, release = target.scratch("ct", t, tm * tn)
        part += ["  " + declare,
                 "  " + target.gemm(elem, 0, 1, "j1 - j0", "i1 - i0", kk, b, ldb, a, lda, "ct", tm)]
        read = f"ct[(jj - j0) * {tm} + (i - i0)]"
    else:
        release = None
        part.append("  " + target.gemm(elem, ta, tb, "i1 - i0", "j1 - j0", kk, a, lda, b, ldb,
                                       f"cb + i0 * {n} + j0", n))
        read = f"cb[i * {n} + jj]"
    part.append("  for (int64_t i = i0; i < i1; ++i) {")
    part += ["    " + x for x in row]
    part.append("    for (int64_t jj = j0; jj < j1; ++jj) {")
    part.append(f"      const {t} dv = {read};")
    part += ["      " + x for x in inner + stores]
    part += ["    }", "  }"] + ([f"  {release}"] if release else []) + ["}"]
    return k.source(part, nb * per_batch, -(-target.task_macs // (tm * tn * max(1, kk))))


def dot_kernel(target, dot) -> str:
    """The kernel ``SYMBOL`` of a lone ``dot``, with no epilogue (a while loop's body calls
    it: while_loop.py): ``out0 = in0 x in1`` as one GEMM per batch element, a task each."""
    elem, (lb, lcd, (ta, lda, _, m)), (rb, _, (tb, ldb, _, n)) = \
        gemm_layout(target.renderer, dot)
    lhs, rhs = dot.operands
    lshape, rshape = list(lhs.type.shape), list(rhs.type.shape)
    batch = list(dot.results[0].type.shape)[:len(lb)]
    a_off, b_off = ["in0"], ["in1"]
    for pos, (dl, dr) in enumerate(zip(lb, rb)):
        index = f"(bt / {size(batch[pos + 1:])} % {batch[pos]})"
        a_off.append(f"{index} * {strides(lshape)[dl]}")
        b_off.append(f"{index} * {strides(rshape)[dr]}")
    kk = size([lshape[d] for d in lcd])
    gemm = target.gemm(elem, ta, tb, str(m), str(n), kk, " + ".join(a_off), lda,
                       " + ".join(b_off), ldb, f"out0 + bt * {m * n}", n)
    ctype = target.renderer.TYPES[elem]
    part = target.bind([ctype, ctype], [ctype])
    part += ["for (int64_t bt = b; bt < e; ++bt) {", "  " + gemm, "}"]
    return target.kernel(part, max(1, size(batch)), 1)
