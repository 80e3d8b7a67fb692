"""The CUDA runtime's Python side: open the driver, load an executable directory.

The runtime itself is C++ (native/, the ``_cuda_runtime`` extension): the driver API and
cuBLAS are loaded with dlopen when a client is made, never at import, so importing OpenHLO
needs no CUDA. Where they are found: ``$OPENHLO_CUDA_DRIVER`` (default ``libcuda.so.1``)
and ``$OPENHLO_CUBLAS`` (default ``libcublas.so.13``, else the copy in an installed
``nvidia-cublas`` wheel). The tests point both at a fake (tests/fake_driver.cc).

An executable directory (what ``pjrt.plugins.cuda.aot.compile_module`` writes) holds
``executable.json`` and the cubin it names. ``load_executable_dir`` checks the description
completely before anything reaches the device (an error names the file and the field) and
turns buffer ids into dense indices. Format ``openhlo-cuda-executable/1``::

    {"format", "target", "cubin", "params": [{"shape", "dtype"}], "results": [buffer ids],
     "written_params"?: [argument indices],
     "buffers": [{"id", "bytes", "kind": param|temp|const, "param"?, "const"?,
                  "alias_param"?}],
     "steps": [{"op": "launch", "kernel", "grid", "block", "shared", "args"},
               {"op": "gemm", "dtype", "m", "n", "k", "batch", "trans_a", "trans_b",
                "a", "b", "c", "lda", "ldb", "ldc", "stride_a", "stride_b", "stride_c"},
               {"op": "copy", "src", "dst", "bytes"}]}

An operand is a buffer id or ``{"id", "offset"}`` (bytes). ``alias_param`` on a temp that
is a result: the compiler allows it to be written in argument ``alias_param``'s storage when
that argument is donated (the runtime does so only if no other buffer shares it). Optional
``"written_params": [i, ...]``: arguments whose buffers the steps write into (a donated
parameter's storage reused by the buffer assignment); the runtime runs such a program on a
copy of the argument unless it is donated and unshared.
"""
from __future__ import annotations

import contextlib
import dataclasses
import glob
import json
import os
import sys
from pathlib import Path

import numpy as np

from stablehlo.ir.types import numpy_dtype, parse_element_type_name

from pjrt.errors import ArgumentError, ExecutionError, UnavailableError

FORMAT = "openhlo-cuda-executable/1"
DRIVER_ENV = "OPENHLO_CUDA_DRIVER"
CUBLAS_ENV = "OPENHLO_CUBLAS"
DEFAULT_DRIVER = "libcuda.so.1"
DEFAULT_CUBLAS = "libcublas.so.13"

# cudaDataType of each gemm element type (library_types.h).
GEMM_DATA_TYPES = {"f32": 0, "f16": 2, "bf16": 14}
_GEMM_ITEMSIZE = {"f32": 4, "f16": 2, "bf16": 2}


class NoCudaDriverError(UnavailableError):
    """The CUDA driver library cannot be loaded (no GPU driver on this machine)."""


class CudaDriverError(ExecutionError):
    """A CUDA driver or cuBLAS call failed; the message names the call and the code."""


class ExecutableFormatError(ArgumentError):
    """An executable directory that does not describe a loadable program."""


def native():
    """The ``_cuda_runtime`` extension (imported on first use)."""
    try:
        from pjrt.plugins.cuda import _cuda_runtime
    except ImportError as exc:
        raise NoCudaDriverError(f"the CUDA runtime extension is not built ({exc}); run "
                                f"`pip install -e .` or `python setup.py build_ext "
                                f"--inplace`") from exc
    return _cuda_runtime


@contextlib.contextmanager
def driver_errors(where: str):
    """Native failures as the contract's errors, prefixed with ``where``."""
    ext = native()
    try:
        yield
    except ext.DriverNotFound as exc:
        raise NoCudaDriverError(f"{where}: {exc}") from None
    except ext.CudaError as exc:
        raise CudaDriverError(f"{where}: {exc}") from None


def driver_path() -> str:
    return os.environ.get(DRIVER_ENV) or DEFAULT_DRIVER


def cublas_path() -> str:
    """``$OPENHLO_CUBLAS``, else the first ``libcublas.so.13`` of an installed nvidia wheel
    (pip's CUDA wheels are not on the loader's path), else the bare name for the loader."""
    given = os.environ.get(CUBLAS_ENV)
    if given:
        return given
    for entry in sys.path:
        for pattern in ("nvidia/cu13/lib/" + DEFAULT_CUBLAS, "nvidia/cublas/lib/" + DEFAULT_CUBLAS):
            found = glob.glob(os.path.join(entry, pattern))
            if found:
                return found[0]
    return DEFAULT_CUBLAS


def open_driver():
    """The loaded, initialized driver; NoCudaDriverError says which library is missing."""
    path = driver_path()
    ext = native()
    try:
        return ext.open_driver(path)
    except ext.DriverNotFound as exc:
        # The message starts "no CUDA driver: <path> not found ..." (driver_api.cc).
        raise NoCudaDriverError(f"{exc}; install the NVIDIA driver or set {DRIVER_ENV} to "
                                f"the driver library's path") from None
    except ext.CudaError as exc:
        raise NoCudaDriverError(f"no usable CUDA device: {exc}") from None


