"""The cpu backend: the default, fast backend (see README.md next to this file).

``make_client("cpu", num_devices=N, probe_dir=None)``: N virtual devices, each a C++
worker thread that runs queued executions in order (so ``execute`` returns at once and the
instances of a multi-device execution run in parallel). Buffers are native arrays;
programs go through xla_core's compile driver (xla_core/compile, reached through
``pjrt.plugins.compile_driver.CompileDriverMixin``) with this backend's hooks
(``CpuClient._compiler``: the ``cpu`` pipeline of optimize.py, code generation and lowering
by compiler.py into native executables, the persistent cache of compile_cache.py). The
numpy convenience ``executable(*arrays)`` skips buffers altogether: it reads contiguous
arguments in place, runs on the calling thread, without the GIL, and costs a few
microseconds of dispatch.
"""
from __future__ import annotations

import functools
import os
import threading
import time
from typing import Optional

import numpy as np

from stablehlo.errors import OpenHLOError, debugging_openhlo, for_user
from stablehlo.limits import collective_timeout_s
from stablehlo.instrument import trace
from xla_core.passes import Pipeline

from pjrt import counters
from pjrt.api import (ArgumentError, Buffer, BufferDeletedError, Client, Device, Event,
                      Executable, ExecutionError, LoadedExecutable, MemorySpace,
                      UnimplementedError, check_arguments)
from pjrt.arguments import check_transfer
from pjrt.plugins.compile_driver import CompileDriverMixin
from pjrt.plugins.cpu import compile_cache, precision
from pjrt.plugins.cpu.compiler import CompiledProgram
from pjrt.plugins.cpu.lowering import (
    NotLowerable, as_stored, from_stored, host_dtype, native_type, stored_raw)
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.optimize import (cpu_pipeline, devices_per_host_of, fused_attention,
                                       memory_limit_of, pipeline_name, profile_of)
from pjrt.plugins.cpu.optimize import opt_level as opt_level_of
from pjrt.plugins.cpu.tiering import Upgrade, async_codegen

PLATFORM = "cpu"
_COUNTS = counters.COUNTS  # one global lookup on the numpy fast path (reset keeps the object)


def _translate(exc: BaseException) -> BaseException:
    """Native failures as the contract's errors; Python errors (CheckFailure...) as raised."""
    if isinstance(exc, native().ExecError):
        return ExecutionError(str(exc))
    if isinstance(exc, RuntimeError) and "buffer was deleted" in str(exc):
        return BufferDeletedError(str(exc))
    if isinstance(exc, MemoryError):  # numpy could not allocate an argument or a result
        return ExecutionError(f"out of host memory: {exc}")
    return exc


class CpuEvent(Event):
    """Completion of a native buffer (or of an execution, through its hidden token)."""

    def __init__(self, handle):
        self._handle = handle

    def is_ready(self) -> bool:
        return self._handle.is_ready()

    def wait(self, timeout: Optional[float] = None) -> None:
        from pjrt.api import DeadlineExceededError
        if not self._handle.wait(-1.0 if timeout is None else float(timeout)):
            raise DeadlineExceededError(f"not ready after {timeout} s")
        error = self.error()
        if error is not None:
            raise error

    def error(self) -> Optional[BaseException]:
        error = self._handle.error()
        if error is None:
            return None
        if isinstance(error, BaseException):
            return _translate(error)
        return ExecutionError(str(error))

    def on_ready(self, callback) -> None:
        self._handle.on_ready(lambda: callback(self.error()))


