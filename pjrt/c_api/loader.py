"""Python side of the PJRT C-API plugin: loads the shared library and serves its callbacks.

The library (``_openhlo_pjrt*.so``, built by setup.py) implements the PJRT C API; it calls
back here for what only Python can do: compile (program bytes -> one of our
LoadedExecutables, described to C by a *manifest*), execute (run it on raw host
pointers) and describe (an executable's optimized program, cost and memory statistics, asked
for by the framework's introspection calls; see pjrt/c_api/introspection.py). Frameworks
supply how to turn their program bytes into StableHLO text (``decode_program``); this module
never imports a framework.
"""
import atexit
import ctypes
import glob
import hashlib
import itertools
import os
import struct
import sys
import time
import traceback
from typing import Callable, Optional

import numpy as np

from stablehlo.instrument import trace
from stablehlo.ir.types import element_facts

from pjrt import counters
from pjrt.api import CompileOptions
from pjrt.c_api import introspection, kv_store
from pjrt.c_api.protos import (decode_compile_options, encode_device_assignment,
                               encode_op_sharding)
from pjrt.custom_kernels import register_ffi_handler
from pjrt.errors import ErrorCode, UnimplementedError, error_code

# The counters of pjrt/c_api/counters.h, in their order, as pjrt.metrics() fields.
_NATIVE_COUNTERS = ("executions", "transfers_to_device", "bytes_to_device", "transfers_to_host",
                    "bytes_to_host")

_COMPILE_FN = ctypes.CFUNCTYPE(
    ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p,
    ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_size_t,
    ctypes.c_int64)
_EXECUTE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                               ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p),
                               ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64)
_RELEASE_FN = ctypes.CFUNCTYPE(None, ctypes.c_int64)
_DESCRIBE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int)
_CONNECT_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                               ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                               ctypes.c_size_t, ctypes.c_void_p)
_REGISTER_FFI_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                    ctypes.c_void_p)

# Where a multi-process client's keys go in the framework's store (which prefixes its own,
# per plugin: jaxlib uses "<platform>:").
STORE_PREFIX = "openhlo_pjrt/"
# Where a multi-process client's collectives listen when PJRT_Client_Create names no hostname.
DEFAULT_HOSTNAME = "127.0.0.1"

# Seconds the exit hook waits for queued executions (a long computation at exit is not
# waited for without bound).
EXIT_DRAIN_S = 60.0
# After the drain: how long no execution may have been refused before the exit goes on, and
# the most it waits for that (a thread that catches the refusal and retries for ever).
EXIT_QUIET_S = 0.05
EXIT_REFUSALS_S = 2.0

# What ``_describe`` is asked for (objects.h ``DescribeWhat``).
_DESCRIBE_PROGRAM, _DESCRIBE_COST, _DESCRIBE_MEMORY = 0, 1, 2
# The order of objects.h ``Compiled::memory_stats``.
_MEMORY_STATS = ("generated_code_size_in_bytes", "argument_size_in_bytes", "output_size_in_bytes",
                 "alias_size_in_bytes", "temp_size_in_bytes")


def library_path() -> Optional[str]:
    """The built plugin library next to this file, or None when it was not built."""
    found = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "_openhlo_pjrt*.so")))
    return found[0] if found else None


def pjrt_type(element_type) -> int:
    """The PJRT_Buffer_Type code of ``element_type`` (section 3.5 of the design)."""
    code = element_facts(element_type).pjrt_buffer_type
    if code is None:
        raise UnimplementedError(f"the PJRT plugin cannot hold {element_type} arrays")
    return code


class _Spec:
    """One parameter or result: its dtype, shape, and how to view C memory as it."""
    __slots__ = ("element_type", "dtype", "shape", "nbytes", "raw")

    def __init__(self, type, numpy_dtype):
        if any(d is None for d in type.shape):
            raise UnimplementedError(f"the PJRT plugin needs static shapes, got {type}")
        self.element_type = type.element_type
        self.dtype = np.dtype(numpy_dtype(type.element_type))
        self.shape = tuple(type.shape)
        self.nbytes = self.dtype.itemsize * int(np.prod(type.shape, dtype=np.int64))
        self.raw = ctypes.c_char * self.nbytes  # made once: creating it costs per call

    def view(self, pointer: int) -> np.ndarray:
        """A numpy array over C memory, without copying."""
        if self.nbytes == 0:
            return np.empty(self.shape, self.dtype)
        return np.frombuffer(self.raw.from_address(pointer), self.dtype).reshape(self.shape)


