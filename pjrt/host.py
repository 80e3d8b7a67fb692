"""The host runtime: the generic client for backends that compute with numpy (or
call into native code from Python). A backend subclasses ``HostClient`` with a
compiler mixed in (``pjrt.plugins.compile_driver.CompileDriverMixin``: xla_core's
compile driver), sets ``platform_name`` and implements one method::

    class MyClient(CompileDriverMixin, HostClient):
        platform_name = "mine"

        def compile_program(self, module, entry, options):
            return MyProgram(...)   # has run(args, replica_id, partition_id, grid)

``program.run(args, replica_id, partition_id, grid)`` takes and returns lists
of numpy arrays (StableHLO tokens and tuples pass as the interpreter's values);
``grid`` is the ``stablehlo.interpreter.collectives.ProcessGrid`` shared by the
instances of one multi-device execution, None for single-device runs. A backend
with a compiler pipeline returns that program from the compile driver's
``generate`` hook instead (``CompileDriverMixin._compiler``; examples/backend_template).

Everything else comes from here:

* devices: ``num_devices`` of them (client option), each with its own memory
  space and its own worker thread, a daemon started on first use that runs
  the device's queued work in order; so ``execute`` returns at once, and the
  instances of one multi-device execution run concurrently, one per device.
  All instances of an execution are queued under one lock, so every device
  sees executions in the same order and collectives cannot deadlock;
* buffers: numpy arrays, copied in by ``buffer_from_numpy``, read-only once
  made (so results, copies and inputs may share memory safely), freed when
  unreferenced or deleted;
* failures: an instance that raises fails its completion event and every one
  of its results (an OpenHLOError as raised, e.g. a CheckFailure; anything
  else wrapped in ExecutionError) and aborts the grid so the other instances stop waiting in
  collectives. The program's results are checked against the entry
  function's result types.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
import weakref
from typing import Optional

import numpy as np

from stablehlo.errors import OpenHLOError, api_boundary
from stablehlo.ir.core import Module
from stablehlo.ir.types import TensorType, Type, numpy_dtype
from stablehlo.instrument import trace

from pjrt import counters
from pjrt.arguments import check_transfer
from pjrt.api import (ArgumentError, Buffer, BufferDeletedError, Client, CompileOptions,
                      Device, Event, Executable, ExecutionError, HostEvent, LoadedExecutable,
                      MemorySpace, UnimplementedError, _shape_fits, ready_event)

_OBJECT = np.dtype(object)


class HostClient(Client):
    """A client whose devices are worker threads and whose buffers are numpy arrays."""

    device_kind = "host"
    """``Device.kind`` of this client's devices."""

    def __init__(self, num_devices: int = 1):
        if not isinstance(num_devices, int) or isinstance(num_devices, bool) or num_devices < 1:
            raise ArgumentError(f"num_devices must be a positive integer, got {num_devices!r}")
        self._devices = [Device(id=i, kind=self.device_kind, local_hardware_id=i,
                                platform=self.platform_name,
                                memory_space=MemorySpace(id=i, device_ids=(i,)))
                         for i in range(num_devices)]
        self._workers = _Workers(num_devices, self.platform_name)
        # The threads hold only their queues; when the client goes, they stop.
        weakref.finalize(self, self._workers.stop)

    def compile_program(self, module, entry: str, options: CompileOptions):
        """Compile ``module`` (verified) into an object with ``run(args, replica_id,
        partition_id, grid) -> list of arrays``; raise UnimplementedError naming
        the first op this backend cannot run. ``options`` are fully resolved
        (entry, replica and partition counts, device assignment as ids).

        Not called for a backend whose compiler generates that object (the compile
        driver's ``generate`` hook: after the backend's pipeline); such a backend need
        not implement this."""
        raise UnimplementedError(f"the {self.platform_name} backend implements neither "
                                 f"compile_program nor a generate hook")

    def devices(self) -> list[Device]:
        return list(self._devices)

    def buffer_from_numpy(self, array, device: Optional[Device] = None) -> "HostBuffer":
        self._check_open()
        device = self.own_device(device)
        value = _host_value(check_transfer(np.asarray(array) if not _is_host_object(array)
                                           else array, f"buffer_from_numpy to {device}"))
        dtype, shape = _spec_of_value(value)
        counters.count_to_device(getattr(value, "nbytes", 0))
        return HostBuffer(self, device, _Storage(value, ready_event()), dtype, shape)

    def _compile(self, executable: Executable, device_assignment: list) -> "HostExecutable":
        compiled = executable.compiled
        if not isinstance(compiled.payload, Module):
            # The backend's generate hook made the program (the payload is the module
            # itself when it has none).
            return HostExecutable(self, executable, device_assignment, compiled.payload)
        options = dataclasses.replace(
            executable.options,
            device_assignment=[[d.id for d in row] for row in device_assignment])
        program = self.compile_program(executable.module, executable.entry, options)
        return HostExecutable(self, executable, device_assignment, program)