class CpuBuffer(Buffer):
    __slots__ = ("_handle", "_client", "_device", "_dtype", "_type")

    def __init__(self, client: "CpuClient", handle, dtype: np.dtype, type=None):
        self._handle = handle
        self._client = client
        self._device = client._local_devices[handle.device]
        self._dtype = dtype
        self._type = type  # the StableHLO type when its storage differs (raw-byte types)

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def shape(self) -> tuple:
        return self._handle.shape

    @property
    def device(self) -> Device:
        return self._device

    @property
    def client(self) -> "CpuClient":
        return self._client

    @property
    def nbytes(self) -> int:
        return self._handle.nbytes

    def ready_event(self) -> Event:
        if self._handle.is_deleted:  # the contract's error, as to_numpy raises it
            raise BufferDeletedError(f"buffer {self.dtype.name}{list(self.shape)} on "
                                     f"{self.device} was deleted")
        return CpuEvent(self._handle)

    def to_numpy(self) -> np.ndarray:
        if self._handle.is_deleted:
            raise BufferDeletedError(f"buffer {self.dtype.name}{list(self.shape)} on "
                                     f"{self.device} was deleted")
        try:
            array = self._handle.to_numpy()
        except Exception as exc:  # noqa: BLE001 - re-raised as the contract's error
            raise _translate(exc) from None
        if array is None:  # a token
            from stablehlo.interpreter.values import TOKEN
            return TOKEN
        array.flags.writeable = False
        counters.count_to_host(array.nbytes)
        return from_stored(array, self._type) if self._type is not None else array

    def copy_to_device(self, device: Device) -> "CpuBuffer":
        device = self._client.own_device(device)
        if self._handle.is_deleted:
            raise BufferDeletedError(f"cannot copy buffer {self.dtype.name}{list(self.shape)} "
                                     f"on {self.device} to {device}: it was deleted or donated")
        return CpuBuffer(self._client,
                         self._client._runtime.copy_buffer(self._handle,
                                                           device.local_hardware_id),
                         self._dtype, self._type)

    def delete(self) -> None:
        self._handle.delete()

    @property
    def is_deleted(self) -> bool:
        return self._handle.is_deleted