class _Runner:
    """One compiled executable: what execute needs to wrap the C pointers."""

    def __init__(self, executable):
        from stablehlo.ir.types import numpy_dtype
        self.executable = executable
        self.params = [_Spec(t, numpy_dtype) for t in executable.parameter_types]
        self.results = [_Spec(t, numpy_dtype) for t in executable.result_types]
        self.num_devices = executable.num_replicas * executable.num_partitions
        # Backends that can run a single-device executable from C (the cpu backend's
        # ``c_entry``) get asked until they say yes or no for good (see fast_entry).
        self.fast_pending = hasattr(executable, "c_entry") and self.num_devices == 1

    def fast_entry(self):
        """``(run, release, context, free_result)`` for openhlo_offer_fast_path, or None for
        now: when
        kernels still compile in the background the question stays open for later calls."""
        exe = self.executable
        if not self.fast_pending or not exe.wait_optimized(0):
            return None
        self.fast_pending = False
        return exe.c_entry()

    def run(self, num_devices: int, inputs, outputs, launch_id: int = 0) -> None:
        """Run on ``num_devices`` argument lists at once: ``inputs[d * num_args + i]``,
        results into ``outputs[d * num_outputs + j]``; ``launch_id`` (0: none) keys a
        multi-process execution among the processes."""
        exe = self.executable
        num_args, num_outputs = len(self.params), len(self.results)
        if num_devices == 1 and self.num_devices == 1:
            arrays = [spec.view(inputs[i]) for i, spec in enumerate(self.params)]
            for j, (value, spec) in enumerate(zip(exe(*arrays), self.results)):
                np.copyto(spec.view(outputs[j]), value, casting="no")
            return
        per_device = [[spec.view(inputs[d * num_args + i]) for i, spec in enumerate(self.params)]
                      for d in range(num_devices)]
        results, events = exe.execute_sharded(per_device, with_events=True,
                                              launch_id=launch_id or None)
        for event in events:
            event.wait()
            if event.error() is not None:
                raise event.error()
        for d, buffers in enumerate(results):
            for j, (buffer, spec) in enumerate(zip(buffers, self.results)):
                np.copyto(spec.view(outputs[d * num_outputs + j]), buffer.to_numpy(),
                          casting="no")


def encode_manifest(name: str, fingerprint: str, executable) -> bytes:
    """What C learns at compile time (objects.cc ``DecodeManifest`` reads this order):
    int64s little-endian, byte strings length-prefixed."""
    def i64(v):
        return struct.pack("<q", v)

    def text(b):
        b = b.encode() if isinstance(b, str) else b
        return i64(len(b)) + b
    ids = [[d.id for d in row] for row in executable.device_assignment]
    parameter_tiles, output_tiles = executable.executable.shardings
    out = [text(name), text(fingerprint), i64(executable.num_replicas),
           i64(executable.num_partitions), i64(sum(len(r) for r in ids))]
    out += [i64(i) for row in ids for i in row]
    out += [text(encode_device_assignment(ids)), i64(len(executable.result_types))]
    for spec, tiles in zip(_Runner(executable).results, output_tiles):
        out += [i64(pjrt_type(spec.element_type)), i64(len(spec.shape))]
        out += [i64(d) for d in spec.shape]
        out += [text("device"), text(encode_op_sharding(tiles))]  # memory kind, OpSharding
    out.append(i64(len(parameter_tiles)))
    for tiles, param in zip(parameter_tiles, executable.parameter_types, strict=True):
        out += [text(encode_op_sharding(tiles)), i64(len(param.shape))]  # OpSharding, rank
    donors = donor_parameters(executable.executable)
    out += [i64(len(donors))] + [i64(i) for i in donors]
    return b"".join(out)


def encode_cost_analysis(properties: dict) -> bytes:
    """``{name: number}`` as objects.cc ``DecodeCostAnalysis`` reads it: a count, then each
    name (length-prefixed) and its value as a little-endian float64."""
    out = [struct.pack("<q", len(properties))]
    for name, value in properties.items():
        out += [struct.pack("<q", len(name.encode())), name.encode(), struct.pack("<d", value)]
    return b"".join(out)


def encode_memory_stats(stats: dict) -> bytes:
    """objects.cc ``DecodeMemoryStats``: the ``_MEMORY_STATS`` as little-endian int64s."""
    return b"".join(struct.pack("<q", stats[name]) for name in _MEMORY_STATS)