class _Storage:
    """A buffer's value and the event saying it is there.

    Executions hold storages, not buffers: deleting or donating a buffer that
    a queued execution still reads or writes is safe, the memory goes when the
    last holder drops it.
    """
    __slots__ = ("value", "event")

    def __init__(self, value=None, event: Optional[HostEvent] = None):
        self.value = value
        self.event = event if event is not None else HostEvent()

    def fill(self, value, error: Optional[BaseException]) -> None:
        self.value = None if error is not None else value
        self.event.set(error)


class HostBuffer(Buffer):
    """A numpy value on one device of a HostClient."""

    def __init__(self, client: HostClient, device: Device, storage: _Storage,
                 dtype: Optional[np.dtype], shape: Optional[tuple]):
        self._client = client
        self._device = device
        self._storage: Optional[_Storage] = storage
        # None while unknown: a result of dynamic type gets its shape when computed.
        self._dtype = dtype
        self._shape = shape

    @property
    def dtype(self) -> np.dtype:
        if self._dtype is None:
            self._dtype, self._shape = _spec_of_value(self.to_numpy())
        return self._dtype

    @property
    def shape(self) -> tuple:
        if self._shape is None:
            self._dtype, self._shape = _spec_of_value(self.to_numpy())
        return self._shape

    @property
    def device(self) -> Device:
        return self._device

    @property
    def client(self) -> HostClient:
        return self._client

    @property
    def nbytes(self) -> int:
        return 0 if self.dtype == _OBJECT else super().nbytes

    def ready_event(self) -> Event:
        return self._live_storage().event

    def to_numpy(self):
        storage = self._live_storage()
        storage.event.wait()
        counters.count_to_host(getattr(storage.value, "nbytes", 0))
        return storage.value

    def copy_to_device(self, device: Device) -> "HostBuffer":
        device = self._client.own_device(device)
        source = self._live_storage()
        target = _Storage()
        # Values are read-only, so the copy shares the array.
        source.event.on_ready(lambda error: target.fill(source.value, error))
        return HostBuffer(self._client, device, target, self._dtype, self._shape)

    def delete(self) -> None:
        self._storage = None

    @property
    def is_deleted(self) -> bool:
        return self._storage is None

    def _live_storage(self) -> _Storage:
        storage = self._storage
        if storage is None:
            what = f"{self._dtype.name}{list(self._shape)} " if self._shape is not None else ""
            raise BufferDeletedError(f"buffer {what}on {self._device} was deleted or donated")
        return storage


class HostExecutable(LoadedExecutable):
    """Runs ``program`` on the device threads of a HostClient."""

    client: HostClient

    def __init__(self, client: HostClient, executable: Executable, device_assignment: list,
                 program):
        super().__init__(client, executable, device_assignment)
        self.program = program
        self._result_specs = [_spec_of_type(t) for t in executable.result_types]

    @property
    def optimized_module(self) -> Module:
        """The program after the backend's pipeline (the module as compiled without one)."""
        return self.executable.compiled.optimized

    def _execute(self, args_per_device: list, devices: list) -> tuple:
        from stablehlo.interpreter.collectives import ProcessGrid
        grid = (ProcessGrid(self.num_replicas, self.num_partitions)
                if len(devices) > 1 else None)
        outputs, events, work = [], [], []
        for k, (args, device) in enumerate(zip(args_per_device, devices)):
            inputs = [buffer._live_storage() for buffer in args]
            results = [_Storage() for _ in self._result_specs]
            outputs.append([HostBuffer(self.client, device, storage, *spec)
                            for storage, spec in zip(results, self._result_specs)])
            events.append(HostEvent())
            replica, partition = divmod(k, self.num_partitions)
            work.append((device.id, _Instance(self, device, replica, partition, grid,
                                              inputs, results, events[-1])))
        self.client._workers.submit(work)
        return outputs, events

    @api_boundary
    def __call__(self, *arrays) -> list:
        """The synchronous numpy call runs the program on the calling thread: the
        device thread's hand-off costs more than a small program, and programs
        only read their (read-only) inputs, so running beside queued work is safe."""
        self._check_live()
        if self.num_replicas * self.num_partitions != 1:
            return super().__call__(*arrays)  # raises execute's error
        device = self.device_assignment[0][0]
        args = [value.to_numpy() if isinstance(value, Buffer) else _read_only(value)
                for value in self._check_args(arrays, device, False)]
        counters.COUNTS.executions += 1
        try:
            with trace.span(f"execute {self.name}", "execute", devices=1):
                return self._run_program(args, 0, 0, None)
        except OpenHLOError:
            raise
        except Exception as exc:
            raise _execution_error(exc, self.name, device) from exc

    def _run_program(self, args: list, replica: int, partition: int, grid) -> list:
        values = self.program.run(args, replica, partition, grid)
        return _check_results(values, self.result_types, self.entry)


