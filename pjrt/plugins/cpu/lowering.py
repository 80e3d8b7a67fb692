"""Lowering a StableHLO function to a native Program of the cpu backend's executor.

Every SSA value of the function (nested regions and inlined callees included) gets a slot
of one frame; each op becomes one instruction (see native/executor.h):

* ``constant`` -> no instruction: the array is built once, at compile time, and the
  executable puts it in its slot when a frame is made, so constants in a loop body cost its
  iterations nothing;
* ``while``/``if``/``case`` -> control-flow instructions holding nested Programs, so loops
  run in C++ without returning to Python;
* ``func.call`` -> the callee is lowered inline (StableHLO has no recursion);
* ``openhlo.async_start`` -> ASYNC_START: the wrapped collective's native kernel, queued on
  the instance's communication thread; ``openhlo.async_done`` -> ASYNC_DONE, which waits for
  it. A collective without a native kernel runs at its done instead (synchronously, as the
  interpreter does), so no future ever crosses into Python;
* an op with a native kernel -> KERNEL, with the step its factory built;
* a ``custom_call`` of a registered custom kernel (pjrt/custom_kernels) -> KERNEL, a native
  call of its XLA FFI handler (native/ffi_call.h);
* any other op -> CALLBACK into the reference interpreter's kernel for that one op (its
  operands, plus the enclosing values its regions capture). Each such fallback is logged on
  the ``openhlo.cpu`` logger with the reason, and listed in ``LoweredFunction.fallbacks``.

A program whose values cannot live in native arrays (tuples, dynamic shapes, element types
such as f8 or quantized ones) is not lowered: ``NotLowerable`` says why and the backend
runs it on the interpreter as a whole.

After each instruction, the slots whose last use it was are released (liveness), so memory
is freed as early as the program allows.
"""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from stablehlo.errors import InterpreterError, OpenHLOError
from stablehlo.ir.core import Block, Func, Module, Operation, Value
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, ASYNC_START, wrapped_collective
from stablehlo.ir.ops.base import COLLECTIVE
from stablehlo.ir.ops.control_flow import custom_call_target
from stablehlo.ir.types import (FutureType, QuantizedType, TensorType, TokenType, Type,
                                numpy_dtype)

from pjrt.plugins.cpu.attrs import plain_attrs, region_attrs
from pjrt.plugins.cpu.collectives import collective_attrs
from pjrt.plugins.cpu.kernel_attrs import encode
from pjrt.plugins.cpu.native_module import NATIVE_ELEMENT_TYPES, RAW_STORAGE, native
from pjrt.plugins.cpu.precision import warn_if_slow

LOG = logging.getLogger("openhlo.cpu")

_TERMINATORS = frozenset({"func.return", "stablehlo.return"})


class NotLowerable(OpenHLOError):
    """The program needs something the native executor cannot represent."""


@dataclass
class Fallback:
    op: str
    where: str
    reason: str
    # The op or one nested in it communicates (a collective, or a call that may hold one): it
    # meets its peers through the interpreter's process grid, which spans one process only.
    communicates: bool = False


@dataclass
class LoweredFunction:
    executable: object                  # native Executable
    fallbacks: list = field(default_factory=list)
    num_instructions: int = 0
    compiled: list = field(default_factory=list)  # places of ops run as generated kernels
    fusions_generated: list = field(default_factory=list)  # places of generated fusions
    fusions_inlined: list = field(default_factory=list)    # (place, reason) run op by op


def native_type(type: Type):
    """("f32", [2, 3]) for a static tensor, None for a token.

    Element types without native arithmetic (f8 types, i4, quantized storage) are held as
    raw bytes of their width ("b8".."b64"); data-movement kernels handle them and every
    other op on them falls back to the interpreter.
    """
    if isinstance(type, TokenType):
        return None
    if not isinstance(type, TensorType):
        raise NotLowerable(f"values of type {type} are run by the interpreter")
    if not type.is_static:
        raise NotLowerable(f"dynamic shapes ({type}) are run by the interpreter")
    name = str(type.element_type)
    if name in NATIVE_ELEMENT_TYPES and not isinstance(type.element_type, QuantizedType):
        return (name, list(type.shape))
    try:
        width = numpy_dtype(type.element_type).itemsize
    except TypeError:
        raise NotLowerable(f"element type {name} is run by the interpreter") from None
    return (f"b{8 * width}", list(type.shape))


