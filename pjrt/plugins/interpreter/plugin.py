"""The interpreter backend: the reference that every other backend is compared with.

A ``HostClient`` that compiles through xla_core's compile driver with the default hooks
(``CompileDriverMixin``), so its program is the verified module itself (the per-device
program when sharded): each instance
evaluates the entry function with ``stablehlo.interpreter.evaluate``. There
is no compiler pipeline on purpose: the reference runs the program exactly as
written. Multi-device executions give each instance its ``Process`` (replica,
partition and the shared grid), so collectives work across devices.

Options (``make_client("interpreter", num_devices=4, probe_dir=...)``):

* ``num_devices``: how many devices the client has (default 1);
* ``probe_dir``: folder where ``interpreter.probe`` writes the tensors that
  ``check.expect_serialized_eq`` reads back.
"""
from __future__ import annotations

import os

from pjrt.host import HostClient
from pjrt.plugins.compile_driver import CompileDriverMixin

PLATFORM = "interpreter"


class InterpreterClient(CompileDriverMixin, HostClient):
    platform_name = PLATFORM
    device_kind = "numpy interpreter"

    def __init__(self, num_devices: int = 1,
                 probe_dir: str | os.PathLike | None = None):
        super().__init__(num_devices)
        self.probe_dir = os.fspath(probe_dir) if probe_dir is not None else None

    @property
    def platform_version(self) -> str:
        import stablehlo
        return getattr(stablehlo, "__version__", "0")

    def compile_program(self, module, entry, options) -> "InterpreterProgram":
        return InterpreterProgram(module, entry, self.probe_dir)


class InterpreterProgram:
    def __init__(self, module, entry: str, probe_dir: str | None):
        self.module = module
        self.entry = entry
        self.probe_dir = probe_dir

    def run(self, args: list, replica_id: int, partition_id: int, grid) -> list:
        from stablehlo.interpreter import evaluate
        from stablehlo.interpreter.collectives import Process
        process = Process(replica_id, partition_id, grid) if grid is not None else None
        return evaluate(self.module, args, self.entry, process=process,
                        probe_dir=self.probe_dir)


def create_client(**options) -> InterpreterClient:
    """The plugin factory named in pjrt.registry."""
    return InterpreterClient(**options)
