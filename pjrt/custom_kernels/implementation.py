"""Where a custom kernel's XLA FFI handler comes from: each resolves to a handler address.

* ``Source(code, symbol)``: C or C++ source text compiled by the cpu backend's toolchain
  (pjrt/plugins/cpu/codegen/build.py: the system compiler, the kernel cache) with
  pjrt/native/openhlo_ffi.h in front of it; ``symbol`` is an ``extern "C"`` handler.
* ``SharedLibrary(path, symbol)``: a handler exported by a library built elsewhere (for
  example against XLA's own FFI headers).
* ``Handler(address)``: a handler already in the process (from a PyCapsule, through the
  PJRT FFI extension).

Libraries stay loaded for the life of the process (handlers are called by address).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
from dataclasses import dataclass

from pjrt.errors import ArgumentError

_HEADER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "native",
                       "openhlo_ffi.h")


class KernelBuildError(ArgumentError):
    """A kernel's source did not compile, or its library or symbol cannot be loaded."""


def ffi_header() -> str:
    """The text of pjrt/native/openhlo_ffi.h (the ABI and helpers kernels are written to)."""
    with open(_HEADER) as f:
        return f.read()


@functools.lru_cache(maxsize=None)
def _load(path: str) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    except OSError as exc:
        raise KernelBuildError(f"cannot load custom-kernel library {path}: {exc}") from None


def _symbol_address(path: str, symbol: str) -> int:
    library = _load(path)
    try:
        function = getattr(library, symbol)
    except AttributeError:
        raise KernelBuildError(f"no symbol {symbol!r} in {path} (is it extern \"C\"?)") from None
    return ctypes.cast(function, ctypes.c_void_p).value


@dataclass(frozen=True)
class Handler:
    address: int

    def handler_address(self) -> int:
        return self.address

    def cache_key(self) -> str:
        return f"handler@{self.address:#x}"


@dataclass(frozen=True)
class SharedLibrary:
    path: str
    symbol: str

    def handler_address(self) -> int:
        return _symbol_address(os.path.abspath(self.path), self.symbol)

    def cache_key(self) -> str:
        stat = os.stat(self.path)
        return f"{os.path.abspath(self.path)}:{stat.st_size}:{stat.st_mtime_ns}:{self.symbol}"


@dataclass(frozen=True)
class Source:
    code: str
    symbol: str

    def library(self) -> str:
        """The compiled library (from the kernel cache when built before)."""
        from pjrt.plugins.cpu.codegen.build import compile_source, find_compiler
        if find_compiler() is None:
            raise KernelBuildError(f"custom kernel {self.symbol}: no C++ compiler (set CXX)")
        path = compile_source(ffi_header() + "\n#line 1 \"kernel source\"\n" + self.code)
        if path is None:
            raise KernelBuildError(f"custom kernel {self.symbol}: its source did not compile "
                                   "(the compiler's message is on the 'openhlo.cpu' log)")
        return path

    def handler_address(self) -> int:
        return _symbol_address(self.library(), self.symbol)

    def cache_key(self) -> str:
        return hashlib.sha256((ffi_header() + self.code + self.symbol).encode()).hexdigest()


Implementation = Handler | SharedLibrary | Source
