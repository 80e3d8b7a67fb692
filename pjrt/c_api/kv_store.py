"""The key-value store a framework hands the PJRT C-API plugin, as a pjrt KeyValueStore.

``PJRT_Client_Create`` receives the framework's store as C callbacks (blocking get, try-get,
put; jax.distributed's coordination service behind them). The library keeps them
(key_value.cc) and exports ``openhlo_kv_*``, which ``CallbackStore`` calls, so a
multi-process client (pjrt/distributed) meets the other processes through the framework's
own store. ctypes releases the GIL during each call: a blocking get holds no Python thread.
"""
from __future__ import annotations

import ctypes
from typing import Optional

from pjrt.distributed.store import KeyValueStore
from pjrt.errors import DeadlineExceededError, ErrorCode, UnavailableError


def declare(lib: ctypes.CDLL) -> None:
    """Set the ctypes signatures of the library's ``openhlo_kv_*`` exports."""
    out = [ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t)]
    lib.openhlo_kv_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.c_int64] + out
    lib.openhlo_kv_try_get.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t] + out
    lib.openhlo_kv_put.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t,
                                   ctypes.c_char_p, ctypes.c_size_t] + out
    for fn in (lib.openhlo_kv_get, lib.openhlo_kv_try_get, lib.openhlo_kv_put):
        fn.restype = ctypes.c_int
    lib.openhlo_kv_free.argtypes = [ctypes.c_void_p]
    lib.openhlo_kv_free.restype = None


class CallbackStore(KeyValueStore):
    """The framework's store behind ``handle`` (a KeyValueCallbacks of the library, valid
    for the life of the process)."""

    def __init__(self, lib: ctypes.CDLL, handle: int):
        self._lib = lib
        self._handle = ctypes.c_void_p(handle)

    def set(self, key: str, value: bytes) -> None:
        value = bytes(value)
        code, answer = self._call(self._lib.openhlo_kv_put, key, value, len(value))
        if code != ErrorCode.OK:
            raise UnavailableError(f"framework key-value store: set {key!r} failed "
                                   f"({ErrorCode(code).name}): {answer.decode(errors='replace')}")

    def get(self, key: str, timeout_s: float) -> bytes:
        code, answer = self._call(self._lib.openhlo_kv_get, key, int(timeout_s * 1000))
        if code in (ErrorCode.DEADLINE_EXCEEDED, ErrorCode.NOT_FOUND):
            raise DeadlineExceededError(f"framework key-value store: key {key!r} was not set "
                                        f"within {timeout_s:g} s "
                                        f"({answer.decode(errors='replace')})")
        if code != ErrorCode.OK:
            raise UnavailableError(f"framework key-value store: get {key!r} failed "
                                   f"({ErrorCode(code).name}): {answer.decode(errors='replace')}")
        return answer

    def try_get(self, key: str) -> Optional[bytes]:
        code, answer = self._call(self._lib.openhlo_kv_try_get, key)
        if code == ErrorCode.NOT_FOUND:
            return None
        if code != ErrorCode.OK:
            raise UnavailableError(f"framework key-value store: get {key!r} failed "
                                   f"({ErrorCode(code).name}): {answer.decode(errors='replace')}")
        return answer

    def _call(self, fn, key: str, *args) -> tuple[int, bytes]:
        """``fn(handle, key, *args, &out, &size)``: its code and the bytes it handed over."""
        encoded = key.encode()
        out, size = ctypes.c_void_p(), ctypes.c_size_t()
        code = fn(self._handle, encoded, len(encoded), *args, ctypes.byref(out),
                  ctypes.byref(size))
        try:
            return code, ctypes.string_at(out, size.value) if size.value else b""
        finally:
            self._lib.openhlo_kv_free(out)
