"""The backend hook of fusion: what the backend's code generator can turn into a kernel.

Fusion legality asks it (besides the fusion contract's own rules), so a fusion the backend
cannot generate is never formed: an op the generator cannot hold stays out of every fusion
(it runs on the backend's own kernel) while the ops around it still fuse, and a merge into a
kind the generator cannot emit is refused with the hook's reason, like any other refusal.

A backend passes its hook to the ``fusion`` pass (``FusionPass(codegen=...)``, set by the
backend's pipeline construction); without one every fusible op and kind is taken to be
generatable (``GENERATE_ALL``: what ``openhlo opt --passes=fusion`` and backends that run
fusions op by op use).
"""
from __future__ import annotations

from stablehlo.ir.core import Operation

from xla_core.fusion.kinds import FusionKind


class CodegenHook:
    """What a backend's generated kernels can hold; the base class refuses nothing."""

    def why_not_op(self, op: Operation) -> str | None:
        """None when a fusion's kernel can hold the fusible ``op``, else why not."""
        return None

    def why_not_kind(self, kind: FusionKind, summary) -> str | None:
        """None when the generator emits ``kind`` for a fusion with ``summary``
        (``legality.Summary``), else why not."""
        return None

    def cache_key(self) -> str:
        """Changes whenever the answers change (the compilation cache hashes it)."""
        return type(self).__qualname__


GENERATE_ALL = CodegenHook()
