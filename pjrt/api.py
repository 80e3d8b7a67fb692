"""The runtime contract, modelled on PJRT: Client, Device, Buffer, Event, executables.

Frameworks and tools talk only to these classes; a backend (see registry.py)
is a plugin whose factory creates a ``Client``. Python backends usually
subclass ``pjrt.host.HostClient``, which implements everything here but the
compiler; backends with their own buffers subclass ``Client`` and
``LoadedExecutable`` directly and implement the hooks ``Client._compile``,
``Client.buffer_from_numpy`` and ``LoadedExecutable._execute``. Either way the
compiler (``Client._compile_program``) is the backend's, usually mixed in:
``pjrt.plugins.compile_driver.CompileDriverMixin``.

Invariants every backend inherits from the base classes (so every backend
gives the same errors):

* ``Client.compile`` parses program text (``stablehlo.parse``) or verifies a
  given ``Module``, resolves the entry function, the replica and partition
  counts (options, else the module's ``mhlo.num_replicas`` and
  ``mhlo.num_partitions``) and the device assignment before ``_compile`` sees
  them; the compiler work between is the backend's (``Client._compile_program``:
  the contract does none; backends compile with xla_core's compile driver through
  ``pjrt.plugins.compile_driver.CompileDriverMixin``), and what the contract
  reports about the result (fingerprint, shardings, cost) it asks the backend's
  ``CompileResult``;
* ``execute`` and ``execute_sharded`` check every argument against the entry
  function's signature (count, shape, dtype; for buffers also client, device,
  deletion and donation) before ``_execute`` sees them; host values are
  transferred with ``buffer_from_numpy`` first; donated buffers are deleted
  once ``_execute`` has returned (the backend keeps what it needs);
* execution is asynchronous: ``_execute`` returns result buffers and a
  completion event per device at once; an execution failure is raised by the
  completion event and by every result's ``to_numpy``, ``block_until_ready``
  and ready event;
* the entry function is ``entry`` when given, else ``@main``, else the only
  function of the module (the StableHLO conformance convention).
"""
from __future__ import annotations

import abc
import dataclasses
import functools
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional, Protocol

import numpy as np

from stablehlo.errors import api_boundary
from stablehlo.ir.core import Module
from stablehlo.ir.types import TensorType, Type, numpy_dtype
from stablehlo.instrument import dump, trace

from pjrt import counters
from pjrt.global_arrays import assemble_global, global_shape, split_global

# Errors and argument checks live in their own modules; the contract re-exports them.
from pjrt.arguments import (  # noqa: F401
    _check_one, _shape_fits, _shape_text, check_arguments, count_option, entry_function,
    resolve_entry)
from pjrt.errors import (  # noqa: F401
    ArgumentError, BufferDeletedError, DeadlineExceededError, ErrorCode, ExecutionError,
    FailedPreconditionError, PjrtError, PluginError, UnimplementedError, error_code)


# ---------------------------------------------------------------------------
# Events

class Event(abc.ABC):
    """Completion and error status of asynchronous work."""

    @abc.abstractmethod
    def is_ready(self) -> bool:
        """Whether the work has finished (successfully or not)."""

    @abc.abstractmethod
    def wait(self, timeout: Optional[float] = None) -> None:
        """Block until ready; raise the work's error, or DeadlineExceededError."""

    @abc.abstractmethod
    def error(self) -> Optional[BaseException]:
        """The work's error, or None (also None while not ready); never blocks."""

    @abc.abstractmethod
    def on_ready(self, callback: Callable[[Optional[BaseException]], None]) -> None:
        """Call ``callback(error_or_None)`` once when ready (now if it is), from any thread."""


