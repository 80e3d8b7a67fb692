"""PJRT-style runtime: the client contract and the backend plugin registry.

    import pjrt
    client = pjrt.make_client("interpreter")
    exe = client.compile(text_or_module)
    outs = exe(x, y)                         # numpy in and out, synchronous
    bufs = exe.execute([client.buffer_from_numpy(x), y])   # Buffers, asynchronous
    bufs[0].to_numpy()

Python backends subclass ``pjrt.host.HostClient`` (see pjrt/README.md). ``metrics()`` is a
snapshot of this process's compile/execution/transfer counters; ``flush_trace()`` saves the
``OPENHLO_TRACE`` Chrome trace now and ``trace_span(name, category, **args)`` adds a
``with`` block to it (pjrt/README.md, Debugging and metrics).
"""
from stablehlo.instrument.trace import flush as flush_trace
from stablehlo.instrument.trace import span as trace_span

from pjrt.api import (ArgumentError, Buffer, BufferDeletedError, Client, CompileOptions,
                      DeadlineExceededError, Device, ErrorCode, Event, Executable,
                      ExecutionError, FailedPreconditionError, HostEvent, LoadedExecutable,
                      MemorySpace, PjrtError, PluginError, UnimplementedError, error_code,
                      ready_event, resolve_entry)
from pjrt.counters import Metrics, metrics, reset_metrics
from pjrt.registry import (BACKENDS, DEFAULT_BACKEND, available_backends, make_client,
                           register_plugin)

__all__ = [
    "Client", "Device", "MemorySpace", "Buffer", "Event", "HostEvent", "ready_event",
    "CompileOptions", "Executable", "LoadedExecutable",
    "ErrorCode", "error_code", "PjrtError", "ArgumentError", "BufferDeletedError",
    "DeadlineExceededError", "ExecutionError", "FailedPreconditionError", "PluginError",
    "UnimplementedError",
    "resolve_entry", "BACKENDS", "DEFAULT_BACKEND", "available_backends", "make_client",
    "register_plugin", "Metrics", "metrics", "reset_metrics", "flush_trace",
    "trace_span",
]
