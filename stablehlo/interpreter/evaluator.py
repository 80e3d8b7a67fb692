"""The reference interpreter's evaluation loop.

``evaluate(module, args)`` finds the entry function, checks the arguments
against its type and walks its body op by op. Each op runs the kernel that
``KERNELS`` holds for its name (see kernels.py); results are checked against
the declared result types.

Structure (mirrors upstream's reference interpreter):

* A ``Scope`` maps SSA values to runtime values and links to the scope of the
  enclosing region, so region bodies see the values defined around them.
  Function bodies start a fresh scope: functions are isolated from above.
* ``EvalContext`` is what kernels receive: ``run_region``, ``call``,
  ``module``, ``process`` (the replica/partition this program runs as, see
  collectives.py) and ``probe_dir``.
* Speed: the first time a block runs it is compiled into a list of steps
  (op, kernel, operands, results, result dtype/shape), cached per block; the
  hot loop then does a dict lookup per operand, one call, and a cheap result
  check per op. Ops on quantized types get their dequantize/requantize
  wrapper at compile time (quantization.py).

Every error a kernel raises comes out as an ``InterpreterError`` naming the
op and its location, with the original exception chained as the cause.
"""
from __future__ import annotations

import functools
import threading
from typing import Optional, Sequence

import numpy as np

from stablehlo.errors import InterpreterError, OpenHLOError
from stablehlo.ir.core import Block, Func, Module, Operation, Region, Value
from stablehlo.ir.types import TensorType, TokenType, TupleType, Type, numpy_dtype
from stablehlo.interpreter.kernels import KERNELS
from stablehlo.interpreter.values import TOKEN, Token, coerce, type_name

_TERMINATORS = frozenset({"stablehlo.return", "func.return"})
ndarray = np.ndarray


class Scope:
    """SSA values of one region invocation, with a link to the enclosing one."""
    __slots__ = ("values", "parent")

    def __init__(self, values: dict, parent: Optional["Scope"] = None):
        self.values = values
        self.parent = parent

    def lookup(self, value: Value):
        scope = self
        while scope is not None:
            values = scope.values
            if value in values:
                return values[value]
            scope = scope.parent
        owner = value.owner
        where = owner.where() if isinstance(owner, Operation) else "a block argument"
        raise InterpreterError(f"value {value!r} (defined by {where}) is used before it has "
                               f"a value")


class _Shared:
    """State shared by every context of one evaluation (all processes)."""

    def __init__(self, module: Module, probe_dir, stdout):
        self.module = module
        self.probe_dir = probe_dir
        self.stdout = stdout
        self.blocks: dict = {}      # Block -> compiled steps
        self.funcs: dict = {f.name: f for f in module.functions()}
        self.probes = None          # io.ProbeStore, created on first use
        self.lock = threading.Lock()


