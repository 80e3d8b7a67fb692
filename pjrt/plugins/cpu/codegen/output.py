"""The output fusion kernel: one dot_general through the executor's GEMM, tile by tile, with
its epilogue applied to each tile while it is in cache (see kernels.py)."""
from __future__ import annotations

from pjrt.plugins.cpu.attrs import plain
from pjrt.plugins.cpu.codegen.kernels import _TILE_M, _TILE_N, Kernel, _size
from pjrt.plugins.cpu.codegen.scalar import NotGeneratable, elem_name


def output_kernel(k: Kernel) -> str:
    dots = [op for op in k.ops if op.name == "stablehlo.dot_general"]
    if len(dots) != 1 or any(op.name == "stablehlo.reduce" for op in k.ops):
        raise NotGeneratable("an output fusion needs exactly one dot_general and no reduce")
    dot = dots[0]
    lhs, rhs = dot.operands
    elem = elem_name(dot.results[0].type)
    if elem not in ("f32", "f64") or elem_name(lhs.type) != elem or elem_name(rhs.type) != elem:
        raise NotGeneratable(f"dot of {lhs.type} x {rhs.type} -> {dot.results[0].type}")
    if lhs not in k.params or rhs not in k.params:
        raise NotGeneratable("dot operands must be fusion parameters")
    dn = plain(dot.attributes["dot_dimension_numbers"])
    if dn.get("lhs_batching_dimensions") or dn.get("rhs_batching_dimensions") or \
            lhs.type.rank != 2 or rhs.type.rank != 2:
        raise NotGeneratable("only 2-d dots without batch dimensions")
    (lc,), (rc,) = dn["lhs_contracting_dimensions"], dn["rhs_contracting_dimensions"]
    m, kk = (lhs.type.shape[0], lhs.type.shape[1]) if lc == 1 else (lhs.type.shape[1], lhs.type.shape[0])
    n = rhs.type.shape[1] if rc == 0 else rhs.type.shape[0]
    shape = [m, n]
    # The dot goes into the buffer of a result of its type and shape (the first one), read
    # back only at the element being computed; other results come from the epilogue.
    target = next((i for i, r in enumerate(k.results)
                   if list(r.type.shape) == shape and elem_name(r.type) == elem), None)
    if target is None:
        raise NotGeneratable("no result of the dot's type to compute it into")
    for r in k.results:
        if _size(r.type.shape) != m * n:
            raise NotGeneratable("output fusion results of another size than the dot")
    t = "float" if elem == "f32" else "double"
    gemm = "sgemm" if elem == "f32" else "dgemm"
    ia, ib = k.params.index(lhs), k.params.index(rhs)
    tm, tn = min(_TILE_M, m), min(_TILE_N, n)
    tiles_m, tiles_n = -(-m // tm), -(-n // tn)
    body = k.body
    saved = body.open()
    body.fixed[dot.results[0]] = (("i", "jj"), "dv")
    idx = ("i", "jj")
    outer = body.open()
    stores = [k.store(ri, r, idx, shape) for ri, r in enumerate(k.results)]
    inner = body.close(outer)
    body.close(saved)
    lda = lhs.type.shape[1]
    ldb = rhs.type.shape[1]
    a_off = f"i0 * {lda}" if lc == 1 else "i0"
    b_off = "j0" if rc == 0 else f"j0 * {ldb}"
    part = [
        "for (int64_t tile = b; tile < e; ++tile) {",
        f"  const int64_t i0 = tile / {tiles_n} * {tm}, j0 = tile % {tiles_n} * {tn};",
        f"  const int64_t i1 = i0 + {tm} < {m} ? i0 + {tm} : {m}, j1 = j0 + {tn} < {n} ? j0 + {tn} : {n};",
        f"  a->env->{gemm}({int(lc == 0)}, {int(rc == 1)}, i1 - i0, j1 - j0, {kk}, in{ia} + {a_off}, {lda}, "
        f"in{ib} + {b_off}, {ldb}, out{target} + i0 * {n} + j0, {n});",
        "  for (int64_t i = i0; i < i1; ++i) {",
        "    for (int64_t jj = j0; jj < j1; ++jj) {",
        f"      const {t} dv = out{target}[i * {n} + jj];",
    ]
    part += ["      " + x for x in inner + stores]
    part += ["    }", "  }", "}"]
    return k.source(part, tiles_m * tiles_n, 1)
