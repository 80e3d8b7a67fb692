"""What a backend decides for the kernel templates: its kernel ABI, threads, vector widths.

The templates (loop.py, reduction.py, output.py, while_loop.py) write a kernel's work as a
*part*: statements that run one range ``[b, e)`` of its outer loop, reading parameters
``in<k>`` and writing results ``out<k>``. A backend's ``KernelTarget`` binds those names to
its calling convention, runs the part over its threads (or grid), and says how wide its
vectors are, how big a task must be, how a GEMM and scratch memory are called. The cpu
backend's is pjrt/plugins/cpu/codegen/target.py; a GPU backend writes its own, with its
renderer (scalar.py), and reuses the templates.
"""
from __future__ import annotations

from xla_core.codegen.scalar import ScalarRenderer

SYMBOL = "@SYMBOL@"  # stands for a kernel's name until the backend names it


class KernelTarget:
    """The backend's side of the templates (every method is the backend's to define)."""
    renderer: ScalarRenderer
    block: int          # innermost elements per task of a long loop
    task: int           # elements per task at least
    columns: int        # columns per block of a column reduction
    tile_m: int         # rows and columns of an output fusion's GEMM tile
    tile_n: int
    task_macs: int      # multiply-adds per task of an output fusion at least
    max_tiles: int      # tiles an output fusion's GEMM is cut into for threads at most
    min_tile_rows: int  # rows of a tile cut for threads at least
    transposed_gemm_rows: int  # rows up to which a dot with a transposed rhs is computed
                               # transposed (Note [Few-row GEMMs transposed], output.py)

    def row_split(self, n: int) -> tuple[str, str] | None:
        """How the threads of a row reduction over rows of ``n`` elements share a row: None,
        a thread per row (the default), or (this thread's index among the row's threads, their
        count), as expressions (a GPU's warp or thread block); ``row_combine`` then joins
        their accumulators."""
        return None

    def row_combine(self, acc: str, combine, ctype: str) -> list[str]:
        """Statements leaving in ``acc`` (of C type ``ctype``) of every thread of a row
        (``row_split``) the combination of all their ``acc``; ``combine(a, b)`` is the
        expression of one step."""
        raise NotImplementedError

    def row_buffer(self, name: str, ctype: str, n: int) -> tuple[str, str | None, str] | None:
        """A reduction's row buffer ``name`` of a row of ``n`` elements, as (declaration,
        release or None, the expression of the row's element ``j``), or None when the
        target keeps none (later loops over the row then recompute the values). A thread
        of a shared row (``row_split``) touches only its own elements, so a target may hold
        only those. The default: a ``scratch`` array of the whole row."""
        declare, release = self.scratch(name, ctype, n)
        return declare, release, f"{name}[j]"

    def lanes(self, elem: str) -> int:
        """Independent accumulators per reduction row (the vector width of ``elem``)."""
        raise NotImplementedError

    def bind(self, in_types: list[str], out_types: list[str]) -> list[str]:
        """Statements at the top of a part binding ``in<k>`` / ``out<k>`` of those types."""
        raise NotImplementedError

    def kernel(self, part: list[str], tasks: int, min_chunk: int) -> str:
        """The kernel ``SYMBOL``: ``part`` (with its bindings) run over ``[0, tasks)`` in
        ranges of at least ``min_chunk``."""
        raise NotImplementedError

    def scratch(self, name: str, ctype: str, n: int) -> tuple[str, str | None]:
        """(declaration of a scratch array ``name`` of ``n`` elements, its release or None)
        inside a part."""
        raise NotImplementedError

    def gemm(self, elem: str, trans_a: int, trans_b: int, m: str, n: str, k: int, a: str,
             lda: int, b: str, ldb: int, c: str, ldc: int) -> str:
        """A statement computing the row-major ``c[m,n] = op(a)[m,k] op(b)[k,n]``."""
        raise NotImplementedError

    def loop_kernel(self, symbol: str) -> str:
        """The first line of a whole-loop kernel (while_loop.py): ``symbol``'s definition,
        through its ``{``, with its inputs as ``ins[k]`` and its outputs as ``outs[k]``."""
        raise NotImplementedError
