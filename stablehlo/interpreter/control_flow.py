"""Control flow, calls, composites and custom calls.

* ``while``: regions (cond, body) over the loop-carried values; the loop
  reuses the compiled blocks, so an iteration costs two region runs.
* ``if``: region 0 when the predicate holds, else region 1.
* ``case``: branch ``index``; an index outside ``[0, n)`` runs the last branch.
* ``func.call`` and ``composite`` (its ``decomposition``) call a function.
* ``optimization_barrier`` and ``sdy.sharding_constraint`` pass their operands through.
* ``custom_call``: the ``@check.*`` targets of the JAX testdata
  (stablehlo-format.md §10): ``check.expect_eq`` exact,
  ``check.expect_almost_eq`` absolute tolerance 1e-3, ``check.expect_close``
  0..3 ULP, each failing with ``CheckFailure``; ``check.eq`` returns a
  ``tensor<i1>`` and fails likewise on a mismatch (exact for integers, 1e-4
  for floats). Any other target is an error.
* ``async_start``/``async_done`` are refused with a clear error.
"""
from __future__ import annotations

import numpy as np

from stablehlo.errors import CheckFailure, InterpreterError
from stablehlo.ir.attributes import StringAttr, SymbolRefAttr
from stablehlo.ir.ops.control_flow import custom_call_target
from stablehlo.interpreter import checks
from stablehlo.interpreter.kernels import kernel


@kernel("stablehlo.while", multi=True)
def while_(ctx, op, *operands):
    cond, body = op.regions
    run_region = ctx.run_region
    values = list(operands)
    while run_region(cond, values)[0]:
        values = run_region(body, values)
    return values


@kernel("stablehlo.if", multi=True)
def if_(ctx, op, pred):
    branch = op.regions[0] if bool(pred) else op.regions[1]
    return ctx.run_region(branch, [])


@kernel("stablehlo.case", multi=True)
def case(ctx, op, index):
    branches = op.regions
    i = int(index)
    if not 0 <= i < len(branches):
        i = len(branches) - 1
    return ctx.run_region(branches[i], [])


def _symbol(op, name: str) -> str:
    attr = op.attributes.get(name)
    if isinstance(attr, SymbolRefAttr):
        return attr.name
    if isinstance(attr, StringAttr):
        return attr.value.lstrip("@")
    raise InterpreterError(f"missing function reference '{name}'")


@kernel("func.call", multi=True)
def call(ctx, op, *operands):
    return ctx.call(_symbol(op, "callee"), operands)


@kernel("stablehlo.composite", multi=True)
def composite(ctx, op, *operands):
    return ctx.call(_symbol(op, "decomposition"), operands)


@kernel("stablehlo.optimization_barrier", "sdy.sharding_constraint", multi=True)
def optimization_barrier(ctx, op, *operands):
    # A Shardy sharding constraint says where a value should live, not what it is: on the
    # global view the interpreter computes, it passes its operand through.
    return list(operands)


@kernel("stablehlo.async_start", "stablehlo.async_done", multi=True)
def async_op(ctx, op, *operands):
    raise InterpreterError(f"{op.name} is not supported by the reference interpreter")


# ---------------------------------------------------------------------------
# custom_call

# Fixed tolerances of the testdata checks (stablehlo-format.md §10).
TESTDATA_ALMOST_EQ_TOLERANCE = 1e-3
TESTDATA_MAX_ULP = 3
CHECK_EQ_FLOAT_TOLERANCE = 1e-4


def _check_eq(actual, expected):
    if checks._kind(np.asarray(actual)) in ("float", "complex"):
        return checks.compare_almost_eq(actual, expected, CHECK_EQ_FLOAT_TOLERANCE)
    return checks.compare_eq(actual, expected)


_CHECK_TARGETS = {
    "check.expect_eq": checks.compare_eq,
    "check.expect_almost_eq":
        lambda a, e: checks.compare_almost_eq(a, e, TESTDATA_ALMOST_EQ_TOLERANCE),
    "check.expect_close": lambda a, e: checks.compare_close(a, e, TESTDATA_MAX_ULP, 0),
    "check.eq": _check_eq,
}


def _target(op) -> str:
    target = custom_call_target(op)
    if target is None:
        raise InterpreterError("custom_call has no call_target_name")
    return target


@kernel("stablehlo.custom_call", multi=True)
def custom_call(ctx, op, *operands):
    target = _target(op)
    compare = _CHECK_TARGETS.get(target)
    if compare is None:
        raise InterpreterError(f"unsupported custom_call target '@{target}'")
    if len(operands) != 2:
        raise InterpreterError(f"@{target} takes 2 operands (actual, expected), got "
                               f"{len(operands)}")
    actual, expected = operands
    if target == "check.eq":  # the testdata writes check.eq(expected, actual)
        actual, expected = expected, actual
    message = compare(actual, expected)
    if message is not None:
        raise CheckFailure(f"@{target} failed: {message}")
    return [np.asarray(True) for _ in op.results]