class HostEvent(Event):
    """An event set from Python with ``set(error=None)``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._error: Optional[BaseException] = None
        self._traceback = None
        self._callbacks: list = []

    def set(self, error: Optional[BaseException] = None) -> None:
        with self._lock:
            if self._done.is_set():
                raise FailedPreconditionError("event is already set")
            self._error = error
            # Kept apart because every raise of the same exception object
            # would otherwise grow its traceback.
            self._traceback = error.__traceback__ if error is not None else None
            callbacks, self._callbacks = self._callbacks, []
            self._done.set()
        for callback in callbacks:
            _call_back(callback, error)

    def is_ready(self) -> bool:
        return self._done.is_set()

    def wait(self, timeout: Optional[float] = None) -> None:
        if not self._done.wait(timeout):
            raise DeadlineExceededError(f"event not ready after {timeout:g} s")
        if self._error is not None:
            raise self._error.with_traceback(self._traceback)

    def error(self) -> Optional[BaseException]:
        return self._error if self._done.is_set() else None

    def on_ready(self, callback: Callable[[Optional[BaseException]], None]) -> None:
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(callback)
                return
        _call_back(callback, self._error)

    def __repr__(self) -> str:
        state = "pending" if not self.is_ready() else (
            "ok" if self._error is None else f"failed: {self._error}")
        return f"<HostEvent {state}>"


def _call_back(callback, error) -> None:
    try:
        callback(error)
    except Exception:  # noqa: BLE001 - the thread firing events has no caller to raise to
        traceback.print_exc()


def ready_event(error: Optional[BaseException] = None) -> HostEvent:
    """An event born ready (with ``error`` when given)."""
    event = HostEvent()
    event.set(error)
    return event


# ---------------------------------------------------------------------------
# Devices and memory

@dataclass(frozen=True)
class MemorySpace:
    """A memory that buffers live in; ``kind`` is "device", "pinned_host", ..."""
    id: int
    kind: str = "device"
    kind_id: int = 0
    device_ids: tuple = ()


@dataclass(frozen=True)
class Device:
    """One device of a client. ``id`` is unique within the client's platform."""
    id: int
    kind: str
    process_index: int = 0
    local_hardware_id: int = 0
    platform: str = ""
    memory_space: Optional[MemorySpace] = None

    @property
    def default_memory_space(self) -> MemorySpace:
        if self.memory_space is not None:
            return self.memory_space
        return MemorySpace(id=self.id, device_ids=(self.id,))

    def __str__(self) -> str:
        return f"{self.platform or self.kind}:{self.id}"


# ---------------------------------------------------------------------------
# Buffers

class Buffer(abc.ABC):
    """A value on one device, possibly still being computed.

    Backends may register native buffer classes as virtual subclasses
    (``Buffer.register(cls)``); those inherit none of the defaults below and
    must provide every member themselves. Host backends also carry StableHLO
    token and tuple values as buffers: their dtype is ``object``, their shape
    ``()``, and ``to_numpy`` returns the token or the tuple of arrays.
    """

    @property
    @abc.abstractmethod
    def dtype(self) -> np.dtype: ...

    @property
    @abc.abstractmethod
    def shape(self) -> tuple: ...

    @property
    @abc.abstractmethod
    def device(self) -> Device: ...

    @property
    @abc.abstractmethod
    def client(self) -> "Client": ...

    @property
    def memory_space(self) -> MemorySpace:
        return self.device.default_memory_space

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @abc.abstractmethod
    def ready_event(self) -> Event:
        """The event of the computation that defines this buffer."""

    def block_until_ready(self) -> "Buffer":
        """Wait for the value; raise the error of the execution that produced it."""
        self.ready_event().wait()
        return self

    @abc.abstractmethod
    def to_numpy(self) -> np.ndarray:
        """The value as a read-only host array (waits for it)."""

    @abc.abstractmethod
    def copy_to_device(self, device: Device) -> "Buffer":
        """A buffer with the same value on ``device`` of the same client."""

    @abc.abstractmethod
    def delete(self) -> None:
        """Free the value now; using the buffer afterwards raises BufferDeletedError."""

    @property
    @abc.abstractmethod
    def is_deleted(self) -> bool: ...

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = self.to_numpy()
        return np.array(array, dtype=dtype, copy=True) if copy else np.asarray(array, dtype)

    def __repr__(self) -> str:
        if self.is_deleted:  # its shape may never have been known
            return f"<{type(self).__name__} on {self.device}, deleted>"
        return f"<{type(self).__name__} {buffer_text(self)}>"


def buffer_text(buffer: Buffer) -> str:
    """``float32[2, 3] on cpu:0`` for messages."""
    return f"{np.dtype(buffer.dtype).name}{list(buffer.shape)} on {buffer.device}"


# ---------------------------------------------------------------------------
# Compilation