class EvalContext:
    """What kernels see of the evaluation; one per process (thread)."""

    def __init__(self, module: Module, process=None, probe_dir=None, *, stdout=None,
                 _shared: Optional[_Shared] = None):
        if _shared is None:
            _shared = _Shared(module, probe_dir, stdout)
        self._shared = _shared
        self.module = _shared.module
        self.probe_dir = _shared.probe_dir
        if process is None:
            from stablehlo.interpreter.collectives import single_process
            process = single_process()
        self.process = process
        self._scope: Optional[Scope] = None

    # -- API for kernels -------------------------------------------------------
    @property
    def stdout(self):
        import sys
        return self._shared.stdout if self._shared.stdout is not None else sys.stdout

    @property
    def shared(self) -> _Shared:
        return self._shared

    def fork(self, process) -> "EvalContext":
        """A context for another process of the same evaluation."""
        return EvalContext(self.module, process, _shared=self._shared)

    def function(self, name: str) -> Func:
        func = self._shared.funcs.get(name)
        if func is None:
            known = ", ".join("@" + n for n in sorted(self._shared.funcs))
            raise InterpreterError(f"no function @{name} in the module (known: {known})")
        return func

    def call(self, name: str, args: Sequence) -> list:
        """Run function ``@name`` on ``args``; returns its results."""
        return self.call_func(self.function(name), args)

    def call_func(self, func: Func, args: Sequence) -> list:
        body = func.body
        if body is None:
            raise InterpreterError(f"function @{func.name} has no body")
        if len(args) != len(body.arguments):
            raise InterpreterError(f"function @{func.name} takes {len(body.arguments)} "
                                   f"arguments, got {len(args)}")
        saved = self._scope
        try:
            return self._run_block(body, Scope(dict(zip(body.arguments, args))))
        finally:
            self._scope = saved

    def run_region(self, region: Region, args: Sequence) -> list:
        """Run the single block of ``region`` with its arguments bound to ``args``.

        Returns the values of the terminator's operands. The region sees the
        values of the scope of the op that is running it.
        """
        blocks = region.blocks
        if len(blocks) != 1:
            raise InterpreterError(f"cannot run a region with {len(blocks)} blocks")
        block = blocks[0]
        params = block.arguments
        if len(args) != len(params):
            raise InterpreterError(f"region takes {len(params)} arguments, got {len(args)}")
        parent = self._scope
        try:
            return self._run_block(block, Scope(dict(zip(params, args)), parent))
        finally:
            self._scope = parent

    def bind(self, values: dict) -> None:
        """Makes ``values`` (Value -> runtime value) the current scope: for running one op
        outside its function (a backend's fallback, constant folding), its regions see the
        enclosing values they capture through it."""
        self._scope = Scope(dict(values))

    def lookup(self, value: Value):
        """The runtime value of ``value`` in the current scope."""
        return self._scope.lookup(value)

    # -- the hot loop ------------------------------------------------------------
    def _run_block(self, block: Block, scope: Scope) -> list:
        self._scope = scope
        compiled = self._shared.blocks.get(block)
        if compiled is None:
            compiled = self._compile_block(block)
        steps, terminator = compiled
        values = scope.values
        for op, run, kop, operands, results, specs in steps:
            try:
                args = [values[v] for v in operands]
            except KeyError:
                args = [scope.lookup(v) for v in operands]
            try:
                outs = run(self, kop, *args)
            except Exception as exc:  # noqa: BLE001 - every failure gets the op's place
                raise _located(exc, op) from _cause(exc)
            if len(outs) != len(results):
                raise InterpreterError(f"{op.where()}: kernel returned {len(outs)} results, "
                                       f"expected {len(results)}")
            for result, out, spec in zip(results, outs, specs):
                # Fast path: an array of exactly the declared dtype and shape.
                if spec is None or out.__class__ is not ndarray or out.shape != spec[1] or \
                        (out.dtype is not spec[0] and out.dtype != spec[0]):
                    out = _coerce_result(out, result, op)
                values[result] = out
        if terminator is None:
            return []
        try:
            return [values[v] for v in terminator.operands]
        except KeyError:
            return [scope.lookup(v) for v in terminator.operands]

    def _compile_block(self, block: Block):
        ops = block.operations
        terminator = None
        if ops and ops[-1].name in _TERMINATORS:
            terminator = ops[-1]
            ops = ops[:-1]
        steps = [_compile_op(op) for op in ops]
        compiled = (steps, terminator)
        self._shared.blocks[block] = compiled
        return compiled


def _compile_op(op: Operation) -> tuple:
    """(op, run, kernel_op, operands, results, specs) for the hot loop.

    Problems found here (no kernel, dynamic result type) become a ``run`` that
    raises, so errors still surface in execution order.
    """
    from stablehlo.interpreter import quantization
    try:
        _refuse_dynamic_results(op)
        kernel = KERNELS.lookup(op.name)
        if kernel is None:
            where = f" (at {op.location})" if op.location else ""
            raise InterpreterError(f"no interpreter kernel for '{op.name}'{where}")
        run, kernel_op = quantization.plan(kernel, op)
    except Exception as exc:  # noqa: BLE001 - reported when the op runs
        run, kernel_op = _raiser(_located(exc, op), exc), op
    specs = [_result_spec(r.type) for r in op.results]
    return (op, run, kernel_op, list(op.operands), list(op.results), specs)


def _raiser(error: Exception, cause: Exception):
    def run(ctx, op, *args):
        raise error from (cause if cause is not error else cause.__cause__)
    return run


@functools.lru_cache(maxsize=4096)
def _result_spec(type: Type):
    """(dtype, shape) for the fast result check, or None to always coerce."""
    if isinstance(type, TensorType) and type.is_static:
        try:
            return (numpy_dtype(type.element_type), tuple(type.shape))
        except TypeError:
            return None
    return None


def _refuse_dynamic_results(op: Operation) -> None:
    for result in op.results:
        if _is_dynamic(result.type):
            raise InterpreterError(
                f"dynamic shapes are not supported by the reference interpreter: {op.where()} "
                f"has result type {result.type}")


def _is_dynamic(type: Type) -> bool:
    if isinstance(type, TensorType):
        return not type.is_static
    if isinstance(type, TupleType):
        return any(_is_dynamic(t) for t in type.types)
    return False


def _coerce_result(out, result: Value, op: Operation):
    return coerce(out, result.type, f"result #{result.index} of {op.where()}")