# Argument attributes by which a program lets the caller donate the argument (JAX writes the
# first when the donated buffer matches a result, the second otherwise).
_DONOR_ATTRIBUTES = ("tf.aliasing_output", "jax.buffer_donor")


def donor_parameters(executable) -> list:
    """The entry parameters the program accepts as donated (their buffers are consumed)."""
    func = executable.module.lookup(executable.entry)
    return [i for i in range(len(executable.parameter_types))
            if any(func.arg_attrs(i).get(name) is not None for name in _DONOR_ATTRIBUTES)]


class Bridge:
    """Serves the library's callbacks; one per process (see ``install``).

    ``decode_program(code: bytes, format: str) -> str`` gives StableHLO text;
    ``make_client(backend, num_devices, distributed=None)`` a pjrt Client (cached per pair;
    ``distributed``, a pjrt.distributed DistributedOptions, when the framework creates a
    multi-process client: then ``num_devices`` is this process's count).

    Executables the backend can run from C (no interpreter fallbacks, one device) are
    handed to the library's fast path and execute without entering Python;
    ``OPENHLO_PJRT_FAST_PATH=0`` (and tracing, ``OPENHLO_TRACE``) keeps every execution on
    the Python path.
    """

    def __init__(self, lib: ctypes.CDLL, decode_program: Callable[[bytes, str], str],
                 make_client: Callable[..., object]):
        self._lib = lib
        self._decode_program = decode_program
        self._make_client = make_client
        self._clients: dict = {}
        self._runners: dict = {}
        self._fingerprints: dict = {}  # PJRT fingerprint -> handle of a live executable
        self._ids = itertools.count(1)
        lib.openhlo_report.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p,
                                       ctypes.c_size_t]
        lib.openhlo_report.restype = None
        lib.openhlo_set_callbacks.argtypes = [_COMPILE_FN, _EXECUTE_FN, _RELEASE_FN,
                                              _DESCRIBE_FN, _CONNECT_FN, _REGISTER_FFI_FN]
        kv_store.declare(lib)
        lib.openhlo_set_callbacks.restype = None
        lib.openhlo_offer_fast_path.argtypes = [ctypes.c_void_p] * 5
        lib.openhlo_offer_fast_path.restype = None
        lib.openhlo_drain.argtypes = [ctypes.c_double]
        lib.openhlo_drain.restype = ctypes.c_int
        lib.openhlo_refused.argtypes = []
        lib.openhlo_refused.restype = ctypes.c_int64
        lib.openhlo_counters.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_int64]
        lib.openhlo_counters.restype = ctypes.c_int64
        lib.openhlo_reset_counters.argtypes = []
        lib.openhlo_reset_counters.restype = None
        counters.add_native_source(self.counters)
        # Under OPENHLO_TRACE every execution takes the Python path, where it is traced.
        self._fast = os.environ.get("OPENHLO_PJRT_FAST_PATH", "1") != "0" \
            and trace.recorder() is None
        # Kept referenced: C holds bare pointers to these trampolines.
        self._callbacks = (_COMPILE_FN(self._compile), _EXECUTE_FN(self._execute),
                           _RELEASE_FN(self._release), _DESCRIBE_FN(self._describe),
                           _CONNECT_FN(self._connect), _REGISTER_FFI_FN(self._register_ffi))
        lib.openhlo_set_callbacks(*self._callbacks)
        # jaxlib may destroy executables while the interpreter finalizes: detach first.
        atexit.register(self.detach)

    def detach(self) -> None:
        # No new executions from here on (a thread still dispatching gets an error instead
        # of refilling the queue); those queued get EXIT_DRAIN_S to finish: they run native
        # code that interpreter shutdown may tear down (pjrt/c_api/dispatch.h).
        if not self._lib.openhlo_drain(EXIT_DRAIN_S):
            sys.stderr.write(f"openhlo: executions still running {EXIT_DRAIN_S:g} s after "
                             f"exit began; exiting without waiting for them\n")
        self._let_refused_threads_end()
        self._lib.openhlo_set_callbacks(_COMPILE_FN(), _EXECUTE_FN(), _RELEASE_FN(),
                                        _DESCRIBE_FN(), _CONNECT_FN(), _REGISTER_FFI_FN())
        self._runners.clear()

    def _let_refused_threads_end(self) -> None:
        """Sleep (the GIL released) until no execution was refused for EXIT_QUIET_S, at most
        EXIT_REFUSALS_S: a thread that was still dispatching gets its error and ends in
        Python, instead of being stopped by interpreter finalization inside jaxlib's C++
        frames, which aborts the process (tools/jax_exit_soak.py, thread_dispatching)."""
        deadline = time.monotonic() + EXIT_REFUSALS_S
        seen = self._lib.openhlo_refused()
        while time.monotonic() < deadline:
            time.sleep(EXIT_QUIET_S)
            now = self._lib.openhlo_refused()
            if now == seen:
                return
            seen = now

    def counters(self, reset: bool = False) -> dict:
        """The library's counters (pjrt/c_api/counters.h) by pjrt.metrics() name; ``reset``
        zeroes them instead."""
        if reset:
            self._lib.openhlo_reset_counters()
            return {}
        values = (ctypes.c_int64 * len(_NATIVE_COUNTERS))()
        self._lib.openhlo_counters(values, len(values))
        return dict(zip(_NATIVE_COUNTERS, values))

    def _report(self, ctx, code: int, data: bytes) -> None:
        self._lib.openhlo_report(ctx, int(code), data, len(data))

    def _fail(self, ctx, exc: BaseException, where: str) -> None:
        """Report ``exc`` (any exception, KeyboardInterrupt and MemoryError included: none
        may unwind into C) as the callback's PJRT error."""
        try:
            code = error_code(exc)
            if code == ErrorCode.UNKNOWN:  # not one of ours: a bug, keep the traceback
                message = f"openhlo {where}: {''.join(traceback.format_exception(exc))}"
            else:
                message = f"openhlo {where}: {type(exc).__name__}: {exc}"
            data = message.encode(errors="replace")
        except BaseException:  # noqa: BLE001 - formatting failed (out of memory, a bad __str__)
            code, data = ErrorCode.INTERNAL, f"openhlo {where}: {type(exc).__name__}".encode()
        self._report(ctx, code, data)

    def _client(self, backend: str, num_devices: int):
        key = (backend, num_devices)
        if key not in self._clients:
            self._clients[key] = self._make_client(backend, num_devices)
        return self._clients[key]

    def _connect(self, ctx, backend, backend_size, num_devices, node_id, num_nodes, hostname,
                 hostname_size, store) -> None:
        """PJRT_Client_Create of a multi-process client (objects.h ``ConnectFn``): make the
        client of this process, joined to the others through the framework's store, and
        report every process's device count (int64s in process order)."""
        try:
            from pjrt.distributed.options import DistributedOptions
            from pjrt.distributed.store import PrefixStore
            name = ctypes.string_at(backend, backend_size).decode()
            host = ctypes.string_at(hostname, hostname_size).decode() if hostname_size \
                else DEFAULT_HOSTNAME
            options = DistributedOptions(
                process_index=node_id, num_processes=num_nodes, hostname=host,
                store=PrefixStore(kv_store.CallbackStore(self._lib, store), STORE_PREFIX))
            client = self._make_client(name, num_devices, options)
            self._clients[(name, num_devices)] = client  # what compiles of this client use
            counts = [0] * num_nodes
            for device in client.devices():
                counts[device.process_index] += 1
            self._report(ctx, ErrorCode.OK, struct.pack(f"<{num_nodes}q", *counts))
        except BaseException as exc:  # noqa: BLE001 - see _compile
            self._fail(ctx, exc, "connect")

    def _compile(self, ctx, backend, backend_size, code, code_size, fmt, fmt_size, options,
                 options_size, num_devices) -> int:
        try:
            program = ctypes.string_at(code, code_size)
            opts_bytes = ctypes.string_at(options, options_size) if options_size else b""
            text = self._decode_program(program, ctypes.string_at(fmt, fmt_size).decode())
            opts = decode_compile_options(opts_bytes)
            client = self._client(ctypes.string_at(backend, backend_size).decode(),
                                  num_devices)
            loaded = client.compile(text, CompileOptions(
                num_replicas=opts.num_replicas, num_partitions=opts.num_partitions,
                device_assignment=opts.device_assignment,
                env_option_overrides=opts.env_option_overrides))
            runner = _Runner(loaded)
            # Of what the executable depends on, not of the options' bytes: those hold
            # protobuf maps, serialized in a different order by each process, and the
            # processes of a multi-process job must agree on the fingerprint (the framework
            # derives the executions' launch ids from it).
            fingerprint = hashlib.sha256(program + repr(opts).encode()).hexdigest()
            manifest = encode_manifest(loaded.name, fingerprint, loaded)
            handle = next(self._ids)
            self._runners[handle] = runner
            self._fingerprints[fingerprint] = handle
            self._offer_fast_path(ctx, runner)
            self._report(ctx, ErrorCode.OK, manifest)
            return handle
        except BaseException as exc:  # noqa: BLE001 - every error must reach C as a status
            self._fail(ctx, exc, "compile")
            return 0

    def _execute(self, ctx, handle, num_devices, num_args, inputs, outputs, launch_id) -> None:
        try:
            runner = self._runners[handle]
            if num_args != len(runner.params):
                raise UnimplementedError(
                    f"{runner.executable.name} takes {len(runner.params)} argument(s), "
                    f"got {num_args}")
            runner.run(num_devices, inputs, outputs, launch_id)
            if runner.fast_pending:
                self._offer_fast_path(ctx, runner)
            self._report(ctx, ErrorCode.OK, b"")
        except BaseException as exc:  # noqa: BLE001 - see _compile
            self._fail(ctx, exc, "execute")

    def _offer_fast_path(self, ctx, runner: _Runner) -> None:
        """Inside a callback: lets C run this executable without Python from now on."""
        entry = runner.fast_entry() if self._fast else None
        if entry is not None:
            self._lib.openhlo_offer_fast_path(ctx, *entry)

    def _describe(self, ctx, handle, what) -> None:
        try:
            executable = self._runners[handle].executable
            if what == _DESCRIBE_PROGRAM:
                answer = introspection.optimized_text(executable).encode()
            elif what == _DESCRIBE_COST:
                answer = encode_cost_analysis(introspection.cost_analysis(executable))
            elif what == _DESCRIBE_MEMORY:
                answer = encode_memory_stats(introspection.compiled_memory_stats(executable))
            else:
                raise UnimplementedError(f"nothing to describe as {what}")
            self._report(ctx, ErrorCode.OK, answer)
        except BaseException as exc:  # noqa: BLE001 - see _compile
            self._fail(ctx, exc, "describe")

    def _register_ffi(self, ctx, name, name_size, handler) -> None:
        """PJRT_FFI_Register_Handler (ffi.cc): a typed XLA FFI handler at ``handler`` becomes
        custom kernel ``name``."""
        try:
            register_ffi_handler(ctypes.string_at(name, name_size).decode(), handler)
            self._report(ctx, ErrorCode.OK, b"")
        except BaseException as exc:  # noqa: BLE001 - see _compile
            self._fail(ctx, exc, "register FFI handler")

    def _release(self, handle) -> None:
        self._runners.pop(handle, None)
        for fingerprint in [f for f, h in self._fingerprints.items() if h == handle]:
            del self._fingerprints[fingerprint]

    def executable(self, fingerprint: str):
        """The live LoadedExecutable compiled under ``fingerprint`` (what
        PJRT_Executable_Fingerprint reported for it); KeyError when there is none."""
        return self._runners[self._fingerprints[fingerprint]].executable

    def wait_optimized(self, timeout: Optional[float] = None) -> bool:
        """Wait until every live executable's background-compiled kernels are in place;
        False when ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for runner in list(self._runners.values()):
            wait = getattr(runner.executable, "wait_optimized", None)
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            if wait is not None and not wait(left):
                return False
        return True


_BRIDGE: Optional[Bridge] = None


def install(decode_program: Callable[[bytes, str], str],
            make_client: Callable[..., object]) -> str:
    """Load the library, install the callbacks (once per process); returns its path.

    Raises FileNotFoundError when the library was not built.
    """
    global _BRIDGE
    path = library_path()
    if path is None:
        raise FileNotFoundError("pjrt/c_api/_openhlo_pjrt*.so is not built (pip install .)")
    if _BRIDGE is None:
        _BRIDGE = Bridge(ctypes.CDLL(path), decode_program, make_client)
    return path


def compiled_executable(fingerprint: str):
    """Our LoadedExecutable behind a framework's executable, by its PJRT fingerprint; raises
    ArgumentError when this process's plugin holds no live executable of that fingerprint."""
    from pjrt.errors import ArgumentError
    try:
        return _BRIDGE.executable(fingerprint)
    except (AttributeError, KeyError):
        raise ArgumentError(f"the PJRT plugin holds no live executable with fingerprint "
                            f"{fingerprint!r}") from None


def wait_optimized(timeout: Optional[float] = None) -> bool:
    """Wait until the generated kernels of every executable compiled through the plugin so
    far are in place (True at once when the plugin is not installed); False when ``timeout``
    seconds passed first. The call after that still runs in Python and hands the executable
    to the C fast path where it can take it; later calls run there."""
    return _BRIDGE is None or _BRIDGE.wait_optimized(timeout)
