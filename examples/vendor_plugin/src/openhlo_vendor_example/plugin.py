"""The ``vendor_example`` backend: a HostClient that runs a small op set with numpy.

What a real vendor backend does, in miniature:

* ``compile_program`` checks that the backend can run every op of the entry
  function (and only static tensor types) and raises ``UnimplementedError``
  naming the first op it cannot run and where it is, so users learn at
  compile time, not in the middle of a run;
* ``Program.run`` executes the ops in order on numpy arrays; a failing op is
  reported as an ``ExecutionError`` naming the op.

Devices, buffers, asynchronous execution and argument checks come from
``pjrt.host.HostClient``. Option: ``num_devices`` (default 1).
"""
from __future__ import annotations

import string

import numpy as np

from pjrt.api import ExecutionError, UnimplementedError
from pjrt.host import HostClient
from stablehlo.ir.types import IntegerType, TensorType, numpy_dtype

PLATFORM = "vendor_example"

ELEMENTWISE = {
    "stablehlo.add": np.add,
    "stablehlo.subtract": np.subtract,
    "stablehlo.multiply": np.multiply,
    "stablehlo.divide": np.divide,
    "stablehlo.maximum": np.maximum,
    "stablehlo.negate": np.negative,
    "stablehlo.exponential": np.exp,
    "stablehlo.tanh": np.tanh,
}


class VendorClient(HostClient):
    platform_name = PLATFORM
    device_kind = "example accelerator"
    platform_version = "0.1.0"

    def compile_program(self, module, entry, options) -> "Program":
        func = module.lookup(entry)
        for op in func.body.operations:
            _check_supported(op)
        return Program(func)


class Program:
    """The entry function, run op by op."""

    def __init__(self, func):
        self.func = func

    def run(self, args: list, replica_id: int, partition_id: int, grid) -> list:
        body = self.func.body
        values = dict(zip(body.arguments, args))
        for op in body.operations:
            operands = [values[v] for v in op.operands]
            if op.name == "func.return":
                return operands
            try:
                result = KERNELS[op.name](op, *operands)
            except Exception as exc:
                raise ExecutionError(f"{op.where()} failed: {type(exc).__name__}: {exc}") \
                    from exc
            result_type = op.result_types[0]
            values[op.results[0]] = np.asarray(result).astype(
                numpy_dtype(result_type.element_type), copy=False)
        raise ExecutionError(f"@{self.func.name} has no func.return")


# ---------------------------------------------------------------------------
# Compile-time check

def _check_supported(op) -> None:
    if op.name not in KERNELS and op.name != "func.return":
        raise UnimplementedError(f"{op.where()} is not supported by the {PLATFORM} backend")
    for type in op.operand_types + op.result_types:
        if not isinstance(type, TensorType) or not type.is_static:
            raise UnimplementedError(f"{op.where()}: the {PLATFORM} backend supports static "
                                     f"tensor types only, got {type}")
    if op.name == "stablehlo.divide" and isinstance(op.result_types[0].element_type,
                                                    IntegerType):
        raise UnimplementedError(f"{op.where()}: the {PLATFORM} backend divides floating-point "
                                 f"tensors only")
    if op.name == "stablehlo.reduce" and not _is_single_add_reduce(op):
        raise UnimplementedError(f"{op.where()}: the {PLATFORM} backend supports reduce of "
                                 f"one tensor whose body is a single stablehlo.add")


def _is_single_add_reduce(op) -> bool:
    if len(op.operands) != 2 or len(op.regions) != 1 or len(op.regions[0].blocks) != 1:
        return False
    block = op.regions[0].blocks[0]
    if len(block.operations) != 2:
        return False
    add, ret = block.operations
    return (add.name == "stablehlo.add" and add.operands == block.arguments
            and ret.name == "stablehlo.return" and ret.operands == add.results)


# ---------------------------------------------------------------------------
# Kernels: kernel(op, *operands) -> array

def _ints(op, name: str) -> list:
    return [int(v) for v in op.attributes[name].values]


def _result_shape(op) -> tuple:
    return tuple(op.result_types[0].shape)


def _constant(op):
    return op.attributes["value"].array


def _broadcast_in_dim(op, x):
    dims = _ints(op, "broadcast_dimensions")
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    x = np.transpose(x, order)  # operand dimensions in the order of their result dimensions
    shape = [1] * len(_result_shape(op))
    for i, d in enumerate(sorted(dims)):
        shape[d] = x.shape[i]
    return np.broadcast_to(x.reshape(shape), _result_shape(op))


def _reshape(op, x):
    return x.reshape(_result_shape(op))


def _transpose(op, x):
    return np.transpose(x, _ints(op, "permutation"))


def _dot_general(op, lhs, rhs):
    numbers = op.attributes["dot_dimension_numbers"]

    def dims(name: str) -> list:
        return [int(d) for d in numbers.get(name, ())]
    lb, rb = dims("lhs_batching_dimensions"), dims("rhs_batching_dimensions")
    lc, rc = dims("lhs_contracting_dimensions"), dims("rhs_contracting_dimensions")
    letters = iter(string.ascii_letters)
    lhs_ix = [next(letters) for _ in range(lhs.ndim)]
    rhs_ix = [next(letters) for _ in range(rhs.ndim)]
    for left, right in zip(lb + lc, rb + rc):
        rhs_ix[right] = lhs_ix[left]  # shared letters: summed (contracting) or kept (batching)
    out = ([lhs_ix[d] for d in lb]
           + [lhs_ix[d] for d in range(lhs.ndim) if d not in lb + lc]
           + [rhs_ix[d] for d in range(rhs.ndim) if d not in rb + rc])
    spec = f"{''.join(lhs_ix)},{''.join(rhs_ix)}->{''.join(out)}"
    return np.einsum(spec, lhs, rhs)


def _reduce(op, x, init):
    return np.add.reduce(x, axis=tuple(_ints(op, "dimensions"))) + init


def _convert(op, x):
    return x.astype(numpy_dtype(op.result_types[0].element_type))


def _elementwise(fn):
    return lambda op, *operands: fn(*operands)


KERNELS = {name: _elementwise(fn) for name, fn in ELEMENTWISE.items()}
KERNELS.update({
    "stablehlo.constant": _constant,
    "stablehlo.broadcast_in_dim": _broadcast_in_dim,
    "stablehlo.reshape": _reshape,
    "stablehlo.transpose": _transpose,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.reduce": _reduce,
    "stablehlo.convert": _convert,
})


def create_client(**options) -> VendorClient:
    """The factory named by the ``openhlo.backends`` entry point in pyproject.toml."""
    return VendorClient(**options)