@dataclass
class CompileOptions:
    """PJRT's build options that we honour.

    ``device_assignment[replica][partition]`` is a device id; None means the
    client's ``default_device_assignment``. Replica and partition counts left
    at 1 are read from the module attributes ``mhlo.num_replicas`` and
    ``mhlo.num_partitions`` when present (JAX writes them).
    """
    num_replicas: int = 1
    num_partitions: int = 1
    device_assignment: Optional[list] = None
    entry: Optional[str] = None
    env_option_overrides: dict = field(default_factory=dict)


class CompileResult(Protocol):
    """What a backend's compiler made of a program, as the contract reads it: the facts the
    contract reports come from here, so the contract does no compiler work
    (``pjrt.plugins.compile_driver.DriverResult`` is the one xla_core's driver makes)."""

    module: Module
    """The program bound to devices (per-device when partitioned)."""
    optimized: Module
    """The program after the backend's pipeline."""
    payload: object
    """What the backend generated for its runtime."""

    def fingerprint(self) -> str:
        """sha256 (hex) of ``module``'s structure."""

    def entry_shardings(self, entry: str) -> tuple:
        """``(parameter tiles, result tiles)``: one ``stablehlo.ir.sharding.TileAssignment``
        per argument and result of ``@entry`` (replicated for single-device programs)."""

    def cost_analysis(self, module: Module, entry: str) -> dict:
        """``{"flops", "transcendentals", "bytes accessed", "optimal_seconds"}`` of one run
        of ``@entry`` of ``module`` (the program as the backend runs it)."""

    def memory_stats(self, module: Module, entry: str) -> dict:
        """XLA's ``CompiledMemoryStats`` fields but ``generated_code_size_in_bytes``, for
        ``@entry`` of ``module``."""


