"""The interpreter backend: the reference that every other backend is compared with.

``compile`` verifies the module and keeps it; ``execute`` evaluates the entry
function with ``stablehlo.interpreter.evaluate``. There is no compiler
pipeline on purpose: the reference runs the program exactly as written.

Options (``make_client("interpreter", probe_dir=...)``):

* ``probe_dir``: folder where ``interpreter.probe`` writes the tensors that
  ``check.expect_serialized_eq`` reads back.
"""
from __future__ import annotations

import os

from stablehlo.ir.core import Module

from pjrt.api import Client, Device, LoadedExecutable

PLATFORM = "interpreter"


class InterpreterClient(Client):
    def __init__(self, probe_dir: str | os.PathLike | None = None):
        self.probe_dir = os.fspath(probe_dir) if probe_dir is not None else None
        self._devices = [Device(id=0, kind="numpy interpreter")]

    @property
    def platform_name(self) -> str:
        return PLATFORM

    @property
    def platform_version(self) -> str:
        import stablehlo
        return getattr(stablehlo, "__version__", "0")

    def devices(self) -> list[Device]:
        return list(self._devices)

    def compile(self, module: Module, entry: str | None = None) -> "InterpreterExecutable":
        from stablehlo.verify import verify_module
        verify_module(module)
        return InterpreterExecutable(self, module, entry)


class InterpreterExecutable(LoadedExecutable):
    client: InterpreterClient

    def _execute(self, args: list) -> list:
        from stablehlo.interpreter import evaluate
        options = {}
        if self.client.probe_dir is not None:
            options["probe_dir"] = self.client.probe_dir
        return evaluate(self.module, args, entry=self.entry, **options)


def create_client(**options) -> InterpreterClient:
    """The plugin factory named in pjrt.registry."""
    return InterpreterClient(**options)
