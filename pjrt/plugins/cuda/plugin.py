"""The cuda backend: programs compiled to cubins + a step list, run by the C++ runtime.

``make_client("cuda", use_graphs=True, target="sm_90a")``: one device per CUDA device of
the driver (``$OPENHLO_CUDA_DRIVER``, default ``libcuda.so.1``; without one, client creation
fails with NoCudaDriverError). Programs go through xla_core's compile driver; the code
pipeline is the cuda one (pipeline.py) and its generation hook ``pjrt.plugins.cuda.aot.
write_directory`` (both imported when the first program is compiled), whose executable
directory runtime.py reads and the runtime loads. Buffers
live in device memory (``to_numpy`` copies back); an execution is queued on the device's
stream and returns at once, its results ready when its event fires.
"""
from __future__ import annotations

import tempfile
import threading
import time
from typing import Optional

import numpy as np

from stablehlo.errors import OpenHLOError
from stablehlo.ir.types import numpy_dtype

from pjrt.api import (ArgumentError, Buffer, BufferDeletedError, Client, CompileOptions,
                      DeadlineExceededError, Device, Event, Executable, LoadedExecutable)
from pjrt.arguments import check_transfer
from pjrt.plugins.compile_driver import Backend, CompileDriverMixin, compile_program
from pjrt.plugins.cuda import runtime

PLATFORM = "cuda"


class CudaEvent(Event):
    """Completion of the work queued on a device's stream before it was recorded."""

    def __init__(self, native_event):
        self._native = native_event

    def is_ready(self) -> bool:
        with runtime.driver_errors("polling a CUDA event"):
            return self._native.is_ready()

    def wait(self, timeout: Optional[float] = None) -> None:
        if timeout is not None and not self.is_ready():
            # The driver's wait has no timeout: poll until the deadline.
            deadline = time.monotonic() + timeout
            while not self.is_ready():
                if time.monotonic() > deadline:
                    raise DeadlineExceededError(f"not ready after {timeout} s")
                time.sleep(1e-4)
        with runtime.driver_errors("waiting for a CUDA execution"):
            self._native.synchronize()

    def error(self) -> Optional[BaseException]:
        # Without waiting: a failed kernel makes the driver's query return the error.
        try:
            self.is_ready()
        except runtime.CudaDriverError as exc:
            return exc
        return None

    def on_ready(self, callback) -> None:
        threading.Thread(target=lambda: callback(self.error()), daemon=True).start()


class CheckedEvent(CudaEvent):
    """A run of a program with check ops: once the device is done, ``run_checks`` (the
    checks evaluated on the host, host_checks.py) runs once, and a failing check is this
    event's error, as a failing check op is the execution's error on the cpu backend."""

    def __init__(self, native_event, run_checks):
        super().__init__(native_event)
        self._run_checks = run_checks
        self._lock = threading.Lock()
        self._checked = False
        self._failure: Optional[BaseException] = None

    def _check(self) -> Optional[BaseException]:
        with self._lock:
            if not self._checked:
                try:
                    self._run_checks()
                except OpenHLOError as exc:  # CheckFailure, or a download's CudaDriverError
                    self._failure = exc
                self._checked = True
                self._run_checks = None  # let the checked values go
        return self._failure

    def wait(self, timeout: Optional[float] = None) -> None:
        super().wait(timeout)
        failure = self._check()
        if failure is not None:
            raise failure

    def error(self) -> Optional[BaseException]:
        failure = super().error()
        if failure is None and super().is_ready():
            failure = self._check()
        return failure


class CudaBuffer(Buffer):
    def __init__(self, client: "CudaClient", device: Device, native_buffer, shape: tuple,
                 dtype: np.dtype, event: CudaEvent):
        self._client = client
        self._device = device
        self._native = native_buffer
        self._shape = tuple(shape)
        self._dtype = np.dtype(dtype)
        self._event = event

    dtype = property(lambda self: self._dtype)
    shape = property(lambda self: self._shape)
    device = property(lambda self: self._device)
    client = property(lambda self: self._client)

    def ready_event(self) -> Event:
        return self._event

    def _check_live(self, what: str) -> None:
        if self._native.released:
            raise BufferDeletedError(f"cannot {what} a deleted or donated buffer on "
                                     f"{self._device}")

    def block_until_ready(self) -> "CudaBuffer":
        # The event outlives a deletion (other results of the run share it): check first.
        self._check_live("wait for")
        return super().block_until_ready()

    def to_numpy(self) -> np.ndarray:
        self._check_live("read")
        self._event.wait()
        out = np.empty(self._shape, self._dtype)
        with runtime.driver_errors(f"copying a buffer from {self._device} to the host"):
            self._client._native_device(self._device).download(self._native, out)
        out.flags.writeable = False
        return out

    def copy_to_device(self, device: Device) -> "CudaBuffer":
        self._check_live("copy")
        device = self._client.own_device(device)
        if device == self._device:
            with runtime.driver_errors(f"copying a buffer on {device}"):
                native = self._client._native_device(device).copy(self._native)
            return CudaBuffer(self._client, device, native, self._shape, self._dtype,
                              self._client._event(device))
        return self._client.buffer_from_numpy(self.to_numpy(), device)

    def delete(self) -> None:
        self._native.release()

    @property
    def is_deleted(self) -> bool:
        return self._native.released