def _located(exc: Exception, op: Operation) -> Exception:
    """``exc`` as an OpenHLOError whose message names ``op`` (once)."""
    if getattr(exc, "_located", False):
        return exc
    if isinstance(exc, OpenHLOError):
        message = str(exc)
        where = op.where()
        if op.location is None or str(op.location) not in message:
            exc.args = (f"{where}: {message}",)
        exc._located = True
        return exc
    wrapped = InterpreterError(f"{op.where()}: {type(exc).__name__}: {exc}")
    wrapped._located = True
    return wrapped


def _cause(exc: Exception):
    """The exception to chain as ``__cause__`` of the located error."""
    if isinstance(exc, OpenHLOError):
        return exc.__cause__
    return exc


# ---------------------------------------------------------------------------
# Entry point

def evaluate(module, args: Sequence = (), entry: str = "main", *, process=None,
             probe_dir=None, stdout=None) -> list:
    """Run ``entry`` (default ``@main``, else the only function) of ``module``.

    ``module`` is a ``Module`` or StableHLO text. ``args`` are numpy arrays
    (Python scalars and lists are converted to the declared dtype), ``TOKEN``
    or tuples. Returns the list of results. ``probe_dir`` is where
    ``interpreter.probe`` writes its .npy files (kept in memory when None).
    """
    if isinstance(module, str):
        from stablehlo.text import parse_module
        module = parse_module(module, "<string>")
    func = find_entry(module, entry)
    checked = check_arguments(func, args)
    ctx = EvalContext(module, process, probe_dir, stdout=stdout)
    with np.errstate(all="ignore"):  # IEEE default results, no warnings (spec "Errors")
        return ctx.call_func(func, checked)


def parse_args(text: str) -> list:
    """Arguments from ``--args`` text: ``[dense<1> : tensor<2xi32>, ...]``.

    The messages match upstream stablehlo-translate's for the same mistakes.
    """
    from stablehlo.ir.attributes import ArrayAttr, DenseElementsAttr
    from stablehlo.text import parse_attribute
    try:
        attr = parse_attribute(text)
    except OpenHLOError:
        attr = None
    if not isinstance(attr, ArrayAttr):
        raise InterpreterError("expectected array attribute string for args, i.e. "
                               "--args=[dense<1> : tensor<2xi32>, ...]")
    if not all(isinstance(a, DenseElementsAttr) for a in attr.values):
        raise InterpreterError("expected dense elements attribute for args elements, i.e. "
                               "--args=[dense<1> : tensor<2xi32>, ...]")
    return [a.array for a in attr.values]


def find_entry(module: Module, entry: str = "main") -> Func:
    funcs = module.functions()
    for func in funcs:
        if func.name == entry:
            return func
    if len(funcs) == 1 and entry == "main":
        return funcs[0]
    names = ", ".join("@" + f.name for f in funcs) or "none"
    raise InterpreterError(f"no entry function @{entry} in the module and no single function "
                           f"to use instead (functions: {names})")


def check_arguments(func: Func, args: Sequence) -> list:
    """``args`` checked against the function type (count, shape, dtype).

    Dynamic dimensions of the argument types are fixed by the given arrays.
    """
    inputs = func.type.inputs
    args = list(args)
    if len(args) != len(inputs):
        raise InterpreterError(f"@{func.name} takes {len(inputs)} arguments, got {len(args)}")
    return [_check_argument(func, i, arg, type) for i, (arg, type) in
            enumerate(zip(args, inputs))]


def _check_argument(func: Func, index: int, arg, type: Type):
    what = f"argument #{index} of @{func.name}"
    if isinstance(type, TensorType):
        dtype = numpy_dtype(type.element_type)
        if not isinstance(arg, np.ndarray):
            if isinstance(arg, (tuple, Token)):
                raise InterpreterError(f"{what}: expected {type}, got {type_name(arg)}")
            arg = np.asarray(arg, dtype=dtype)
        if arg.dtype != dtype:
            raise InterpreterError(f"{what}: expected element type {type.element_type} "
                                   f"(numpy {dtype}), got {arg.dtype}")
        shape = tuple(type.shape)
        fits = len(shape) == arg.ndim and all(d is None or d == a
                                              for d, a in zip(shape, arg.shape))
        if not fits:
            raise InterpreterError(f"{what}: expected shape {_shape_text(shape)} ({type}), "
                                   f"got {arg.shape}")
        return arg
    if isinstance(type, TokenType):
        if arg is not TOKEN:
            raise InterpreterError(f"{what}: expected a token, got {type_name(arg)}")
        return arg
    if isinstance(type, TupleType):
        if not isinstance(arg, tuple) or len(arg) != len(type.types):
            raise InterpreterError(f"{what}: expected {type}, got {type_name(arg)}")
        return tuple(_check_argument(func, index, a, t) for a, t in zip(arg, type.types))
    return arg


def _shape_text(shape: tuple) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"