_FOUR_BIT_TYPES = ("i4", "ui4")


def four_bit_attrs(op: Operation) -> dict:
    """``four_bit_operand``/``four_bit_result`` ("i4" or "ui4") of a convert or bitcast_convert
    on 4-bit integers: their native arrays are raw bytes, so the kernel is told what they
    hold (native/kernels_elementwise_math.cc, Note [4-bit integers])."""
    if op.name not in ("stablehlo.convert", "stablehlo.bitcast_convert"):
        return {}
    attrs = {}
    for key, value in (("four_bit_operand", op.operands[0]), ("four_bit_result", op.results[0])):
        element = getattr(value.type, "element_type", None)
        if not isinstance(element, QuantizedType) and str(element) in _FOUR_BIT_TYPES:
            attrs[key] = str(element)
    return attrs


def host_dtype(type: Type):
    """The numpy dtype of a tensor type (None for tokens)."""
    if isinstance(type, TensorType):
        return numpy_dtype(type.element_type)
    return None


def stored_raw(type: Type) -> bool:
    """Whether tensors of ``type`` are held as raw bytes natively (so host arrays of it
    need a view on the way in and out); False for tokens and unlowerable types."""
    try:
        spec = native_type(type)
    except NotLowerable:
        return False
    return spec is not None and spec[0] in RAW_STORAGE


def as_stored(array: np.ndarray, type: Type) -> np.ndarray:
    """``array`` as the native side stores it (raw unsigned bytes for "b" types)."""
    if stored_raw(type):
        return array.view(f"uint{array.dtype.itemsize * 8}")
    return array


def from_stored(array: np.ndarray, type: Type) -> np.ndarray:
    """Inverse of ``as_stored``: the array with its real numpy dtype."""
    dtype = host_dtype(type)
    if dtype is not None and array.dtype != dtype:
        return array.view(dtype)
    return array


class HostState:
    """What interpreter fallbacks of one execution instance share: the process (replica,
    partition and the grid of a multi-device run) and the interpreter's evaluation state."""

    def __init__(self, module: Module, probe_dir=None, process=None):
        self.module = module
        self.probe_dir = probe_dir
        self.process = process
        self._shared = None

    def context(self):
        from stablehlo.interpreter.evaluator import EvalContext
        if self._shared is None:
            self._shared = EvalContext(self.module, probe_dir=self.probe_dir).shared
        return EvalContext(self.module, self.process, _shared=self._shared)

    def abort(self, reason: str) -> None:
        if self.process is not None:
            self.process.grid.abort(reason)


class _ProgramBuilder:
    """One native Program plus what liveness needs: each instruction's uses and definitions."""

    def __init__(self, params: list[int]):
        self.native = native().Program(params)
        self.records: list[tuple[list[int], list[int]]] = []
        self.defined = set(params)

    def add(self, method: str, *args, uses=(), outs=(), captured=()):
        getattr(self.native, method)(*args)
        self.records.append((list(uses) + list(captured), list(outs)))
        self.defined.update(outs)

    def finish(self, results: list[int]) -> set:
        """Sets results and release lists; returns the enclosing slots this program reads."""
        self.native.results = results
        last_use = {}
        for i, (uses, _) in enumerate(self.records):
            for slot in uses:
                last_use[slot] = i
        keep = set(results)
        release = defaultdict(list)
        for slot, i in last_use.items():
            if slot in self.defined and slot not in keep:
                release[i].append(slot)
        for i, (_, outs) in enumerate(self.records):
            for slot in outs:
                if slot not in last_use and slot not in keep:
                    release[i].append(slot)  # a result nobody reads
        for i, slots in release.items():
            self.native.set_release(i, sorted(set(slots)))
        used = {slot for uses, _ in self.records for slot in uses} | keep
        return used - self.defined