class CudaLoadedExecutable(LoadedExecutable):
    def __init__(self, client: "CudaClient", executable, device_assignment: list):
        super().__init__(client, executable, device_assignment)
        description: runtime.Description = executable.compiled.payload
        self._description = description
        self._natives = {}
        for device in self.addressable_devices():
            self._natives[device] = runtime.load_executable(
                client._native_device(device), description, use_graph=client.use_graphs)
        self._donation = threading.local()
        self._checks = None
        if description.checks is not None:
            from pjrt.plugins.cuda.host_checks import HostChecks
            self._checks = HostChecks(description.checks)

    @property
    def generated_code_size(self) -> int:
        return len(self._description.cubin)

    def _donated_indices(self, donate) -> list:
        # The contract hands _execute no donation list; it is computed here, in the same
        # thread, just before _execute runs.
        indices = super()._donated_indices(donate)
        self._donation.indices = set(indices)
        return indices

    def _execute(self, args_per_device: list, devices: list) -> tuple:
        donated = getattr(self._donation, "indices", set())
        outputs, events = [], []
        for args, device in zip(args_per_device, devices):
            flags = [i in donated for i in range(len(args))]
            with runtime.driver_errors(f"running {self.name} on {device}"):
                results, native_event = self._natives[device].run([a._native for a in args],
                                                                  flags)
            if self._checks is None:
                event = CudaEvent(native_event)
            else:  # the checked values are the results after the program's own
                checked = results[len(self.result_types):]
                event = CheckedEvent(native_event,
                                     lambda d=device, c=checked: self._run_checks(d, c))
            outputs.append([
                CudaBuffer(self.client, device, native, type.shape,
                           numpy_dtype(type.element_type), event)
                for native, type in zip(results, self.result_types)])
            events.append(event)
        return outputs, events


    def _run_checks(self, device: Device, checked: list) -> None:
        native_device = self.client._native_device(device)
        values = []
        for native, type in zip(checked, self._checks.types):
            value = np.empty(type.shape, numpy_dtype(type.element_type))
            with runtime.driver_errors(f"copying a checked value of {self.name} from "
                                       f"{device} to the host"):
                native_device.download(native, value)
            values.append(value)
        self._checks.run(values)


class CudaClient(CompileDriverMixin, Client):
    platform_name = PLATFORM
    survives_fork = False  # the driver, initialized here, is unusable in a forked child

    def __init__(self, use_graphs: bool = True, target: str = "sm_90a"):
        self.use_graphs = bool(use_graphs)
        self.target = target
        self._driver = runtime.open_driver()
        with runtime.driver_errors("opening the CUDA devices"):
            count = self._driver.device_count()
            ext = runtime.native()
            self._natives = [ext.Device(self._driver, i, runtime.cublas_path())
                             for i in range(count)]
        if not self._natives:
            raise runtime.NoCudaDriverError(f"no CUDA device: the driver "
                                            f"{self._driver.path} reports none")
        self._devices = [Device(id=i, kind=native.name, platform=PLATFORM,
                                local_hardware_id=i)
                         for i, native in enumerate(self._natives)]

    @property
    def platform_version(self) -> str:
        version = self._driver.version()
        return f"cuda driver {version // 1000}.{version % 1000 // 10}"

    def devices(self) -> list[Device]:
        return list(self._devices)

    def _native_device(self, device: Device):
        return self._natives[device.id]

    def _event(self, device: Device) -> CudaEvent:
        with runtime.driver_errors(f"recording an event on {device}"):
            return CudaEvent(self._native_device(device).record_event())

    def buffer_from_numpy(self, array, device: Optional[Device] = None) -> CudaBuffer:
        self._check_open()
        device = self.own_device(device)
        array = check_transfer(np.asarray(array), f"a transfer to {device}")
        if array.dtype == np.dtype(object):
            raise ArgumentError(f"cannot transfer an object array to {device}")
        array = np.ascontiguousarray(array)
        with runtime.driver_errors(f"copying {array.nbytes} bytes to {device}"):
            native = self._native_device(device).upload(array)
        return CudaBuffer(self, device, native, array.shape, array.dtype, self._event(device))

    def memory_stats(self, device: Optional[Device] = None) -> dict:
        """The caching allocator's figures for ``device``: bytes in use, peak, cache hits."""
        return dict(self._native_device(self.own_device(device)).allocator_stats())

    def _compiler(self, options) -> Backend:
        return Backend(identity=f"{PLATFORM} {self.target} {self.platform_version}",
                       pipeline=_cuda_pipeline, generate=self._generate)

    def _generate(self, optimized, request) -> runtime.Description:
        # The code generator, imported on the first compile only: a client that only runs
        # ahead-of-time compiled directories (load_directory) needs no nvcc. An op it cannot
        # express raises UnimplementedError naming the op and its place.
        from pjrt.plugins.cuda import aot
        aot.check_target(self.target)
        with tempfile.TemporaryDirectory(prefix="openhlo-cuda-") as out_dir:
            directory = aot.write_directory(optimized, request.entry, target=self.target,
                                            out_dir=out_dir)
            return runtime.read_description(directory)  # reads every file it needs

    def _compile(self, executable, device_assignment: list) -> CudaLoadedExecutable:
        return CudaLoadedExecutable(self, executable, device_assignment)

    def load_directory(self, directory, module_text: str) -> CudaLoadedExecutable:
        """An ahead-of-time compiled executable directory, bound to ``module_text``'s
        signature (the program it was compiled from)."""
        description = runtime.read_description(directory)
        backend = Backend(identity=f"{PLATFORM} aot {directory}",
                          generate=lambda module, request: description)
        options = CompileOptions()
        compiled = compile_program(module_text, options, backend)
        executable = Executable(compiled.module, options, compiled)
        return self._compile(executable, self._device_assignment(executable, options))


def _cuda_pipeline(request):
    from pjrt.plugins.cuda.pipeline import cuda_pipeline
    return cuda_pipeline()


def create_client(**options) -> CudaClient:
    """The plugin factory named in pjrt.registry."""
    return CudaClient(**options)
