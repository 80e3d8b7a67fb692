"""Helpers of the runtime tests (test_runtime.py and test_runtime_device.py): executable
directories written by hand, loading them, and reading device buffers back."""
from __future__ import annotations

import json

import numpy as np

from pjrt.plugins.cuda import runtime


def write_executable(directory, doc: dict, kernels: dict | None = None, consts=None):
    """An executable directory: ``doc`` (format filled in), a fake cubin declaring
    ``kernels`` {name: argument count}, and ``consts`` {file name: bytes}."""
    doc = {"format": runtime.FORMAT, "target": "sm_90a", "cubin": "kernels.cubin", **doc}
    (directory / "executable.json").write_text(json.dumps(doc))
    if kernels:
        text = "".join(f"{name} {count}\n" for name, count in kernels.items())
        (directory / "kernels.cubin").write_bytes(text.encode() + b"\0")
    for name, data in (consts or {}).items():
        (directory / name).write_bytes(data)
    return directory


def load(device, directory, use_graph=False):
    return runtime.load_executable(device, runtime.read_description(directory),
                                   use_graph=use_graph)


def download(device, buffer, dtype, shape):
    out = np.empty(shape, dtype)
    device.download(buffer, out)
    return out
