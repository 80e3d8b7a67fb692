"""Tokens, streams, channels, probes and printing.

* ``after_all`` / ``create_token`` produce the token; tokens only order side
  effects, which the sequential walk already does.
* ``infeed`` pops function names from the grid's infeed queue (the ``infeed``
  attribute of ``interpreter.run_parallel``) and runs each to produce one
  tensor result; ``outfeed`` appends its inputs to the grid's outfeed list.
* ``send``/``recv`` pass values through channel-keyed FIFO queues of the grid;
  a recv with nothing to receive times out with a clear error.
* ``interpreter.probe`` records a tensor per ``probe_id`` and iteration: as
  ``probe<N>.npy`` plus an ``index.csv`` line ``probe_id,type,path`` under
  ``probe_dir`` when one is given, in memory otherwise. ``ProbeStore.read``
  gives it back to ``check.expect_serialized_eq``.
* ``interpreter.print`` writes ``%name = <tensor>`` to the context's stdout;
  ``format_value`` is the interpreter's tensor text (also used to print
  results): ``tensor<2x2xi8> {\\n  [\\n    [1, 2],\\n    [3, 4]\\n  ]\\n}``, or with
  ``dense=True`` the attribute form ``dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>``.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from stablehlo.errors import InterpreterError
from stablehlo.ir.types import (ComplexType, IntegerType, QuantizedType, TensorType, TokenType,
                                TupleType, Type, numpy_dtype)
from stablehlo.interpreter.kernels import kernel
from stablehlo.interpreter.values import TOKEN, Token

_PRINT_LOCK = threading.Lock()


# ---------------------------------------------------------------------------
# Tokens, infeed/outfeed, send/recv

@kernel("stablehlo.after_all")
def after_all(ctx, op, *tokens):
    return TOKEN


@kernel("stablehlo.create_token")
def create_token(ctx, op, *operands):
    return TOKEN


@kernel("stablehlo.infeed", multi=True)
def infeed(ctx, op, token):
    process = ctx.process
    results = []
    for result in op.results:
        if isinstance(result.type, TokenType):
            results.append(TOKEN)
            continue
        name = process.grid.pop_infeed(process.id)
        values = ctx.call(name, [])
        if len(values) != 1:
            raise InterpreterError(f"infeed function @{name} must return one tensor, "
                                   f"returned {len(values)} values")
        results.append(values[0])
    return results


@kernel("stablehlo.outfeed")
def outfeed(ctx, op, *operands):
    ctx.process.grid.push_outfeed([v for v in operands[:-1]])
    return TOKEN


def _channel(op) -> int:
    from stablehlo.interpreter.collectives import channel_id
    return channel_id(op)


@kernel("stablehlo.send")
def send(ctx, op, *operands):
    ctx.process.grid.send(_channel(op), list(operands[:-1]))
    return TOKEN


@kernel("stablehlo.recv", multi=True)
def recv(ctx, op, token):
    process = ctx.process
    values = process.grid.recv(_channel(op), process.id)
    wanted = [r for r in op.results if not isinstance(r.type, TokenType)]
    if len(values) != len(wanted):
        raise InterpreterError(f"recv on channel {_channel(op)} expected {len(wanted)} values, "
                               f"the matching send sent {len(values)}")
    it = iter(values)
    return [TOKEN if isinstance(r.type, TokenType) else next(it) for r in op.results]


# ---------------------------------------------------------------------------
# Probes

class ProbeStore:
    """What ``interpreter.probe`` recorded, per probe id in iteration order."""

    def __init__(self, directory):
        self.directory = directory
        self._records: dict = {}
        self._count = 0
        self._lock = threading.Lock()
        if directory is not None:
            os.makedirs(directory, exist_ok=True)

    def write(self, probe_id: str, value: np.ndarray, type: Type) -> None:
        with self._lock:
            self._count += 1
            if self.directory is None:
                record = np.array(value, copy=True)
            else:
                record = os.path.join(self.directory, f"probe{self._count}.npy")
                np.save(record, _savable(value))
                with open(os.path.join(self.directory, "index.csv"), "a") as index:
                    index.write(f"{probe_id},{type},{record}\n")
            self._records.setdefault(probe_id, []).append(record)

    def read(self, probe_id: str, iteration: int, type: Type) -> np.ndarray:
        with self._lock:
            records = self._records.get(probe_id, [])
        if not 0 <= iteration < len(records):
            raise InterpreterError(f"probe '{probe_id}' has no iteration {iteration} "
                                   f"({len(records)} recorded)")
        record = records[iteration]
        if isinstance(record, np.ndarray):
            return record
        return _restore(np.load(record), type)


def _savable(value: np.ndarray) -> np.ndarray:
    """ml_dtypes arrays are saved as their bit patterns (numpy cannot load them)."""
    if value.dtype.kind == "V" or value.dtype.name not in np.sctypeDict:
        return value.view(f"u{value.dtype.itemsize}")
    return value


def _restore(saved: np.ndarray, type: Type) -> np.ndarray:
    dtype = numpy_dtype(type.element_type) if isinstance(type, TensorType) else saved.dtype
    return saved if saved.dtype == dtype else saved.view(dtype)


def probe_store(ctx) -> ProbeStore:
    shared = ctx.shared
    with shared.lock:
        if shared.probes is None:
            shared.probes = ProbeStore(shared.probe_dir)
        return shared.probes


@kernel("interpreter.probe")
def probe(ctx, op, operand):
    attr = op.attributes.get("probe_id")
    probe_id = attr.value if attr is not None else ""
    probe_store(ctx).write(probe_id, operand, op.operands[0].type)
    return operand


# ---------------------------------------------------------------------------
# Printing

@kernel("interpreter.print", multi=True)
def print_op(ctx, op, operand):
    text = f"{_ssa_name(op.operands[0])} = {format_value(operand, op.operands[0].type)}\n"
    with _PRINT_LOCK:
        ctx.stdout.write(text)
        ctx.stdout.flush()
    return [operand] * len(op.results)


def _ssa_name(value) -> str:
    """The value's source name (``%x``, ``%r#1`` for one of several results)."""
    hint = getattr(value, "name_hint", None) or str(value.index)
    hint = hint.lstrip("%")
    owner = value.owner
    if not value.is_block_argument and len(owner.results) > 1:
        return f"%{hint}#{value.index}"
    return f"%{hint}"