class CpuExecutable(LoadedExecutable):
    client: "CpuClient"

    def __init__(self, client, executable: Executable, device_assignment: list,
                 program: CompiledProgram):
        super().__init__(client, executable, device_assignment)
        self.program = program  # replaced once by tiering.Upgrade when kernels are ready
        self._upgrade = None
        self._memory = None  # memory_stats(), computed on demand
        self._lock = threading.Lock()
        # Tokens and tuples have no numpy dtype: their buffers say ``object``.
        self._result_dtypes = [host_dtype(t) if host_dtype(t) is not None else np.dtype(object)
                               for t in program.result_types]
        self._result_raw = [t if stored_raw(t) else None for t in program.result_types]

    @property
    def fallbacks(self) -> list:
        """Ops that run on the interpreter, with the reason (``Fallback`` records)."""
        return list(self.program.fallbacks)

    def wait_optimized(self, timeout: Optional[float] = None) -> bool:
        """Wait until the generated kernels compiling in the background are in place (at
        once when there are none); False when ``timeout`` seconds passed first."""
        return self._upgrade is None or self._upgrade.wait(timeout)

    def c_entry(self):
        """``(run, release, context, free_result)`` addresses of a C function that runs this
        executable on raw host pointers without Python, handing its results over without a
        copy (for the PJRT C-API plugin, pjrt/c_api/objects.h ``FastPath``), or None:
        programs with interpreter fallbacks, several devices, or kernels still compiling in
        the background (ask again once ``wait_optimized(0)``)."""
        program = self.program  # read once: an upgrade may swap it
        # Fallbacks need not be checked here: the native side refuses any program holding a
        # call back into Python.
        if self.num_replicas * self.num_partitions != 1 or program.native is None \
                or program.deferred:
            return None
        return program.native.c_entry()

    @property
    def compile_cache_hit(self) -> bool:
        return self.program.cache_hit

    @property
    def optimized_module(self):
        """The program as the backend runs it (after the compiler pipeline)."""
        return self.program.module

    @property
    def generated_code_size(self) -> int:
        """Bytes of the shared library of generated kernels (0 while it still compiles in the
        background, or when every op runs in the executor)."""
        fusions = self.program.fusion_library
        library = fusions.library if fusions is not None else None
        return os.path.getsize(library) if library and os.path.exists(library) else 0

    def memory_stats(self) -> dict:
        """Buffer assignment of the compiled entry function (computed on first call):
        ``peak_bytes`` (arguments + the packed heap of temporaries), ``intermediate_bytes``
        (all temporaries without reuse), ``argument_bytes``, ``output_bytes``,
        ``heap_bytes``; ``report`` is the human-readable form. ``peak_bytes_without_remat``:
        the peak before the compiler recomputed values to meet the ``memory_limit`` compile
        option (``peak_bytes`` when nothing was recomputed), and ``recomputed_ops``."""
        if self._memory is None:
            from xla_core.buffers import assign_buffers
            from xla_core.buffers.remat import remat_summary
            a = assign_buffers(self.program.func)
            summary = remat_summary(self.program.func)
            self._memory = {"peak_bytes": a.peak_bytes, "intermediate_bytes": a.intermediate_bytes,
                            "argument_bytes": a.argument_bytes, "output_bytes": a.output_bytes,
                            "heap_bytes": a.heap_bytes, "report": a.report(),
                            "peak_bytes_without_remat": summary.get("peak_before",
                                                                    a.peak_bytes),
                            "recomputed_ops": summary.get("recomputed", 0)}
        return dict(self._memory)

    def __call__(self, *arrays) -> list:
        # The hottest entry point: api_boundary's work is done by the except clause at the
        # end instead of a wrapper (a try costs nothing until it catches; a call does).
        recorder = trace.RECORDER  # None unless tracing: then the call is one event
        started = time.perf_counter_ns() if recorder is not None else 0
        try:
            self._check_live()
            if self.num_replicas * self.num_partitions != 1:
                return super().__call__(*arrays)
            _COUNTS.executions += 1
            program = self.program
            try:
                if program.native is not None:
                    return program.view_results(program.native.run(arrays,
                                                                   program.host_state()))
            except native().ArgumentMismatch:
                pass  # not exact numpy arrays: check and convert below, with clear errors
            except Exception as exc:  # noqa: BLE001
                raise _translate(exc) from None
            checked = check_arguments(program.parameter_types, list(arrays), self.entry)
            try:
                return program.run(checked)
            except Exception as exc:  # noqa: BLE001
                raise _translate(exc) from None
        except OpenHLOError as exc:
            if debugging_openhlo():
                raise
            raise for_user(exc) from None
        finally:
            if recorder is not None:
                recorder.add(f"execute {self.name}", "execute", started,
                             time.perf_counter_ns() - started, {"devices": 1})

    def _execute(self, args_per_device: list, devices: list, launch_id=None) -> tuple:
        program = self.program
        if program.native is None:
            raise UnimplementedError(
                f"@{self.entry} cannot run asynchronously on buffers: "
                f"{program.whole_program_fallback}; call the executable with numpy arrays")
        runtime = self.client._runtime
        count = self.num_replicas * self.num_partitions
        multi = count > 1
        # Instance k runs on the k-th device of the assignment (replica-major); a
        # multi-process client runs only those of this process.
        assigned = [d for row in self.device_assignment for d in row]
        instances = [assigned.index(d) for d in devices] if multi else [0]
        groups = self.client._process_groups
        if groups is not None:
            # An interpreter fallback that communicates meets its peers in the interpreter's
            # process grid, which does not reach other processes; local ones run anywhere.
            talking = [str(f) for f in program.fallbacks if f.communicates]
            if talking or program.whole_program_fallback:
                raise UnimplementedError(
                    f"@{self.entry} has collectives that run on the interpreter, which cannot "
                    f"run across processes: "
                    f"{talking or [program.whole_program_fallback]}")
        states = self._host_states(instances)
        outputs, events = [], []
        # Instances of one execution are queued together, so every device sees executions
        # in the same order and collectives between them cannot deadlock.
        with self.client._dispatch_lock:
            # The native collectives of this execution's instances meet in one rendezvous; an
            # instance that fails aborts it, so the others stop waiting
            # (native/collectives.h). Across processes it is keyed by the caller's launch id
            # when it gave one, else by the launch count, which every process advances in the
            # same order (each runs the same executions).
            rendezvous = None
            if multi and groups is not None:
                if launch_id is None:
                    self.client._launches += 1
                key = (f"launch {self.client._launches}" if launch_id is None
                       else f"launch id {launch_id}")
                rendezvous = native().Rendezvous(
                    count, self.client._timeout_s, groups,
                    [d.process_index for d in assigned], key)
            elif multi:
                rendezvous = native().Rendezvous(count, collective_timeout_s())
            replicas, partitions = (self.num_replicas, self.num_partitions) if multi else (1, 1)
            for i, (k, args, device) in enumerate(zip(instances, args_per_device, devices)):
                handles = runtime.execute(
                    program.native, device.local_hardware_id, [b._handle for b in args],
                    k // partitions, k % partitions, states[i], rendezvous, replicas,
                    partitions)
                *results, done = handles
                outputs.append([CpuBuffer(self.client, h, dtype, raw) for h, dtype, raw in
                                zip(results, self._result_dtypes, self._result_raw)])
                events.append(CpuEvent(done))
        return outputs, events

    def _host_states(self, instances: list) -> list:
        """The interpreter fallbacks' state of each of ``instances`` (replica-major indices
        of this execution's instances that run here)."""
        program = self.program
        multi = self.num_replicas * self.num_partitions > 1
        if not multi or (not program.fallbacks and program.whole_program_fallback is None):
            # Native collectives meet in the rendezvous; the Python process grid is only
            # for interpreter fallbacks (replica_id, partition_id and collectives in them).
            return [program.host_state()] * len(instances)
        from stablehlo.interpreter.collectives import Process, ProcessGrid
        grid = ProcessGrid(self.num_replicas, self.num_partitions)
        return [self.program.host_state(Process(k // self.num_partitions,
                                                k % self.num_partitions, grid))
                for k in instances]