class Executable:
    """A compiled program not bound to devices: what runs, on how many replicas/partitions.

    ``options`` are the given options with ``entry``, ``num_replicas`` and
    ``num_partitions`` resolved. ``module`` is the program as compiled (the per-device
    program when partitioned); ``compiled`` is what the backend's compiler made of it (a
    ``CompileResult``: the backend's payload, the optimized module, the facts reported).
    """

    def __init__(self, module: Module, options: CompileOptions, compiled: CompileResult):
        self.module = module
        self.compiled = compiled
        self.given_options: CompileOptions = options  # before entry/replicas were resolved
        self.entry = resolve_entry(module, options.entry)
        func = module.lookup(self.entry)
        self.parameter_types: list[Type] = list(func.type.inputs)
        self.result_types: list[Type] = list(func.type.results)
        self.num_replicas = count_option(module, options.num_replicas, "num_replicas")
        self.num_partitions = count_option(module, options.num_partitions, "num_partitions")
        self.options = dataclasses.replace(options, entry=self.entry,
                                           num_replicas=self.num_replicas,
                                           num_partitions=self.num_partitions)

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 (hex) of the module's structure (no printing; ``CompileResult.fingerprint``);
        computed when first asked for."""
        return self.compiled.fingerprint()

    @property
    def name(self) -> str:
        return self.module.name or self.entry

    @property
    def num_outputs(self) -> int:
        return len(self.result_types)

    @functools.cached_property
    def shardings(self) -> tuple:
        """``(parameter tiles, output tiles)``: how each argument and result of the entry is a
        piece of a global value (``TileAssignment``s from ``CompileResult.entry_shardings``;
        replicated for single-device programs)."""
        return self.compiled.entry_shardings(self.entry)

    def __repr__(self) -> str:
        return (f"<Executable {self.name} @{self.entry}: {self.num_replicas} replica(s) x "
                f"{self.num_partitions} partition(s)>")


# ---------------------------------------------------------------------------
# Loaded executables

class LoadedExecutable(abc.ABC):
    """A compiled program bound to a client and its devices.

    Backends implement ``_execute``; argument checks, transfers and donation
    are done here.
    """

    def __init__(self, client: "Client", executable: Executable,
                 device_assignment: list):
        self.client = client
        self.executable = executable
        self.device_assignment: list[list[Device]] = [list(row) for row in device_assignment]
        self._deleted = False

    # The unbound executable's description, for convenience.
    @property
    def name(self) -> str:
        return self.executable.name

    @property
    def module(self) -> Module:
        return self.executable.module

    @property
    def entry(self) -> str:
        return self.executable.entry

    @property
    def optimized_module(self) -> Module:
        """The program as the backend runs it (pjrt/c_api/introspection.py reads it); backends
        with a compiler pipeline return its output."""
        return self.executable.module

    @property
    def generated_code_size(self) -> int:
        """Bytes of machine code generated for this program (0: none)."""
        return 0

    @property
    def parameter_types(self) -> list[Type]:
        return self.executable.parameter_types

    @property
    def result_types(self) -> list[Type]:
        return self.executable.result_types

    @property
    def num_replicas(self) -> int:
        return self.executable.num_replicas

    @property
    def num_partitions(self) -> int:
        return self.executable.num_partitions

    def addressable_devices(self) -> list[Device]:
        """The assigned devices of this process, replica-major."""
        return [d for row in self.device_assignment for d in row
                if d.process_index == self.client.process_index]

    @property
    def compile_cache_hit(self) -> bool:
        """Whether the backend loaded this program from its persistent compilation cache."""
        return False

    def delete(self) -> None:
        self._deleted = True

    @property
    def is_deleted(self) -> bool:
        return self._deleted

    @api_boundary
    def execute(self, args, *, device: Optional[Device] = None, donate=(),
                with_event: bool = False):
        """Run on one device (default: the assigned one); returns result Buffers at once.

        ``args`` are Buffers on that device or host values (numpy arrays,
        Python numbers and lists), which are transferred first. ``donate``
        holds argument indices whose buffers the execution may reuse; they are
        deleted by the call. With ``with_event=True`` returns ``(results,
        event)``, the event firing when the execution is over (with its error):
        the only way to see a failure of a program that has no results.
        """
        self._check_live()
        if self.num_replicas * self.num_partitions != 1:
            raise ArgumentError(
                f"{self.name} runs on {self.num_replicas} replica(s) x {self.num_partitions} "
                f"partition(s); use execute_sharded with one argument list per device")
        if device is None:
            device = self.device_assignment[0][0]
        elif device not in self.client.addressable_devices():
            raise ArgumentError(f"cannot run on {device}: not an addressable device of this "
                                f"client ({_device_list(self.client.addressable_devices())})")
        outputs, events = self._run([args], [device], donate)
        return (outputs[0], events[0]) if with_event else outputs[0]

    @api_boundary
    def execute_sharded(self, args_per_device, *, donate=(), with_events: bool = False,
                        launch_id: Optional[int] = None):
        """Run on every addressable assigned device; one argument list per device.

        Devices are in replica-major order (``addressable_devices()``); returns
        one list of result Buffers per device, and with ``with_events=True``
        also one completion Event per device. ``donate`` applies to every list.
        ``launch_id`` (multi-process clients): names this execution, the same in every
        process (PJRT's launch id); without it the processes key their executions by
        counting them.
        """
        self._check_live()
        args_per_device = list(args_per_device)
        devices = self.addressable_devices()
        if len(args_per_device) != len(devices):
            raise ArgumentError(f"{self.name} runs on {len(devices)} device(s) "
                                f"({_device_list(devices)}); execute_sharded got "
                                f"{len(args_per_device)} argument list(s)")
        outputs, events = self._run(args_per_device, devices, donate, launch_id)
        return (outputs, events) if with_events else outputs

    @api_boundary
    def __call__(self, *arrays) -> list:
        """Numpy convenience: run on one device, wait for the end (raising the
        execution's error), return the results as host values."""
        results, event = self.execute(arrays, with_event=True)
        event.wait()
        return [buffer.to_numpy() for buffer in results]

    @api_boundary
    def execute_global(self, *arrays) -> list:
        """Numpy convenience for a partitioned program (one replica): cut each global
        argument into the pieces its parameter sharding gives each device, run on every
        device, wait, and put each result's pieces back together by its output sharding."""
        self._check_live()
        if self.num_replicas != 1:
            raise ArgumentError(f"{self.name} runs on {self.num_replicas} replicas; "
                                f"execute_global takes partitioned programs only")
        params, results = self.executable.shardings
        if len(arrays) != len(params):
            raise ArgumentError(f"@{self.executable.entry} takes {len(params)} argument(s), "
                                f"got {len(arrays)}")
        for i, (array, tiles, local) in enumerate(zip(arrays, params,
                                                      self.executable.parameter_types)):
            expected = global_shape(local.shape, tiles)
            if np.shape(array) != expected:
                raise ArgumentError(f"argument {i} of @{self.executable.entry}: expected a "
                                    f"global array of shape {expected}, got one of shape "
                                    f"{np.shape(array)}")
        count = self.num_partitions
        pieces = [split_global(a, tiles, count) for a, tiles in zip(arrays, params)]
        # In a multi-process client this process runs its own partitions (every process
        # calls execute_global with the same arguments) and gets the others' results.
        mine = [self.device_assignment[0].index(d) for d in self.addressable_devices()]
        outputs, events = self.execute_sharded([[p[d] for p in pieces] for d in mine],
                                               with_events=True)
        for event in events:
            event.wait()
        by_partition = {d: [b.to_numpy() for b in out] for d, out in zip(mine, outputs)}
        if len(mine) < count:
            by_partition = self.client._gather_from_processes(by_partition)
        glued = []
        for k, (tiles, local) in enumerate(zip(results, self.executable.result_types)):
            glued.append(assemble_global([by_partition[d][k] for d in range(count)], tiles,
                                         local.shape))
        return glued

    @abc.abstractmethod
    def _execute(self, args_per_device: list, devices: list) -> tuple:
        """Backend hook: start instance k on ``devices[k]`` with ``args_per_device[k]``.

        Arguments are checked Buffers of this client on that device. Instance
        k is replica ``k // num_partitions``, partition ``k % num_partitions``
        for execute_sharded, and (0, 0) for execute. Returns, without waiting,
        ``(outputs, events)``: one list of result Buffers and one completion
        Event per instance. Backends of multi-process clients also take the keyword
        ``launch_id`` (execute_sharded's), passed only when the caller gave one.
        """

    # -- shared checks -------------------------------------------------------------
    def _check_live(self) -> None:
        if self._deleted:
            raise FailedPreconditionError(f"executable {self.name} was deleted")
        if self.client._closed:
            raise FailedPreconditionError(f"executable {self.name}: its "
                                          f"{self.client.platform_name} client was closed")

    def _run(self, args_per_device: list, devices: list, donate, launch_id=None) -> tuple:
        counters.COUNTS.executions += 1
        if trace.RECORDER is None:
            return self._launch(args_per_device, devices, donate, launch_id)
        with trace.span(f"execute {self.name}", "execute", devices=len(devices)):
            return self._launch(args_per_device, devices, donate, launch_id)

    def _launch(self, args_per_device: list, devices: list, donate, launch_id) -> tuple:
        donated = self._donated_indices(donate)
        multi = len(devices) > 1
        checked = [self._check_args(args, device, multi)
                   for args, device in zip(args_per_device, devices)]
        self._check_donation(checked, donated)
        buffers = [[a if isinstance(a, Buffer) else self.client.buffer_from_numpy(a, device)
                    for a in args] for args, device in zip(checked, devices)]
        outputs, events = (self._execute(buffers, devices) if launch_id is None else
                           self._execute(buffers, devices, launch_id=launch_id))
        for args in buffers:
            for i in donated:
                args[i].delete()
        return outputs, events

    def _donated_indices(self, donate) -> list:
        indices = sorted(set(donate))
        count = len(self.parameter_types)
        for i in indices:
            if not isinstance(i, int) or not 0 <= i < count:
                raise ArgumentError(f"cannot donate argument {i!r}: @{self.entry} takes "
                                    f"{count} argument(s)")
        return indices

    def _check_args(self, args, device: Device, multi: bool) -> list:
        args = list(args)
        types = self.parameter_types
        if len(args) != len(types):
            raise ArgumentError(f"@{self.entry} takes {len(types)} argument(s), got {len(args)}")
        suffix = f" (for {device})" if multi else ""
        checked = []
        for i, (type, value) in enumerate(zip(types, args)):
            what = f"argument {i} of @{self.entry}{suffix}"
            if isinstance(value, Buffer):
                checked.append(self._check_buffer(type, value, what, device))
            else:
                checked.append(_check_one(type, value, what))
        return checked

    def _check_buffer(self, type: Type, buffer: Buffer, what: str, device: Device) -> Buffer:
        if buffer.client is not self.client:
            raise ArgumentError(f"{what} is a buffer of another client ({buffer.client!r}); "
                                f"move it through the host with to_numpy()")
        if buffer.is_deleted:
            raise BufferDeletedError(f"{what} is a deleted or donated buffer "
                                     f"({buffer_text(buffer)})")
        if buffer.device != device:
            raise ArgumentError(f"{what} is on {buffer.device}, the executable runs on {device}")
        if isinstance(type, TensorType):
            dtype = numpy_dtype(type.element_type)
            if buffer.dtype != dtype:
                raise ArgumentError(f"{what}: expected {type} (dtype {dtype.name}), "
                                    f"got a buffer of dtype {np.dtype(buffer.dtype).name}")
            if not _shape_fits(type, tuple(buffer.shape)):
                raise ArgumentError(f"{what}: expected {type} (shape {_shape_text(type.shape)}),"
                                    f" got a buffer of shape {tuple(buffer.shape)}")
        elif buffer.dtype != np.dtype(object):
            raise ArgumentError(f"{what}: expected {type}, got a buffer of dtype "
                                f"{np.dtype(buffer.dtype).name}")
        return buffer

    def _check_donation(self, checked: list, donated: list) -> None:
        """A donated buffer must be passed once only (a buffer is on one device, so
        it can only appear in the argument list of that device)."""
        for args in checked:
            positions: dict = {}
            for i, value in enumerate(args):
                if isinstance(value, Buffer):
                    positions.setdefault(id(value), []).append(i)
            for i in donated:
                if isinstance(args[i], Buffer) and len(positions[id(args[i])]) > 1:
                    other = next(j for j in positions[id(args[i])] if j != i)
                    raise ArgumentError(
                        f"argument {i} of @{self.entry} is donated, but the same buffer is "
                        f"also passed as argument {other}; a donated buffer is passed once")

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.name} on "
                f"{_device_list(self.addressable_devices())}>")


