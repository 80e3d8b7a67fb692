"""The core ATen coverage table: every core op classified, at least 95% not falling back."""
import torch

from frameworks.torch.coverage import classify, core_aten_ops
from frameworks.torch.lowering import eager_by_design

# Eager by design: random numbers (eager's generator state), Python scalars, complex results,
# in-place resizing. (nonzero's data-dependent size is bounded: data_dependent.py.)
EXPECTED_FALLBACKS = {
    "aten._fft_c2r.default", "aten._fft_r2c.default", "aten._local_scalar_dense.default",
    "aten.native_dropout.default", "aten.rand.default", "aten.randn.default",
    "aten.randperm.default", "aten.resize_.default",
}


def test_every_core_op_is_classified():
    table = classify()
    assert len(table) == len(core_aten_ops()) == 193
    assert set(table.values()) <= {"lowered", "decomposed", "fallback"}


def test_at_least_95_percent_do_not_fall_back():
    table = classify()
    fallbacks = {op for op, status in table.items() if status == "fallback"}
    assert fallbacks <= EXPECTED_FALLBACKS, sorted(fallbacks - EXPECTED_FALLBACKS)
    assert 1 - len(fallbacks) / len(table) >= 0.95


def test_every_core_fallback_is_eager_by_design():
    # the fallback log then gives the reason, not "no lowering registered"
    ops = {str(op): op for op in core_aten_ops()}
    for name, status in classify().items():
        if status == "fallback":
            assert eager_by_design(ops[name]) is not None, name
    assert eager_by_design(torch.ops.aten.i0.default) is None  # a missing lowering
