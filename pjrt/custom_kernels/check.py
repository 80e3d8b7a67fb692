"""``check_kernel``: an opcheck for custom kernels (``openhlo kernel-check NAME``).

Runs the kernel natively on random operands and checks, each as a named item of the report:

* ``schema``: the declaration is complete (operand count, attributes of known types, a VJP
  kernel that is registered and takes the operands plus one cotangent per result);
* ``shape_fn``: the shape function gives the shapes and dtypes of the reference's results
  (the kernel's result buffers are allocated from the shape function, so the reference is
  the independent witness; a typed handler also rejects a result type it does not take);
* ``reference``: the kernel against the numpy reference (rtol/atol);
* ``vjp``: the VJP kernel against central finite differences of the kernel itself, as
  <cotangent, J v> for random directions v.

Inputs are float arrays drawn from ``inputs`` (a list of shapes, float32) unless given.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from pjrt.custom_kernels.calls import run_kernel
from pjrt.custom_kernels.registry import CUSTOM_KERNELS, TensorSpec


@dataclass
class CheckReport:
    kernel: str
    passed: list = field(default_factory=list)
    failed: list = field(default_factory=list)   # (item, why)
    skipped: list = field(default_factory=list)  # (item, why)

    @property
    def ok(self) -> bool:
        return not self.failed

    def __str__(self) -> str:
        lines = [f"kernel {self.kernel}: {'ok' if self.ok else 'FAILED'}"]
        lines += [f"  pass  {item}" for item in self.passed]
        lines += [f"  FAIL  {item}: {why}" for item, why in self.failed]
        lines += [f"  skip  {item}: {why}" for item, why in self.skipped]
        return "\n".join(lines)


def check_kernel(name: str, inputs=None, attrs=None, *, shapes=None, seed: int = 0,
                 rtol: float = 1e-4, atol: float = 1e-5, fd_step: float = 1e-3,
                 fd_rtol: float = 2e-2) -> CheckReport:
    """Check kernel ``name`` on ``inputs`` (numpy arrays) or random float32 arrays of
    ``shapes``, with attributes ``attrs``; returns a CheckReport."""
    kernel = CUSTOM_KERNELS.get(name)
    rng = np.random.default_rng(seed)
    if inputs is None:
        inputs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    attrs = kernel.attr_values(dict(attrs or {}))
    report = CheckReport(name)
    _item(report, "schema", lambda: _schema(kernel, inputs))
    outs = run_kernel(name, *inputs, **attrs)
    if kernel.reference is None:
        report.skipped.append(("shape_fn", "no numpy reference to compare with"))
        report.skipped.append(("reference", "no numpy reference declared"))
    else:
        _item(report, "shape_fn", lambda: _shape_fn(kernel, inputs, outs, attrs))
        _item(report, "reference", lambda: _reference(kernel, inputs, outs, attrs, rtol, atol))
    if kernel.vjp is None:
        report.skipped.append(("vjp", "no VJP kernel declared"))
    else:
        _item(report, "vjp", lambda: _vjp(kernel, inputs, outs, attrs, rng, fd_step, fd_rtol))
    return report


def _item(report: CheckReport, item: str, check) -> None:
    try:
        why = check()
    except Exception as exc:  # noqa: BLE001 - a failing check is reported, never raised
        why = f"{type(exc).__name__}: {exc}"
    if why:
        report.failed.append((item, why))
    else:
        report.passed.append(item)


def _schema(kernel, inputs):
    if kernel.num_inputs is not None and kernel.num_inputs != len(inputs):
        return f"declares {kernel.num_inputs} operands, called with {len(inputs)}"
    if kernel.vjp is not None:
        vjp = CUSTOM_KERNELS.lookup(kernel.vjp)
        if vjp is None:
            return f"VJP kernel {kernel.vjp!r} is not registered"
        want = len(inputs) + kernel.num_outputs
        if vjp.num_inputs is not None and vjp.num_inputs != want:
            return f"VJP kernel {kernel.vjp!r} takes {vjp.num_inputs} operands, not {want}"
        if vjp.num_outputs != len(inputs):
            return f"VJP kernel {kernel.vjp!r} returns {vjp.num_outputs} cotangents, not " \
                   f"{len(inputs)}"
    return None


def _shape_fn(kernel, inputs, outs, attrs):
    specs = kernel.output_specs(inputs, **attrs)
    if len(specs) != kernel.num_outputs:
        return f"shape_fn gives {len(specs)} results, the declaration {kernel.num_outputs}"
    want = kernel.reference(*inputs, **attrs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    got = [TensorSpec(tuple(np.shape(w)), np.asarray(w).dtype) for w in want]
    return None if specs == got else f"shape_fn says {specs}, the reference gives {got}"


def _reference(kernel, inputs, outs, attrs, rtol, atol):
    want = kernel.reference(*inputs, **attrs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    for i, (got, expected) in enumerate(zip(outs, want)):
        try:
            np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol)
        except AssertionError as exc:
            return f"result {i}: " + str(exc).strip().splitlines()[-1]
    return None


def _vjp(kernel, inputs, outs, attrs, rng, step, fd_rtol):
    cotangents = [rng.standard_normal(o.shape).astype(o.dtype) for o in outs]
    grads = run_kernel(kernel.vjp, *inputs, *cotangents, **attrs)
    for i, x in enumerate(inputs):
        direction = rng.standard_normal(x.shape).astype(x.dtype)

        def along(t):
            moved = list(inputs)
            moved[i] = (x.astype(np.float64) + t * direction).astype(x.dtype)
            return run_kernel(kernel.name, *moved, **attrs)
        plus, minus = along(step), along(-step)
        numeric = sum(float(np.sum(c.astype(np.float64) * (p - m))) / (2 * step)
                      for c, p, m in zip(cotangents, plus, minus))
        analytic = float(np.sum(grads[i].astype(np.float64) * direction))
        if abs(numeric - analytic) > fd_rtol * max(1.0, abs(numeric)):
            return f"operand {i}: <VJP, v> = {analytic:.6g}, finite differences {numeric:.6g}"
    return None
