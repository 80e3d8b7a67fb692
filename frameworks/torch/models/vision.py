"""Importing torchvision and timm for their model definitions, without their compiled ops.

The torchvision wheels the package registry serves for Linux are CUDA builds: their ``_C``
extension links ``libtorch_cuda.so``, which the CPU build of torch we pin does not ship. The
extension then fails to load (torchvision carries on without it), but torchvision's meta
registrations still attach kernels to ``torchvision::nms`` and ``torchvision::qnms``, whose
schemas only that extension defines, and ``import torchvision`` raises. timm imports
torchvision, and so does transformers when torchvision is installed (its model classes then
fail to load: ``transformers.GPT2LMHeadModel`` raises).

``allow_torchvision_import()`` defines those two schemas (with no kernel: detection's NMS
then raises if called; classification models never call it) when torchvision is installed
and its extension cannot load. It is the one place that works around this: code in this
repository imports torchvision, timm and transformers through ``import_torchvision``,
``import_timm`` and ``import_transformers``.
"""
from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

import torch

# The schemas torchvision's meta registrations need (torchvision 0.28). The Library must
# stay alive: dropping it unregisters them.
_SCHEMAS = ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
            "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
_stub_library: torch.library.Library | None = None


def _extension_loads(package_dir: Path) -> bool:
    """Whether torchvision's ``_C`` extension can be loaded into this process."""
    for library in package_dir.glob("_C*.so"):
        try:
            ctypes.CDLL(str(library))
        except OSError:
            return False
        return True
    return False


def allow_torchvision_import() -> None:
    """Make ``import torchvision`` work where its compiled ops cannot load (idempotent; a
    no-op where torchvision is not installed or its extension loads)."""
    global _stub_library
    if _stub_library is not None or "torchvision" in sys.modules:
        return
    spec = importlib.util.find_spec("torchvision")
    if spec is None or spec.origin is None:
        return
    if _extension_loads(Path(spec.origin).parent):
        return
    _stub_library = torch.library.Library("torchvision", "DEF")
    for schema in _SCHEMAS:
        _stub_library.define(schema)


def import_torchvision():
    """``torchvision``, imported for its model definitions (ImportError if not installed)."""
    allow_torchvision_import()
    import torchvision
    return torchvision


def import_timm():
    """``timm`` (ImportError if timm or torchvision is not installed)."""
    allow_torchvision_import()
    import timm
    return timm


def import_transformers():
    """``transformers`` (ImportError if not installed), offline (``HF_HUB_OFFLINE=1`` unless
    set), whether or not torchvision is installed beside it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    allow_torchvision_import()
    import transformers
    return transformers