def format_value(value, type: Type, dense: bool = False) -> str:
    """The interpreter's text for a runtime value of ``type``."""
    if isinstance(type, TokenType) or isinstance(value, Token):
        return "!stablehlo.token"
    if isinstance(type, TupleType):
        return "(" + ", ".join(format_value(v, t, dense) for v, t in zip(value, type.types)) + ")"
    if not isinstance(type, TensorType):
        return repr(value)
    array = np.asarray(value)
    if dense:
        from stablehlo.ir.attributes import DenseElementsAttr
        from stablehlo.text.printer import print_attribute
        return print_attribute(DenseElementsAttr(type, array))
    element = type.element_type
    if array.ndim == 0:
        return f"{type} {{{_element_text(array[()], element)}}}"
    lines = _nested_lines(array, element, 1)
    return f"{type} {{\n" + "\n".join(lines) + "\n}"


def _nested_lines(array: np.ndarray, element: Type, depth: int) -> list:
    pad = "  " * depth
    if array.ndim == 1 or array.shape[0] == 0:
        if array.size == 0:
            return [pad + "[]"]
        items = ", ".join(_element_text(x, element) for x in array.reshape(-1))
        return [pad + "[" + items + "]"]
    lines = [pad + "["]
    for i in range(array.shape[0]):
        inner = _nested_lines(array[i], element, depth + 1)
        if i + 1 < array.shape[0]:
            inner[-1] += ","
        lines.extend(inner)
    lines.append(pad + "]")
    return lines


def _element_text(x, element: Type) -> str:
    if isinstance(element, QuantizedType):
        element = element.storage_type
    if isinstance(element, IntegerType):
        if element.width == 1:
            return "true" if bool(x) else "false"
        return str(int(x))
    if isinstance(element, ComplexType):
        return f"[{_float_text(x.real)}, {_float_text(x.imag)}]"
    return _float_text(x)


def _float_text(x) -> str:
    value = float(x)
    if np.isnan(value):
        return "nan"
    if np.isinf(value):
        return "inf" if value > 0 else "-inf"
    return f"{value:.6e}"