def _device_list(devices) -> str:
    return ", ".join(str(d) for d in devices) or "none"


# ---------------------------------------------------------------------------
# Clients

class Client(abc.ABC):
    """One backend instance: identity, devices, buffers and the compiler entry point."""

    @property
    @abc.abstractmethod
    def platform_name(self) -> str:
        """Short name of the platform, e.g. ``"interpreter"``."""

    @property
    def platform_version(self) -> str:
        return "0"

    # Whether a process forked after this client was made can still make and use clients of
    # the same backend. Not so where the parent's device state does not survive a fork: a
    # CUDA driver initialized in the parent is unusable in the child. Tools that start
    # worker processes (the conformance pool) start them fresh where this is False.
    survives_fork: bool = True

    @property
    def process_index(self) -> int:
        return 0

    @abc.abstractmethod
    def devices(self) -> list[Device]:
        """Every device of this client."""

    def addressable_devices(self) -> list[Device]:
        """The devices this process can run on (all of them but in a multi-process client)."""
        return [d for d in self.devices() if d.process_index == self.process_index]

    def _gather_from_processes(self, local: dict) -> dict:
        """Multi-process clients: every process's ``{instance: [numpy results]}`` merged
        (execute_global); ``local`` is this process's share."""
        raise UnimplementedError(f"the {self.platform_name} client runs in one process")

    def own_device(self, device: Optional[Device]) -> Device:
        """``device`` checked to be an addressable device of this client (None: the first)."""
        devices = self.addressable_devices()
        if device is None:
            return devices[0]
        if not isinstance(device, Device) or device not in devices:
            raise ArgumentError(f"{device} is not a device of this {self.platform_name} client "
                                f"(devices: {_device_list(devices)})")
        return device

    def lookup_device(self, device_id: int) -> Device:
        for device in self.devices():
            if device.id == device_id:
                return device
        raise ArgumentError(f"no device with id {device_id!r} on this {self.platform_name} "
                            f"client; ids: {', '.join(str(d.id) for d in self.devices())}")

    def memory_spaces(self) -> list[MemorySpace]:
        spaces: dict = {}
        for device in self.addressable_devices():
            spaces.setdefault(device.default_memory_space.id, device.default_memory_space)
        return list(spaces.values())

    _closed = False

    def close(self) -> None:
        """Refuse further compiles, transfers and executions (FailedPreconditionError);
        idempotent. Buffers and executables already made stay readable until dropped.
        Also ``with make_client(...) as client:``."""
        self._closed = True

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise FailedPreconditionError(f"this {self.platform_name} client was closed")

    @api_boundary
    def compile(self, program, options: Optional[CompileOptions] = None, *,
                entry: Optional[str] = None) -> LoadedExecutable:
        """Compile a StableHLO ``Module`` or its text; ``entry=`` overrides options.entry.

        Parse and verification errors propagate as OpenHLOErrors naming the place.
        """
        self._check_open()
        if not isinstance(program, (str, Module)):
            raise ArgumentError(f"compile takes a stablehlo Module or its text, "
                                f"got {type(program).__name__}")
        options = options if options is not None else CompileOptions()
        if entry is not None:
            options = dataclasses.replace(options, entry=entry)
        # Every compile is counted, traced and (OPENHLO_DUMP_TO) dumped here, for all backends.
        start = time.perf_counter()
        with trace.span("compile", "compile", backend=self.platform_name) as traced, \
                dump.program(dump.program_name(program), program):
            loaded = self._compile_program(program, options)
            traced.set(program=loaded.name, cache_hit=loaded.compile_cache_hit)
        counters.count_compile(time.perf_counter() - start, loaded.compile_cache_hit)
        if isinstance(program, str):
            counters.count_program_text(self, program)
        return loaded

    def _compile_program(self, program, options: CompileOptions) -> LoadedExecutable:
        """Backend hook: compile ``program`` (text or a ``Module``) with ``options`` into an
        ``Executable`` whose ``compiled`` is a ``CompileResult``, then bind it with
        ``_compile`` to ``_device_assignment(executable, options)``. Backends mix in
        ``pjrt.plugins.compile_driver.CompileDriverMixin``, which does this with xla_core's
        compile driver and the backend's ``_compiler`` hooks."""
        raise UnimplementedError(f"the {self.platform_name} backend has no compiler: mix in "
                                 f"pjrt.plugins.compile_driver.CompileDriverMixin")

    @abc.abstractmethod
    def _compile(self, executable: Executable, device_assignment: list) -> LoadedExecutable:
        """Backend hook: bind ``executable`` (``executable.compiled.payload`` is what the
        backend's compiler generated) to ``device_assignment[replica][partition]``
        (Devices); raise UnimplementedError naming what the backend cannot do."""

    @abc.abstractmethod
    def buffer_from_numpy(self, array, device: Optional[Device] = None) -> Buffer:
        """Copy a host array to ``device`` (default: the first addressable device)."""

    def default_device_assignment(self, num_replicas: int, num_partitions: int) -> list:
        """Device ids ``[replica][partition]``, taken in order from the devices (every
        process's, in a multi-process client)."""
        for name, value in (("num_replicas", num_replicas), ("num_partitions", num_partitions)):
            if not isinstance(value, int) or value < 1:
                raise ArgumentError(f"{name} must be a positive integer, got {value!r}")
        devices = self.devices()
        needed = num_replicas * num_partitions
        if needed > len(devices):
            raise ArgumentError(
                f"{num_replicas} replica(s) x {num_partitions} partition(s) need {needed} "
                f"devices; this {self.platform_name} client has {len(devices)} "
                f"({_device_list(devices)})")
        return [[devices[r * num_partitions + p].id for p in range(num_partitions)]
                for r in range(num_replicas)]

    def _device_assignment(self, executable: Executable, options: CompileOptions) -> list:
        replicas, partitions = executable.num_replicas, executable.num_partitions
        ids = options.device_assignment
        if ids is None:
            ids = self.default_device_assignment(replicas, partitions)
        rows = [list(row) for row in ids]
        if len(rows) != replicas or any(len(row) != partitions for row in rows):
            raise ArgumentError(f"device_assignment must be {replicas} row(s) (replicas) of "
                                f"{partitions} device id(s) (partitions), got {ids}")
        flat = [i for row in rows for i in row]
        if len(set(flat)) != len(flat):
            raise ArgumentError(f"device_assignment names a device twice: {ids}")
        return [[self.lookup_device(i) for i in row] for row in rows]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} platform={self.platform_name!r}>"