class CpuClient(CompileDriverMixin, Client):
    """``num_devices`` virtual devices in this process; with ``distributed``
    (pjrt.distributed.options.DistributedOptions) one client over the devices of several
    processes: ``devices()`` lists all of them (ids dense in process order),
    ``addressable_devices()`` this process's, and collectives of groups that span processes
    go through gloo (README.md, Multi-process)."""

    def __init__(self, num_devices: int = 1, probe_dir=None, opt_level=None,
                 distributed=None):
        if not isinstance(num_devices, int) or isinstance(num_devices, bool) or num_devices < 1:
            raise ArgumentError(f"num_devices must be a positive integer, got {num_devices!r}")
        self.probe_dir = probe_dir
        opt_level_of(None, opt_level)  # a bad value fails here, not at the first compile
        self.opt_level = opt_level
        self._process_index = 0
        self._process_groups = None  # native ProcessGroups of a multi-process client
        self._launches = 0  # multi-device executions so far: the key of the next one
        counts = [num_devices]
        if distributed is not None:
            counts = self._join(distributed, num_devices)
        self._runtime = native().Runtime(num_devices)
        self._dispatch_lock = threading.Lock()
        self._devices = []
        for process, count in enumerate(counts):
            first = sum(counts[:process])
            self._devices += [Device(id=first + i, kind="cpu", process_index=process,
                                     local_hardware_id=i, platform=PLATFORM,
                                     memory_space=MemorySpace(id=first + i,
                                                              device_ids=(first + i,)))
                              for i in range(count)]
        # Native buffers name their device by its index in this process (local_hardware_id).
        self._local_devices = [d for d in self._devices
                               if d.process_index == self._process_index]

    def _join(self, distributed, num_devices: int) -> list[int]:
        """Meet the other processes: the topology (every process's device count) and the
        native process groups that carry collectives between them."""
        from pjrt.distributed.options import DistributedOptions, exchange_topology
        from pjrt.distributed.store import PrefixStore
        from stablehlo.limits import DEFAULT_CROSS_PROCESS_TIMEOUT_S
        if not isinstance(distributed, DistributedOptions):
            raise ArgumentError(f"distributed must be a pjrt.distributed.options."
                                f"DistributedOptions, got {type(distributed).__name__}")
        if not native().HAVE_GLOO:
            raise UnimplementedError(
                "a multi-process cpu client needs gloo: install Debian's libgloo-dev "
                "(apt-get install libgloo-dev) and reinstall OpenHLO (pip install -e .)")
        self._process_index = distributed.process_index
        self._timeout_s = distributed.timeout_s or collective_timeout_s(
            DEFAULT_CROSS_PROCESS_TIMEOUT_S)
        counts = exchange_topology(distributed, PLATFORM, num_devices, self._timeout_s)
        self._process_groups = native().ProcessGroups(
            distributed.process_index, distributed.num_processes,
            PrefixStore(distributed.store, f"{PLATFORM}/"), distributed.hostname,
            self._timeout_s)
        return counts

    @property
    def platform_name(self) -> str:
        return PLATFORM

    @property
    def process_index(self) -> int:
        return self._process_index

    def _gather_from_processes(self, local: dict) -> dict:
        """Every process's ``{instance: [numpy results]}`` merged, in every process (for
        execute_global): the arrays travel through the native process groups, each as its
        dtype name, shape and bytes."""
        import json
        arrays = [(k, a) for k, results in sorted(local.items()) for a in results]
        header = json.dumps([[k, a.dtype.name, list(a.shape)] for k, a in arrays]).encode()
        payload = b"".join([len(header).to_bytes(8, "little"), header] +
                           [np.ascontiguousarray(a).tobytes() for _, a in arrays])
        self._launches += 1
        merged: dict = {}
        everyone = list(range(self._process_groups.num_processes))
        for data in self._process_groups.allgather(everyone, f"gather {self._launches}",
                                                   payload):
            size = int.from_bytes(data[:8], "little")
            at = 8 + size
            for k, dtype, shape in json.loads(data[8:at]):
                array = np.frombuffer(data, np.dtype(dtype), int(np.prod(shape)), at)
                merged.setdefault(k, []).append(array.reshape(shape))
                at += array.nbytes
        return merged

    @property
    def platform_version(self) -> str:
        return "openhlo-cpu 0.1"

    def devices(self) -> list[Device]:
        return list(self._devices)

    def _compiler(self, options):
        """The compile driver's hooks: the pipeline of the optimization level (with the
        scheduler's profile, if the options give one), lowering by
        compiler.py (generated kernels compiled in the background when tiering asks for it)
        and, above level 0, the persistent compilation cache."""
        from xla_core.compile import Backend
        level = opt_level_of(options, self.opt_level)
        memory_limit = memory_limit_of(options)
        # Under a memory limit the program never runs before its generated kernels exist:
        # the first tier runs each fusion op by op, holding its inner values, which the
        # limit does not count (the transformer step of tools/bench_remat under 13.4 MB
        # held 28.9 MB there).
        compile_now = not async_codegen(options) or memory_limit > 0
        cached = compile_cache.enabled() and level > 0
        pipeline = pipeline_name(level, options)
        profile = profile_of(options) if pipeline == "cpu" else None
        digest = profile[1] if profile else None
        devices = devices_per_host_of(options)
        # without the option, the devices here come from the request and this client's
        # devices (which of them are this process's): keyed through the identity
        host = f"devices_per_host={devices}" if devices else \
            f"devices={len(self.devices())} here={[d.id for d in self.addressable_devices()]}"
        fused = fused_attention(options)
        host += "" if fused else " unfused-attention"
        # autocast to bf16 applies where the bf16 GEMM runs on AMX or AVX-512 BF16
        low_precision = frozenset({"bf16"}) if precision.runs_fast("bf16") else frozenset()
        host += f" low_precision={sorted(low_precision)}"
        return Backend(
            identity=(compile_cache.identity(level, pipeline, digest, host) if cached
                      else f"{PLATFORM} {level} {pipeline} {digest} {host}"),
            pipeline=None if pipeline is None else functools.partial(
                self._pipeline, pipeline == "cpu", profile[0] if profile else "", devices,
                fused, memory_limit),
            generate=lambda module, request: self._lower(
                module, request.entry, request.num_replicas, request.num_partitions,
                compile_now),
            load_cached=self._load_cached if cached else None,
            low_precision=low_precision)

    def _pipeline(self, latency_hiding: bool, profile: str, devices: int | None,
                  fused: bool, memory_limit: int, request) -> Pipeline:
        """The cpu pipeline for ``request``, its host shared by ``devices`` devices, or by
        the executable's devices in this process (``devices_here``), its peak kept under
        ``memory_limit`` bytes (0: no limit)."""
        return cpu_pipeline(latency_hiding, profile, devices or self.devices_here(request),
                            fused, memory_limit)

    def devices_here(self, request) -> int:
        """How many devices of this process run the executable ``request`` compiles at once:
        those of its device assignment (the options', else the default one) that are
        addressable here."""
        ids = request.options.device_assignment or self.default_device_assignment(
            request.num_replicas, request.num_partitions)
        here = {d.id for d in self.addressable_devices()}
        return max(1, sum(i in here for row in ids for i in row))

    def _lower(self, module, entry: str, num_replicas: int, num_partitions: int,
               compile_now: bool, fusions=None) -> CompiledProgram:
        from pjrt.api import entry_function
        return CompiledProgram(module, entry_function(module, entry), self.probe_dir,
                               num_replicas, num_partitions, fusions=fusions,
                               compile_now=compile_now)

    @staticmethod
    def _load_cached(key: str) -> Optional[tuple]:
        """``(module as compiled, its CachedProgram record)`` from the persistent cache, or
        None; ``_compile`` lowers the record (the pipeline and the code generator are
        skipped)."""
        cached = compile_cache.load(key)
        return None if cached is None else (cached.source_module, cached)

    def _compile(self, executable: Executable, device_assignment: list) -> CpuExecutable:
        compiled = executable.compiled
        if compiled.cache_hit:
            record = compiled.payload
            program = self._lower(record.module, executable.entry, executable.num_replicas,
                                  executable.num_partitions, True, record.fusions)
            program.cache_hit = True
            program.pass_seconds = record.pass_seconds
            return CpuExecutable(self, executable, device_assignment, program)
        program = compiled.payload
        program.pass_seconds = compiled.pass_seconds
        loaded = CpuExecutable(self, executable, device_assignment, program)

        def remember(program: CompiledProgram) -> None:
            # Programs with interpreter fallbacks are cheap to lower and hold Python
            # callbacks: only fully native programs are worth a cache entry.
            if compiled.cache_key is not None and compiled.pipeline_failure is None \
                    and not program.fallbacks and not program.deferred:
                compile_cache.store(compiled.cache_key, compile_cache.CachedProgram(
                    compiled.module, compiled.optimized, program.fusion_library,
                    compiled.pass_seconds))

        if program.deferred:
            def lower_fully() -> CompiledProgram:
                # The first lowering's kernel sources, compiled now: nothing is generated
                # twice.
                full = self._lower(compiled.optimized, executable.entry, executable.num_replicas,
                                   executable.num_partitions, True,
                                   program.fusion_library.compiled())
                full.pass_seconds = compiled.pass_seconds
                return full

            def install(full: CompiledProgram) -> None:
                loaded.program = full  # one reference swap: calls read it once
                remember(full)
            loaded._upgrade = Upgrade(lower_fully, install)
        else:
            remember(program)
        return loaded

    def buffer_from_numpy(self, array, device: Optional[Device] = None) -> CpuBuffer:
        self._check_open()
        device = self.own_device(device)
        array = check_transfer(np.asarray(array), f"buffer_from_numpy to {device}")
        from stablehlo.ir.types import element_type_for_dtype
        from stablehlo.ir.types import TensorType
        try:
            type = TensorType(array.shape, element_type_for_dtype(array.dtype))
            spec = native_type(type)
        except (TypeError, NotLowerable) as exc:
            raise ArgumentError(f"cannot make a cpu buffer of dtype {array.dtype}: {exc}") \
                from None
        raw = type if stored_raw(type) else None
        handle = self._runtime.buffer_from_numpy(as_stored(array, type), spec[0],
                                                 device.local_hardware_id)
        counters.count_to_device(array.nbytes)
        return CpuBuffer(self, handle, array.dtype, raw)


def create_client(**options) -> CpuClient:
    """The plugin factory named in pjrt.registry."""
    return CpuClient(**options)
