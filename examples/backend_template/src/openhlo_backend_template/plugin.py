"""The ``template`` backend: the least a backend writes to plug into OpenHLO.

Copy this package and change what the ``VENDOR:`` comments mark (README.md walks through it).
What the backend fills in:

* ``_compiler``: the compile driver's hooks (``xla_core.compile.Backend``), which
  ``CompileDriverMixin`` hands to xla_core's compile driver. The driver does the compiler
  work every backend shares (the whole-program checks, SPMD partitioning of multi-partition
  programs, the cache key), runs the backend's pipeline on a copy of the program and hands
  the result to the backend's ``generate``;
* ``generate``: the optimized program -> what the device runs. Here: a check that every op
  can run, so unsupported ops are refused at compile time naming the op and its place, and a
  ``Program`` that runs the entry function with the reference interpreter's numpy kernels.
  A real backend emits and compiles code for its device here.

Devices (option ``num_devices``, default 1), buffers, transfers, asynchronous and
multi-device execution, donation, argument checks and error reporting come from
``pjrt.host.HostClient``; a device with its own memory implements ``pjrt.api.Client``,
``Buffer`` and ``LoadedExecutable`` instead (see pjrt/plugins/cpu).
"""
from __future__ import annotations

from pjrt.api import UnimplementedError
from pjrt.host import HostClient
from pjrt.plugins.compile_driver import Backend, CompileDriverMixin

PLATFORM = "template"  # VENDOR: your backend's name (also the entry point's key)
PIPELINE = "cpu-opt"  # VENDOR: your pipeline, registered in xla_core.passes.PIPELINES
_STRUCTURAL = frozenset({"func.return", "stablehlo.return"})  # run by the enclosing op


class TemplateClient(CompileDriverMixin, HostClient):
    platform_name = PLATFORM
    platform_version = "0.1.0"  # VENDOR: bump it when what you generate changes
    device_kind = "template device"  # VENDOR: what Device.kind says

    def _compiler(self, options) -> Backend:
        # The identity is keyed into compilation caches: name every setting that changes
        # what generate makes.
        return Backend(identity=f"{PLATFORM} {self.platform_version}", pipeline=PIPELINE,
                       generate=generate)


def generate(module, request) -> "Program":
    """The optimized ``module`` -> the program for ``request.entry``; refuses what the
    device cannot run (``UnimplementedError`` naming the op and its place)."""
    from stablehlo.interpreter import KERNELS
    for op in module.lookup(request.entry).walk():
        # VENDOR: refuse every op (and type) your device cannot run.
        if op.name not in KERNELS and op.name not in _STRUCTURAL:
            raise UnimplementedError(f"{op.where()} is not supported by the {PLATFORM} "
                                     f"backend")
    return Program(module, request.entry)  # VENDOR: compile for your device


class Program:
    """What a device runs: ``run`` takes and returns lists of numpy arrays."""

    def __init__(self, module, entry: str):
        self.module = module
        self.entry = entry

    def run(self, args: list, replica_id: int, partition_id: int, grid) -> list:
        # VENDOR: run your compiled code. ``grid`` (None on one device) is what the
        # interpreter's collectives wait on; a device runtime brings its own.
        from stablehlo.interpreter import evaluate
        from stablehlo.interpreter.collectives import Process
        process = Process(replica_id, partition_id, grid) if grid is not None else None
        return evaluate(self.module, args, self.entry, process=process)


def create_client(**options) -> TemplateClient:
    """The factory named by the ``openhlo.backends`` entry point in pyproject.toml."""
    return TemplateClient(**options)
