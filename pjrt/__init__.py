"""PJRT-style runtime: the client contract and the backend plugin registry.

    import pjrt
    client = pjrt.make_client("interpreter")
    exe = client.compile(module)           # a stablehlo Module
    outs = exe.execute([x, y])             # host numpy arrays in and out
"""
from pjrt.api import (ArgumentError, Client, Device, LoadedExecutable, PjrtError,
                      PluginError, resolve_entry)
from pjrt.registry import (BACKENDS, DEFAULT_BACKEND, available_backends, make_client,
                           register_plugin)

__all__ = [
    "Client", "Device", "LoadedExecutable", "PjrtError", "ArgumentError", "PluginError",
    "resolve_entry", "BACKENDS", "DEFAULT_BACKEND", "available_backends", "make_client",
    "register_plugin",
]
