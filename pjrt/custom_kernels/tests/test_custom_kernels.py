"""The custom-kernel registry on the cpu backend: a kernel from C++ source runs natively inside
a compiled program (with attributes, the thread pool, several results), its errors name it,
and check_kernel passes a correct declaration and catches wrong ones."""
import numpy as np
import pytest

import pjrt
from pjrt.custom_kernels import (CUSTOM_KERNELS, Source, TensorSpec, check_kernel,
                                 define_kernel)
from pjrt.custom_kernels.calls import run_kernel
from pjrt.custom_kernels.tests import rms_norm
from pjrt.errors import ArgumentError
from pjrt.plugins.cpu.codegen.build import find_compiler
from stablehlo.errors import OpenHLOError

pytestmark = pytest.mark.skipif(find_compiler() is None, reason="needs a C++ compiler")

PROGRAM = """
func.func @main(%x: tensor<64x32xf32>, %w: tensor<32xf32>) -> tensor<64x32xf32> {
  %y = stablehlo.custom_call @rms_norm(%x, %w) {mhlo.backend_config = {eps = 1.0e-05 : f32}} :
      (tensor<64x32xf32>, tensor<32xf32>) -> tensor<64x32xf32>
  %z = stablehlo.multiply %y, %y : tensor<64x32xf32>
  return %z : tensor<64x32xf32>
}
"""


@pytest.fixture(scope="module", autouse=True)
def kernels():
    rms_norm.define()


def test_kernel_runs_natively_inside_a_compiled_program():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 32)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 32).astype(np.float32)
    exe = pjrt.make_client("cpu").compile(PROGRAM)
    assert exe.fallbacks == []
    y = rms_norm.reference(x, w, 1e-5)
    np.testing.assert_allclose(exe(x, w)[0], y * y, rtol=1e-5, atol=1e-6)


def test_several_results_and_an_error_from_the_handler():
    x = np.ones((3, 4), np.float32)
    dx, dw = run_kernel("rms_norm_vjp", x, np.ones(4, np.float32), x, eps=0.0)
    np.testing.assert_allclose(dx, np.zeros((3, 4)), atol=1e-6)  # rows of ones: flat
    np.testing.assert_allclose(dw, np.full(4, 3.0), rtol=1e-6)
    with pytest.raises(OpenHLOError, match="rms_norm failed: rms_norm takes f32"):
        run_kernel("rms_norm", x.astype(np.float64), np.ones(4), eps=1e-5)


def test_declaration_errors_name_the_kernel():
    with pytest.raises(ArgumentError, match="'rms_norm' takes attributes"):
        run_kernel("rms_norm", np.ones((2, 2), np.float32), np.ones(2, np.float32))
    with pytest.raises(Exception, match="already registered"):
        define_kernel("rms_norm", Source("", "rms_norm"))


def test_check_kernel_passes_the_rms_norm():
    report = check_kernel("rms_norm", shapes=[(5, 12), (12,)], attrs={"eps": 1e-5})
    assert report.ok, str(report)
    assert report.passed == ["schema", "shape_fn", "reference", "vjp"]


def test_check_kernel_catches_a_wrong_reference_and_shape_fn():
    define_kernel("rms_norm_wrong", Source(rms_norm.SOURCE, "rms_norm"), attrs={"eps": "f32"},
                  shape_fn=lambda x, w, eps: [TensorSpec(x.shape[::-1], x.dtype)],
                  reference=lambda x, w, eps: x * w, vjp="rms_norm_wrong_vjp", override=True)
    define_kernel("rms_norm_wrong_vjp", Source(rms_norm.SOURCE, "rms_norm_vjp"),
                  attrs={"eps": "f32"}, num_outputs=2, override=True,
                  shape_fn=lambda x, w, g, eps: [x, w])
    try:
        report = check_kernel("rms_norm_wrong", shapes=[(5, 12), (12,)], attrs={"eps": 1e-5})
        failed = dict(report.failed)
        assert set(failed) == {"shape_fn", "reference"}, str(report)
        assert "(12, 5)" in failed["shape_fn"] and "vjp" in report.passed
    finally:
        CUSTOM_KERNELS._entries.pop("rms_norm_wrong")
        CUSTOM_KERNELS._entries.pop("rms_norm_wrong_vjp")
