"""The framework's key-value callbacks (PJRT_Client_Create's kv_get / kv_try_get / kv_put) as
a pjrt KeyValueStore: a dict-backed framework store written as ctypes callbacks, called
through the plugin library (key_value.cc) by CallbackStore (pjrt/c_api/kv_store.py)."""
import ctypes

import pytest

from pjrt.c_api import kv_store
from pjrt.c_api.loader import library_path
from pjrt.distributed.store import PrefixStore
from pjrt.errors import DeadlineExceededError, ErrorCode, UnavailableError

pytestmark = pytest.mark.skipif(library_path() is None,
                                reason="pjrt/c_api/_openhlo_pjrt*.so is not built")

_CALLBACK_ERROR = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                   ctypes.c_size_t)
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _GetArgs(ctypes.Structure):  # PJRT_KeyValueGetCallback_Args
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("key", ctypes.c_void_p), ("key_size", ctypes.c_size_t),
                ("timeout_in_ms", ctypes.c_int),
                ("callback_error", ctypes.POINTER(_CALLBACK_ERROR)),
                ("user_arg", ctypes.c_void_p), ("value", ctypes.c_void_p),
                ("value_size", ctypes.c_size_t), ("value_deleter_callback", _DELETER)]


class _TryGetArgs(ctypes.Structure):  # PJRT_KeyValueTryGetCallback_Args
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("key", ctypes.c_void_p), ("key_size", ctypes.c_size_t),
                ("callback_error", ctypes.POINTER(_CALLBACK_ERROR)),
                ("user_arg", ctypes.c_void_p), ("value", ctypes.c_void_p),
                ("value_size", ctypes.c_size_t), ("value_deleter_callback", _DELETER)]


class _PutArgs(ctypes.Structure):  # PJRT_KeyValuePutCallback_Args
    _fields_ = [("struct_size", ctypes.c_size_t), ("extension_start", ctypes.c_void_p),
                ("key", ctypes.c_void_p), ("key_size", ctypes.c_size_t),
                ("value", ctypes.c_void_p), ("value_size", ctypes.c_size_t),
                ("callback_error", ctypes.POINTER(_CALLBACK_ERROR)),
                ("user_arg", ctypes.c_void_p)]


class _Callbacks(ctypes.Structure):  # objects.h KeyValueCallbacks
    _fields_ = [("get", ctypes.c_void_p), ("get_arg", ctypes.c_void_p),
                ("try_get", ctypes.c_void_p), ("try_get_arg", ctypes.c_void_p),
                ("put", ctypes.c_void_p), ("put_arg", ctypes.c_void_p)]


_GET = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_GetArgs))
_TRY_GET = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_TryGetArgs))
_PUT = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.POINTER(_PutArgs))


class FrameworkStore:
    """What a framework does behind the callbacks: a dict, whose gets never wait (a missing
    key is DEADLINE_EXCEEDED, as a coordination service reports it after the timeout) and
    whose puts of an existing key fail with ALREADY_EXISTS, as JAX's do."""

    def __init__(self, with_try_get: bool = True):
        self.values: dict = {}
        self.timeouts_ms: list = []
        self.live_values: dict = {}  # handed out, not yet deleted by the plugin
        self._deleter = _DELETER(lambda address: self.live_values.pop(address))
        self._fns = (_GET(self._get), _TRY_GET(self._try_get), _PUT(self._put))
        self.callbacks = _Callbacks(
            get=ctypes.cast(self._fns[0], ctypes.c_void_p),
            try_get=ctypes.cast(self._fns[1], ctypes.c_void_p) if with_try_get else None,
            put=ctypes.cast(self._fns[2], ctypes.c_void_p))

    def handle(self) -> int:
        return ctypes.addressof(self.callbacks)

    def _answer(self, args, key: bytes, code: int):
        value = self.values.get(key)
        if value is None:
            message = f"{key.decode()} not found".encode()
            return args.callback_error[0](code, message, len(message))
        memory = ctypes.create_string_buffer(value, len(value))
        self.live_values[ctypes.addressof(memory)] = memory
        args.value, args.value_size = ctypes.addressof(memory), len(value)
        args.value_deleter_callback = self._deleter
        return None

    def _get(self, p):
        args = p.contents
        self.timeouts_ms.append(args.timeout_in_ms)
        return self._answer(args, ctypes.string_at(args.key, args.key_size),
                            ErrorCode.DEADLINE_EXCEEDED)

    def _try_get(self, p):
        args = p.contents
        return self._answer(args, ctypes.string_at(args.key, args.key_size),
                            ErrorCode.NOT_FOUND)

    def _put(self, p):
        args = p.contents
        key = ctypes.string_at(args.key, args.key_size)
        if key in self.values:
            message = b"key already exists"
            return args.callback_error[0](ErrorCode.ALREADY_EXISTS, message, len(message))
        self.values[key] = ctypes.string_at(args.value, args.value_size)
        return None


def _store(framework: FrameworkStore) -> kv_store.CallbackStore:
    """A CallbackStore over ``framework``'s callbacks. The caller keeps ``framework`` alive
    while it uses the store: the library holds only the callbacks' address."""
    lib = ctypes.CDLL(library_path())
    kv_store.declare(lib)
    return kv_store.CallbackStore(lib, framework.handle())


def test_set_then_get_and_try_get_round_trip_bytes():
    framework = FrameworkStore()
    store = _store(framework)
    value = b"\x00gloo address\xff" * 100
    store.set("cpu/gloo/[0, 1]/0", value)
    assert framework.values[b"cpu/gloo/[0, 1]/0"] == value
    assert store.get("cpu/gloo/[0, 1]/0", timeout_s=1.5) == value
    assert framework.timeouts_ms == [1500]
    assert store.try_get("cpu/gloo/[0, 1]/0") == value
    store.set("empty", b"")
    assert store.get("empty", timeout_s=1.0) == b""
    assert framework.live_values == {}  # the plugin deleted every value it was handed


def test_a_missing_key_is_none_for_try_get_and_a_deadline_for_get():
    framework = FrameworkStore()  # alive as long as the store is used
    store = _store(framework)
    assert store.try_get("local_topology/1") is None
    with pytest.raises(DeadlineExceededError, match=r"'local_topology/1' was not set within 2 s"):
        store.get("local_topology/1", timeout_s=2.0)


def test_without_a_try_get_callback_a_get_that_waits_0_ms_stands_in():
    framework = FrameworkStore(with_try_get=False)
    store = _store(framework)
    assert store.try_get("k") is None
    store.set("k", b"v")
    assert store.try_get("k") == b"v"
    assert framework.timeouts_ms == [0, 0]


def test_a_failing_put_is_unavailable_with_the_framework_message():
    framework = FrameworkStore()  # alive as long as the store is used
    store = _store(framework)
    store.set("once", b"1")
    with pytest.raises(UnavailableError, match="set 'once' failed .ALREADY_EXISTS.: key already"):
        store.set("once", b"2")


def test_prefix_store_over_the_callbacks_keeps_its_keys_apart():
    framework = FrameworkStore()
    prefixed = PrefixStore(_store(framework), "openhlo_pjrt/")
    prefixed.set("cpu/global_topology", b"[2, 2]")
    assert framework.values == {b"openhlo_pjrt/cpu/global_topology": b"[2, 2]"}
    assert prefixed.get("cpu/global_topology", 1.0) == b"[2, 2]"