class Lowering:
    """Lowers one function of ``module`` (and the callees it inlines), to run as one instance
    of a ``num_replicas`` x ``num_partitions`` grid (which fixes its collectives' groups)."""

    def __init__(self, module: Module, probe_dir=None, num_replicas: int = 1,
                 num_partitions: int = 1, fusions=None, compile_now: bool = True):
        # ``fusions``: the entry function's FusionLibrary when already built (a cache hit).
        # ``compile_now=False``: generated code not already in the kernel cache is left out
        # (fusions run op by op, loops in the executor) and ``deferred`` says so.
        self.module = module
        self.compile_now = compile_now
        self.deferred = False
        self.probe_dir = probe_dir
        self.num_replicas = num_replicas
        self.num_partitions = num_partitions
        self.num_slots = 0
        self.constants: list[tuple[int, np.ndarray, str]] = []  # (slot, value, element type)
        self.fallbacks: list[Fallback] = []
        self.compiled: list[str] = []  # ops run as generated kernels
        self.fusions = fusions  # codegen FusionLibrary of the function being lowered
        self.fusions_generated: list[str] = []
        self.fusions_inlined: list[tuple[str, str]] = []
        self.count = 0
        # handle -> (start, operand slots) of starts whose collective runs at the done
        self.run_at_done: dict[Value, tuple[Operation, list[int]]] = {}

    def lower(self, func: Func) -> LoweredFunction:
        types = list(func.type.inputs) + list(func.type.results)
        for type in types:
            native_type(type)
        self._check_types(func.body)
        from pjrt.plugins.cpu.codegen.program import FusionLibrary
        if self.fusions is None:
            self.fusions = FusionLibrary.build(self.module, func, self.compile_now)
        self.deferred = self.fusions.deferred
        env: dict[Value, int] = {}
        params = [self._define(env, arg) for arg in func.body.arguments]
        builder = _ProgramBuilder(params)
        results = self._lower_ops(func.body, env, builder)
        builder.finish(results)
        exe = native().Executable(
            func.name, self.num_slots, builder.native,
            [native_type(t) for t in func.type.inputs],
            [native_type(t) for t in func.type.results], self.constants)
        return LoweredFunction(exe, self.fallbacks, self.count, self.compiled,
                               self.fusions_generated, self.fusions_inlined)

    # -- checks ---------------------------------------------------------------------
    def _check_types(self, block: Block, seen=None) -> None:
        seen = set() if seen is None else seen
        for op in block.operations:
            for value in list(op.results):
                for type in (value.type.types if isinstance(value.type, FutureType)
                             else (value.type,)):
                    native_type(type)
            for region in op.regions:
                for inner in region.blocks:
                    for arg in inner.arguments:
                        native_type(arg.type)
                    self._check_types(inner, seen)
            if op.name == "func.call":
                callee = self._callee(op)
                if callee.name not in seen:
                    seen.add(callee.name)
                    self._check_types(callee.body, seen)

    def _callee(self, op: Operation) -> Func:
        from pjrt.plugins.cpu.attrs import plain
        name = plain(op.attributes.get("callee"))
        func = self.module.lookup(name)
        if func is None:
            raise NotLowerable(f"{op.where()}: no function @{name}")
        return func

    # -- slots ----------------------------------------------------------------------
    def _define(self, env: dict, value: Value) -> int:
        slot = self.num_slots
        self.num_slots += 1
        env[value] = slot
        return slot

    def _region_program(self, region, env: dict) -> tuple[_ProgramBuilder, set]:
        if len(region.blocks) != 1:
            raise NotLowerable("regions with several blocks are run by the interpreter")
        block = region.blocks[0]
        inner = dict(env)
        params = [self._define(inner, arg) for arg in block.arguments]
        builder = _ProgramBuilder(params)
        results = self._lower_ops(block, inner, builder)
        captured = builder.finish(results)
        return builder, captured

    # -- ops ------------------------------------------------------------------------
    def _lower_ops(self, block: Block, env: dict, builder: _ProgramBuilder) -> list[int]:
        for op in block.operations:
            if op.name in _TERMINATORS:
                return [env[v] for v in op.operands]
            self._lower_op(op, env, builder)
            self.count += 1
        return []

    def _lower_op(self, op: Operation, env: dict, b: _ProgramBuilder) -> None:
        name = op.name
        where = op.where()
        ins = [env[v] for v in op.operands]
        if name == "func.call":
            callee = self._callee(op)
            inner = dict(zip(callee.body.arguments, ins))
            results = self._lower_ops(callee.body, inner, b)
            for value, slot in zip(op.results, results):
                env[value] = slot
            return
        if name == "stablehlo.composite" and self._lower_fusion(op, env, ins, b):
            return
        if name == "stablehlo.composite" and self._lower_native_composite(op, env, ins, b):
            return
        outs = [self._define(env, r) for r in op.results]
        if name == "stablehlo.constant":
            type = native_type(op.results[0].type)
            value = as_stored(np.require(op.attributes["value"].array, requirements="C"),
                              op.results[0].type)
            # Defined by no program, so every program sees the slot as an enclosing value
            # and none releases it.
            self.constants.append((outs[0], value, type[0]))
        elif name in ("stablehlo.optimization_barrier", "sdy.sharding_constraint"):
            b.add("add_alias", where, ins, outs, uses=ins, outs=outs)
        elif name == "stablehlo.while" and self._lower_compiled_while(op, env, ins, outs, b):
            pass
        elif name == "stablehlo.while":
            cond, cap1 = self._region_program(op.regions[0], env)
            body, cap2 = self._region_program(op.regions[1], env)
            b.add("add_while", where, cond.native, body.native, ins, outs, uses=ins, outs=outs,
                  captured=cap1 | cap2)
        elif name in ("stablehlo.if", "stablehlo.case"):
            branches, captured = [], set()
            for region in op.regions:
                branch, cap = self._region_program(region, env)
                branches.append(branch.native)
                captured |= cap
            method = "add_if" if name == "stablehlo.if" else "add_case"
            b.add(method, where, branches, ins, outs, uses=ins, outs=outs, captured=captured)
        elif name == "stablehlo.replica_id":
            b.add("add_replica_id", where, outs[0], outs=outs)
        elif name == "stablehlo.partition_id":
            b.add("add_partition_id", where, outs[0], outs=outs)
        elif name in ("stablehlo.after_all", "stablehlo.create_token") and not op.operands:
            b.add("add_token", where, outs[0], outs=outs)
        elif name == "interpreter.run_parallel":
            self._lower_run_parallel(op, ins, outs, b)
        elif name == ASYNC_START:
            self._lower_async_start(op, ins, outs, b)
        elif name == ASYNC_DONE:
            self._lower_async_done(op, env, outs, b)
        elif name == "stablehlo.custom_call" and self._lower_custom_kernel(op, ins, outs, b):
            pass
        else:
            self._lower_kernel_or_fallback(op, env, ins, outs, b)

    def _lower_custom_kernel(self, op, ins, outs, b: _ProgramBuilder) -> bool:
        """A custom_call whose target is a registered custom kernel (pjrt/custom_kernels):
        a native call of its XLA FFI handler. False: not one (the interpreter's targets)."""
        from pjrt.custom_kernels import CUSTOM_KERNELS
        from pjrt.custom_kernels.attributes import call_attributes
        target = custom_call_target(op)
        kernel = None if target is None else CUSTOM_KERNELS.lookup(target)
        if kernel is None:
            return False
        try:
            b.add("add_ffi_call", op.where(), target, kernel.implementation.handler_address(),
                  [native_type(v.type) for v in op.operands],
                  [native_type(r.type) for r in op.results], call_attributes(op), ins, outs,
                  uses=ins, outs=outs)
        except native().Unsupported as exc:
            from pjrt.errors import ArgumentError
            raise ArgumentError(f"{op.where()}: custom kernel {target}: {exc}") from None
        return True

    def _lower_async_start(self, op, ins, outs, b: _ProgramBuilder) -> None:
        collective = wrapped_collective(op)
        kernel, reason = self._native_kernel(collective)
        if kernel is not None:
            try:
                b.add("add_async_start", op.where(), *kernel, ins, outs[0], uses=ins, outs=outs)
                return
            except native().Unsupported as exc:
                reason = str(exc)
        LOG.info("%s runs its collective at the done: %s", op.where(), reason)
        self.run_at_done[op.results[0]] = (op, ins)

    def _lower_async_done(self, op, env, outs, b: _ProgramBuilder) -> None:
        handle = op.operands[0]
        deferred = self.run_at_done.pop(handle, None)
        if deferred is None:
            b.add("add_async_done", op.where(), env[handle], outs, uses=[env[handle]], outs=outs)
            return
        start, ins = deferred
        collective = wrapped_collective(start)
        inner = dict(env)
        inner.update(zip(collective.operands, ins))
        for result, slot in zip(collective.results, outs):
            inner[result] = slot
        self._lower_kernel_or_fallback(collective, inner, ins, outs, b)

    def _lower_compiled_while(self, op, env, ins, outs, b: _ProgramBuilder) -> bool:
        """A whole loop as one generated kernel (codegen/), if the generator made one. The
        results the body leaves unchanged are no outputs of the kernel: they alias their
        operands."""
        compiled = self.fusions.loop(op)
        if compiled is None:
            return False
        library, symbol, made = compiled
        slots = ins + [env[v] for v in made.captured]
        computed = [outs[k] for k in made.results]
        try:
            b.add("add_generated", op.where(), library, symbol,
                  [native_type(op.results[k].type) for k in made.results], slots, computed,
                  [], uses=slots, outs=computed)
        except native().Unsupported as exc:
            LOG.warning("%s: generated kernel unusable (%s); the executor runs the loop",
                        op.where(), exc)
            return False
        same = [k for k in range(len(outs)) if k not in made.results]
        if same:
            b.add("add_alias", op.where(), [ins[k] for k in same], [outs[k] for k in same],
                  uses=[ins[k] for k in same], outs=[outs[k] for k in same])
        self.compiled.append(op.where())
        return True

    def _lower_fusion(self, op, env, ins, b: _ProgramBuilder) -> bool:
        """An ``openhlo.fusion`` composite: its generated kernel (codegen/), else its
        decomposition inlined op by op (said once per fusion). False: not a fusion.

        Fusions the cpu pipeline forms always have a kernel (the fusion pass asks
        codegen/hook.py; tests/test_fusion_hook.py counts); op by op runs the first tier
        until the kernels are compiled (tiering.py), programs without a C++ compiler, and
        fusions that came in the program as given."""
        from pjrt.plugins.cpu.codegen.program import is_fusion
        from xla_core.fusion.kinds import fusion_where
        if not is_fusion(op):
            return False
        where = fusion_where(op)  # names the fusion and its kind in profiles
        entry = self.fusions.lookup(op) if self.fusions is not None else None
        reason = self.fusions.reason(op) if self.fusions is not None else "no code generator"
        if entry is not None:
            library, symbol, pairs = entry
            outs = [self._define(env, r) for r in op.results]
            try:
                b.add("add_generated", where, library, symbol,
                      [native_type(r.type) for r in op.results], ins, outs, pairs,
                      uses=ins, outs=outs)
                self.fusions_generated.append(where)
                return True
            except native().Unsupported as exc:
                reason = str(exc)
        if not self.fusions.deferred:  # deferred ones get their kernel shortly
            LOG.info("%s runs op by op (not generated): %s", where, reason)
        self.fusions_inlined.append((where, reason))
        from pjrt.plugins.cpu.attrs import plain
        callee = self.module.lookup(plain(op.attributes.get("decomposition")))
        if callee is None:
            raise NotLowerable(f"{where}: no decomposition function")
        results = self._lower_ops(callee.body, dict(zip(callee.body.arguments, ins)), b)
        for value, slot in zip(op.results, results):
            env[value] = slot
        return True

    def _lower_native_composite(self, op, env, ins, b: _ProgramBuilder) -> bool:
        """A composite with a native kernel of its own name (``openhlo.attention``): that
        kernel, or its decomposition inlined op by op where the kernel refuses it (an
        element type, say; logged). False: a composite without one."""
        from pjrt.plugins.cpu.attrs import plain
        if _kernel_name(op) not in _kernel_names():
            return False
        kernel, reason = self._native_kernel(op)
        if kernel is not None:
            outs = [self._define(env, r) for r in op.results]
            try:  # profiles name the composite: 'stablehlo.composite' "openhlo.attention"
                b.add("add_kernel", f'{op.where()} "{kernel[0]}"', *kernel, ins, outs,
                      uses=ins, outs=outs)
                return True
            except native().Unsupported as exc:
                reason = str(exc)
            for r in op.results:  # the decomposition defines them instead
                del env[r]
        LOG.info("%s runs its decomposition: %s", op.where(), reason)
        callee = self.module.lookup(plain(op.attributes.get("decomposition")))
        if callee is None:
            raise NotLowerable(f"{op.where()}: no decomposition function")
        results = self._lower_ops(callee.body, dict(zip(callee.body.arguments, ins)), b)
        for value, slot in zip(op.results, results):
            env[value] = slot
        return True

    def _native_kernel(self, op) -> tuple:
        """((name, attribute record, operand types, result types), None) for ``op``'s native
        kernel, or (None, why there is none); the native side may still refuse the record
        (``Unsupported``)."""
        name = _kernel_name(op)
        if name not in _kernel_names():
            return None, "no native kernel"
        region = region_attrs(op)
        if op.regions and not region:
            return None, ("its region is not a simple combiner or comparator, nor an "
                          "argmax-like (value, index) selection")
        if any(isinstance(v.type, TokenType) for v in list(op.operands) + list(op.results)):
            return None, "tokens are handled by the interpreter"
        if any(isinstance(getattr(v.type, "element_type", None), QuantizedType)
               for v in list(op.operands) + list(op.results)):
            return None, "quantized ops run on the interpreter (dequantize-compute-quantize)"
        try:
            attrs = {**plain_attrs(op), **region, **four_bit_attrs(op)}
            # replica_id and partition_id, the other collectives, were lowered above
            if op.opdef is not None and op.opdef.has(COLLECTIVE):
                attrs.update(collective_attrs(op, self.num_replicas, self.num_partitions))
            record = encode(name, op.where(), attrs)
        except native().Unsupported as exc:
            return None, str(exc)
        return (name, record, [native_type(v.type) for v in op.operands],
                [native_type(r.type) for r in op.results]), None

    def _lower_kernel_or_fallback(self, op, env, ins, outs, b: _ProgramBuilder) -> None:
        warn_if_slow(op)
        kernel, reason = self._native_kernel(op)
        if kernel is not None:
            try:
                b.add("add_kernel", op.where(), *kernel, ins, outs, uses=ins, outs=outs)
                if op.opdef is not None and op.opdef.has(COLLECTIVE):
                    # after the collectives this instance started (native/async_comm.h)
                    b.native.set_communicates(len(b.records) - 1)
                return
            except native().Unsupported as exc:
                reason = str(exc)
        self._add_fallback(op, env, ins, outs, b, reason)

    def _add_fallback(self, op, env, ins, outs, b: _ProgramBuilder, reason: str) -> None:
        captured_values = sorted(_captured_values(op), key=lambda v: env[v])
        captured_slots = [env[v] for v in captured_values]
        communicates = any(o.name == "func.call"
                           or (o.opdef is not None and o.opdef.has(COLLECTIVE))
                           for o in op.walk())
        self.fallbacks.append(Fallback(op.name, op.where(), reason, communicates))
        LOG.info("%s falls back to the interpreter: %s", op.where(), reason)
        callback = _interpreter_callback(op, captured_values, self.module, self.probe_dir)
        b.add("add_callback", op.where(), callback, ins + captured_slots, outs,
              [native_type(r.type) for r in op.results], uses=ins + captured_slots, outs=outs)

    def _lower_run_parallel(self, op, ins, outs, b: _ProgramBuilder) -> None:
        from pjrt.plugins.cpu.attrs import plain
        programs = plain(op.attributes.get("programs"))
        if not programs or not all(isinstance(row, list) and row for row in programs) or \
                len({len(row) for row in programs}) != 1:
            raise NotLowerable(f"{op.where()}: 'programs' must be a non-empty grid of functions")
        num_replicas, num_partitions = len(programs), len(programs[0])
        executables = []
        for row in programs:
            for fname in row:
                func = self.module.lookup(fname)
                if func is None:
                    raise NotLowerable(f"{op.where()}: no function @{fname}")
                nested = Lowering(self.module, self.probe_dir, num_replicas, num_partitions,
                                  compile_now=self.compile_now)
                lowered = nested.lower(func)
                self.deferred |= nested.deferred
                self.fallbacks.extend(lowered.fallbacks)
                self.compiled.extend(lowered.compiled)
                self.fusions_generated.extend(lowered.fusions_generated)
                self.fusions_inlined.extend(lowered.fusions_inlined)
                executables.append(lowered.executable)
        infeed = plain(op.attributes.get("infeed")) or []
        module, probe_dir = self.module, self.probe_dir

        def make_host_states(count: int) -> list:
            from stablehlo.interpreter.collectives import Process, ProcessGrid
            grid = ProcessGrid(num_replicas, num_partitions, infeed)
            return [HostState(module, probe_dir,
                              Process(k // num_partitions, k % num_partitions, grid))
                    for k in range(count)]

        b.add("add_run_parallel", op.where(), executables, num_partitions, make_host_states,
              ins, outs, uses=ins, outs=outs)


_KERNEL_NAMES: frozenset | None = None


def _kernel_names() -> frozenset:
    global _KERNEL_NAMES
    if _KERNEL_NAMES is None:
        _KERNEL_NAMES = frozenset(native().kernel_names())
    return _KERNEL_NAMES


def _kernel_name(op: Operation) -> str:
    """The native kernel that runs ``op``: a composite's by the composite's own name (its
    kernel replaces the decomposition), any other op's by the op's."""
    if op.name == "stablehlo.composite":
        return getattr(op.attr("name"), "value", op.name)
    return op.name


def _captured_values(op: Operation) -> set:
    """Values used inside ``op``'s regions but defined outside them."""
    defined, used = set(), set()

    def walk(region):
        for block in region.blocks:
            defined.update(block.arguments)
            for inner in block.operations:
                used.update(inner.operands)
                defined.update(inner.results)
                for r in inner.regions:
                    walk(r)

    for region in op.regions:
        walk(region)
    return used - defined


def _interpreter_callback(op: Operation, captured: list, module: Module, probe_dir):
    """callback(host_state, (replica, partition), arrays) -> results of ``op`` on the
    interpreter; arrays are the operands followed by the captured values."""
    from stablehlo.interpreter.kernels import KERNELS
    from stablehlo.interpreter.values import coerce
    kernel = KERNELS.lookup(op.name)
    if kernel is not None:
        from stablehlo.interpreter import quantization
        run, kernel_op = quantization.plan(kernel, op)
    count = len(op.operands)
    values = list(op.operands) + list(captured)

    def callback(state, ids, arrays):
        if kernel is None:
            raise InterpreterError(f"{op.where()}: no interpreter kernel for '{op.name}'")
        if state is None:  # CompiledProgram passes one per execution; direct runs may not
            state = HostState(module, probe_dir)
        ctx = state.context()
        arrays = [from_stored(a, v.type) for a, v in zip(arrays, values)]
        ctx.bind(dict(zip(captured, arrays[count:])))
        try:
            with np.errstate(all="ignore"):
                outs = run(ctx, kernel_op, *arrays[:count])
        except OpenHLOError as exc:
            if op.where() not in str(exc):
                exc.args = (f"{op.where()}: {exc}",)
            raise
        except Exception as exc:  # noqa: BLE001 - a kernel bug still names the op
            raise InterpreterError(f"{op.where()}: {type(exc).__name__}: {exc}") from exc
        return [as_stored(coerce(out, r.type, f"result #{r.index} of {op.where()}"), r.type)
                for out, r in zip(outs, op.results)]

    return callback