# ---------------------------------------------------------------------------------------
# executable.json

@dataclasses.dataclass
class Description:
    """A checked executable description, ready for ``_cuda_runtime.load_executable``."""
    params: list            # (shape tuple, numpy dtype) per argument
    results: list           # dense buffer index per result
    written_params: list    # arguments whose buffers the steps write into
    buffers: list           # dicts: bytes, kind, param, alias_param, data
    steps: list             # dicts with dense operands
    kernels: list           # names, in order of first use
    cubin: bytes
    checks: str | None = None  # checks.mlir's text: run on the host on the last results


def read_description(directory) -> Description:
    """``directory``/executable.json checked and resolved; ExecutableFormatError names the
    file and the field that is wrong."""
    directory = Path(directory)
    path = directory / "executable.json"
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise ExecutableFormatError(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise ExecutableFormatError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: "
                                    f"{exc.msg}") from None
    return _Reader(path, directory).read(doc)


class _Reader:
    def __init__(self, path: Path, directory: Path):
        self.path = path
        self.directory = directory
        self.index: dict = {}   # buffer id -> dense index
        self.sizes: list = []

    def fail(self, where: str, message: str):
        raise ExecutableFormatError(f"{self.path}: {where}: {message}")

    def get(self, obj, key: str, where: str, kind=int, default=None):
        if not isinstance(obj, dict):
            self.fail(where, f"expected an object, got {obj!r}")
        if key not in obj:
            if default is not None:
                return default
            self.fail(where, f"missing {key!r}")
        value = obj[key]
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is int and ok and value < 0:
            ok = False
        if not ok:
            expected = "non-negative integer" if kind is int else kind.__name__
            self.fail(f"{where}.{key}", f"expected a {expected}, got {value!r}")
        return value

    def read(self, doc) -> Description:
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            self.fail("format", f"expected {FORMAT!r}, got "
                      f"{doc.get('format') if isinstance(doc, dict) else doc!r}")
        params = [self.param(p, f"params[{i}]")
                  for i, p in enumerate(self.get(doc, "params", "executable", list))]
        buffers = [self.buffer(b, f"buffers[{i}]", len(params))
                   for i, b in enumerate(self.get(doc, "buffers", "executable", list))]
        results = [self.ref(r, f"results[{i}]")[0]
                   for i, r in enumerate(self.get(doc, "results", "executable", list))]
        for p, (shape, dtype) in enumerate(params):
            for i, b in enumerate(buffers):
                if b["kind"] == "param" and b["param"] == p and \
                        b["bytes"] > _nbytes(shape, dtype):
                    self.fail(f"buffers[{i}]", f"reads {b['bytes']} bytes of argument {p}, "
                              f"which holds {_nbytes(shape, dtype)}")
        kernels: list = []
        steps = [self.step(s, f"steps[{i}]", kernels)
                 for i, s in enumerate(self.get(doc, "steps", "executable", list))]
        cubin = b""
        if kernels:
            name = self.get(doc, "cubin", "executable", str)
            try:
                cubin = (self.directory / name).read_bytes()
            except OSError as exc:
                self.fail("cubin", f"cannot read {name} ({exc.strerror})")
        written = self.get(doc, "written_params", "executable", list, default=[])
        for i, p in enumerate(written):
            if not isinstance(p, int) or isinstance(p, bool) or not 0 <= p < len(params):
                self.fail(f"written_params[{i}]", f"expected an argument index below "
                          f"{len(params)}, got {p!r}")
        checks = None
        if "checks" in doc:
            name = self.get(doc, "checks", "executable", str)
            try:
                checks = (self.directory / name).read_text()
            except OSError as exc:
                self.fail("checks", f"cannot read {name} ({exc.strerror})")
        return Description(params, results, written, buffers, steps, kernels, cubin, checks)

    def param(self, p, where: str) -> tuple:
        shape = self.get(p, "shape", where, list)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            self.fail(f"{where}.shape", f"expected non-negative integers, got {shape!r}")
        name = self.get(p, "dtype", where, str)
        try:
            dtype = numpy_dtype(parse_element_type_name(name))
        except Exception:
            self.fail(f"{where}.dtype", f"unknown element type {name!r}")
        return tuple(shape), dtype

    def buffer(self, b, where: str, num_params: int) -> dict:
        buffer_id = self.get(b, "id", where)
        if buffer_id in self.index:
            self.fail(f"{where}.id", f"buffer {buffer_id} is declared twice")
        size = self.get(b, "bytes", where)
        kind = self.get(b, "kind", where, str)
        entry = {"bytes": size, "kind": kind, "param": -1, "alias_param": -1, "data": b""}
        if kind == "param":
            entry["param"] = self.get(b, "param", where)
            if entry["param"] >= num_params:
                self.fail(f"{where}.param", f"argument {entry['param']} of {num_params}")
        elif kind == "const":
            name = self.get(b, "const", where, str)
            try:
                entry["data"] = (self.directory / name).read_bytes()
            except OSError as exc:
                self.fail(f"{where}.const", f"cannot read {name} ({exc.strerror})")
            if len(entry["data"]) != size:
                self.fail(f"{where}.const", f"{name} holds {len(entry['data'])} bytes, the "
                          f"buffer {size}")
        elif kind == "temp":
            if "alias_param" in b:
                entry["alias_param"] = self.get(b, "alias_param", where)
                if entry["alias_param"] >= num_params:
                    self.fail(f"{where}.alias_param",
                              f"argument {entry['alias_param']} of {num_params}")
        else:
            self.fail(f"{where}.kind", f"expected param, temp or const, got {kind!r}")
        self.index[buffer_id] = len(self.sizes)
        self.sizes.append(size)
        return entry

    def ref(self, operand, where: str, extent: int = 0) -> tuple:
        """(dense index, byte offset) of an operand that reads ``extent`` bytes."""
        if isinstance(operand, dict):
            buffer_id = self.get(operand, "id", where)
            offset = self.get(operand, "offset", where, int, default=0)
        else:
            buffer_id, offset = operand, 0
        if buffer_id not in self.index:
            self.fail(where, f"no buffer with id {buffer_id!r}")
        dense = self.index[buffer_id]
        if offset + extent > self.sizes[dense] or (extent == 0 and offset
                                                    and offset >= self.sizes[dense]):
            self.fail(where, f"bytes [{offset}, {offset + extent}) lie outside buffer "
                      f"{buffer_id} ({self.sizes[dense]} bytes)")
        return dense, offset

    def step(self, s, where: str, kernels: list) -> dict:
        op = self.get(s, "op", where, str)
        if op == "launch":
            kernel = self.get(s, "kernel", where, str)
            if kernel not in kernels:
                kernels.append(kernel)
            grid = self.dims(s, "grid", where)
            block = self.dims(s, "block", where)
            args = [self.ref(a, f"{where}.args[{i}]")
                    for i, a in enumerate(self.get(s, "args", where, list))]
            return {"op": op, "kernel": kernel, "grid": grid, "block": block,
                    "shared": self.get(s, "shared", where, int, default=0), "args": args}
        if op == "gemm":
            return self.gemm(s, where)
        if op == "copy":
            size = self.get(s, "bytes", where)
            return {"op": op, "src": self.ref(s.get("src"), f"{where}.src", size),
                    "dst": self.ref(s.get("dst"), f"{where}.dst", size), "bytes": size}
        self.fail(f"{where}.op", f"expected launch, gemm or copy, got {op!r}")

    def dims(self, s, key: str, where: str) -> list:
        value = self.get(s, key, where, list)
        if not 1 <= len(value) <= 3 or not all(
                isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in value):
            self.fail(f"{where}.{key}", f"expected 1 to 3 positive integers, got {value!r}")
        return list(value) + [1] * (3 - len(value))

    def gemm(self, s, where: str) -> dict:
        dtype = self.get(s, "dtype", where, str)
        if dtype not in GEMM_DATA_TYPES:
            self.fail(f"{where}.dtype", f"expected one of {sorted(GEMM_DATA_TYPES)}, got "
                      f"{dtype!r}")
        g = {key: self.get(s, key, where) for key in ("m", "n", "k", "lda", "ldb", "ldc")}
        g["batch"] = self.get(s, "batch", where, int, default=1)
        for key in ("stride_a", "stride_b", "stride_c"):
            g[key] = self.get(s, key, where, int, default=0)
        g["trans_a"] = bool(self.get(s, "trans_a", where, int, default=0))
        g["trans_b"] = bool(self.get(s, "trans_b", where, int, default=0))
        m, n, k = g["m"], g["n"], g["k"]
        # Row-major operands: (rows, columns) as stored, each row ld elements apart.
        shapes = {"a": (k, m) if g["trans_a"] else (m, k),
                  "b": (n, k) if g["trans_b"] else (k, n), "c": (m, n)}
        item = _GEMM_ITEMSIZE[dtype]
        for name, (rows, cols) in shapes.items():
            ld = g["ld" + name]
            if ld < cols:
                self.fail(f"{where}.ld{name}", f"{ld} is less than the {cols} columns of "
                          f"{name}")
            elements = (g["batch"] - 1) * g["stride_" + name] + (rows - 1) * ld + cols
            g[name] = self.ref(s.get(name), f"{where}.{name}",
                               elements * item if rows and cols else 0)
        return {"op": "gemm", "data_type": GEMM_DATA_TYPES[dtype], **g}


def _nbytes(shape: tuple, dtype: np.dtype) -> int:
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize


def load_executable(device, description: Description, *, use_graph: bool):
    """The native executable of ``description`` on ``device`` (a ``_cuda_runtime.Device``)."""
    with driver_errors("loading a CUDA executable"):
        return native().load_executable(
            device, description.cubin, description.kernels, description.buffers,
            description.steps, description.results, len(description.params),
            description.written_params, use_graph)
