"""Shared helpers of the torch tests (test files never import each other)."""
import logging

import torch


def records(caplog, text: str) -> list:
    """Messages of the ``openhlo.torch`` log records containing ``text``."""
    return [r.getMessage() for r in caplog.records
            if r.name == "openhlo.torch" and text in r.getMessage()]


def fresh_compile(fn):
    """``torch.compile(fn, backend=openhlo_backend)`` after clearing Dynamo's caches."""
    from frameworks.torch.backend import openhlo_backend
    torch._dynamo.reset()
    logging.getLogger("openhlo.torch").setLevel(logging.INFO)
    return torch.compile(fn, backend=openhlo_backend)