def _execution_error(exc: BaseException, name: str, device: Device) -> BaseException:
    """What a failed execution reports: OpenHLOErrors (they name the op) as raised,
    anything else as an ExecutionError caused by it."""
    if isinstance(exc, OpenHLOError):
        return exc
    error = ExecutionError(f"{name} failed on {device}: {type(exc).__name__}: {exc}")
    error.__cause__ = exc
    return error


@dataclasses.dataclass
class _Instance:
    """One device's share of an execution, run on that device's thread."""
    executable: HostExecutable
    device: Device
    replica: int
    partition: int
    grid: object
    inputs: list
    results: list
    done: HostEvent

    def __call__(self) -> None:
        exe = self.executable
        try:
            args = []
            for storage in self.inputs:
                storage.event.wait()  # raises the error of the execution that made it
                args.append(storage.value)
            values = exe._run_program(args, self.replica, self.partition, self.grid)
        except BaseException as exc:  # noqa: BLE001 - delivered through the result events
            error = _execution_error(exc, exe.name, self.device)
            if self.grid is not None:
                self.grid.abort(f"replica {self.replica} partition {self.partition} "
                                f"on {self.device} failed: {error}")
            for storage in self.results:
                storage.fill(None, error)
            self.done.set(error)
            return
        for storage, value in zip(self.results, values):
            storage.fill(value, None)
        self.done.set()


class _Workers:
    """One daemon thread and queue per device; threads start on first use."""

    def __init__(self, count: int, platform: str):
        self._queues: list = [None] * count
        self._platform = platform
        self._lock = threading.Lock()

    def submit(self, work: list) -> None:
        """Queue every ``(device index, callable)`` at once: all devices see one order."""
        with self._lock:
            for index, item in work:
                self._queue(index).put(item)

    def _queue(self, index: int) -> queue.SimpleQueue:
        q = self._queues[index]
        if q is None:
            q = self._queues[index] = queue.SimpleQueue()
            threading.Thread(target=_work, args=(q,), daemon=True,
                             name=f"{self._platform}:{index}").start()
        return q

    def stop(self) -> None:
        with self._lock:
            for q in self._queues:
                if q is not None:
                    q.put(None)


def _work(q: queue.SimpleQueue) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        item()  # never raises: _Instance reports through its result events
        del item  # hold nothing while idle, so a finished execution frees its client


# ---------------------------------------------------------------------------
# Values

def _is_host_object(value) -> bool:
    """Tokens and tuples of values: host buffers hold them as they are."""
    from stablehlo.interpreter.values import Token
    return isinstance(value, (Token, tuple))


def _host_value(value):
    """A read-only private copy of a host value (array, token or tuple of them)."""
    from stablehlo.interpreter.values import Token
    if isinstance(value, Token):
        return value
    if isinstance(value, tuple):
        return tuple(_host_value(v) for v in value)
    array = np.array(value, copy=True)
    array.flags.writeable = False
    return array


def _read_only(value):
    """``value`` as read-only arrays; views, so a program's own arrays are untouched."""
    if isinstance(value, tuple):
        return tuple(_read_only(v) for v in value)
    if isinstance(value, np.ndarray):
        view = value.view()
        view.flags.writeable = False
        return view
    return value


def _spec_of_value(value) -> tuple:
    if isinstance(value, np.ndarray):
        return value.dtype, tuple(value.shape)
    return _OBJECT, ()


def _spec_of_type(type: Type) -> tuple:
    """(dtype, shape) of a result known before it is computed, or (None, None)."""
    if isinstance(type, TensorType):
        if not type.is_static:
            return None, None
        return numpy_dtype(type.element_type), tuple(type.shape)
    return _OBJECT, ()


def _check_results(values, types: list, entry: str) -> list:
    values = list(values)
    if len(values) != len(types):
        raise ExecutionError(f"the program returned {len(values)} value(s), "
                             f"@{entry} has {len(types)} result(s)")
    return [_check_result(v, t, f"result {i} of @{entry}")
            for i, (v, t) in enumerate(zip(values, types))]


def _check_result(value, type: Type, what: str):
    if not isinstance(type, TensorType):
        return _read_only(value)  # tokens and tuples: the interpreter checked them
    array = np.asarray(value)
    if array.dtype != numpy_dtype(type.element_type) or not _shape_fits(type, array.shape):
        raise ExecutionError(f"{what}: the program returned {array.dtype.name}"
                             f"{list(array.shape)}, expected {type}")
    return _read_only(array)
