"""Custom kernels from JAX on the openhlo plugin: a kernel declared once (the C++ RMS norm of
pjrt/custom_kernels/tests/rms_norm.py) through ffi_call, jit and grad; a handler compiled here
against XLA's own FFI headers (jax.ffi.include_dir()), registered with
jax.ffi.register_ffi_target, running unchanged; a Pallas kernel in interpret mode.
Results against numpy references written independently."""
import os
import shutil
import subprocess

import pytest

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

XLA_HANDLER = r"""
#include <cstdint>
#include "xla/ffi/api/ffi.h"
namespace ffi = xla::ffi;
static ffi::Error AffineImpl(ffi::Buffer<ffi::F32> x, ffi::ResultBuffer<ffi::F32> y,
                             float factor, int64_t offset) {
  if (factor < 0) return ffi::Error::InvalidArgument("factor must be >= 0");
  for (size_t i = 0; i < x.element_count(); ++i) {
    y->typed_data()[i] = x.typed_data()[i] * factor + static_cast<float>(offset);
  }
  return ffi::Error::Success();
}
XLA_FFI_DEFINE_HANDLER_SYMBOL(Affine, AffineImpl,
    ffi::Ffi::Bind().Arg<ffi::Buffer<ffi::F32>>().Ret<ffi::Buffer<ffi::F32>>()
        .Attr<float>("factor").Attr<int64_t>("offset"));
"""


def test_declared_kernel_ffi_call_jit_and_grad():
    run("""
        from pjrt.custom_kernels.tests import rms_norm
        from frameworks.jax.custom_kernels import call
        rms_norm.define()
        rng = np.random.default_rng(0)
        x = rng.standard_normal((6, 16)).astype(np.float32)
        w = rng.uniform(0.5, 1.5, 16).astype(np.float32)
        f = jax.jit(lambda x, w: call("rms_norm", x, w, eps=1e-5))
        np.testing.assert_allclose(np.asarray(f(x, w)), rms_norm.reference(x, w, 1e-5),
                                   rtol=1e-5, atol=1e-6)
        assert "custom_call @rms_norm" in f.lower(x, w).as_text()
        weights = np.arange(16.0, dtype=np.float32)
        loss = lambda x, w: (call("rms_norm", x, w, eps=1e-5) ** 2 * weights).sum()
        gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x, w)
        g = 2 * rms_norm.reference(x, w, 1e-5) * weights
        dx, dw = rms_norm.reference_vjp(x, w, g, 1e-5)
        np.testing.assert_allclose(np.asarray(gx), dx, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(np.asarray(gw), dw, rtol=1e-4, atol=1e-5)
        batched = jax.vmap(lambda x: call("rms_norm", x, w, eps=1e-5))(x.reshape(2, 3, 16))
        np.testing.assert_allclose(np.asarray(batched).reshape(6, 16),
                                   rms_norm.reference(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    """)


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_handler_built_against_xla_ffi_headers_runs_unchanged(tmp_path):
    import jax.ffi
    source = tmp_path / "affine.cc"
    source.write_text(XLA_HANDLER)
    library = tmp_path / "libaffine.so"
    subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-w",
                    f"-I{jax.ffi.include_dir()}", str(source), "-o", str(library)], check=True)
    run(f"""
        import ctypes
        lib = ctypes.cdll.LoadLibrary({os.fspath(library)!r})
        jax.ffi.register_ffi_target("xla_affine", jax.ffi.pycapsule(lib.Affine),
                                    platform="openhlo")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        def affine(x, factor):
            out = jax.ShapeDtypeStruct(x.shape, x.dtype)
            return jax.ffi.ffi_call("xla_affine", out)(x, factor=np.float32(factor),
                                                        offset=np.int64(1))
        np.testing.assert_array_equal(np.asarray(jax.jit(affine, static_argnums=1)(x, 2.5)),
                                      x * 2.5 + 1)
        try:
            np.asarray(affine(x, -1.0))
            raise AssertionError("the handler's error was lost")
        except Exception as exc:  # the handler's own message, naming the call
            assert "factor must be >= 0" in str(exc) and "xla_affine" in str(exc), exc
    """)


def test_pallas_kernel_in_interpret_mode_runs_as_plain_stablehlo():
    run("""
        from jax.experimental import pallas as pl
        def add_scaled(x_ref, y_ref, o_ref):
            o_ref[...] = x_ref[...] * 2.0 + y_ref[...]
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        y = np.ones((4, 8), np.float32)
        out = jax.jit(lambda x, y: pl.pallas_call(
            add_scaled, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
            interpret=True)(x, y))(x, y)
        np.testing.assert_array_equal(np.asarray(out), x * 2.0 + y)
    """)


def test_pallas_blocked_matmul_with_a_grid_in_interpret_mode():
    """A 2-D grid of 16x16 output blocks, each reading a row block of x and a column block of
    y through BlockSpecs: interpret mode lowers the grid to a loop of dynamic slices."""
    run("""
        from jax.experimental import pallas as pl
        def block_matmul(x_ref, y_ref, o_ref):
            o_ref[...] = jnp.dot(x_ref[...], y_ref[...], preferred_element_type=jnp.float32)
        rng = np.random.default_rng(3)
        x = rng.standard_normal((32, 24)).astype(np.float32)
        y = rng.standard_normal((24, 48)).astype(np.float32)
        matmul = pl.pallas_call(
            block_matmul, out_shape=jax.ShapeDtypeStruct((32, 48), jnp.float32), grid=(2, 3),
            in_specs=[pl.BlockSpec((16, 24), lambda i, j: (i, 0)),
                      pl.BlockSpec((24, 16), lambda i, j: (0, j))],
            out_specs=pl.BlockSpec((16, 16), lambda i, j: (i, j)), interpret=True)
        out = jax.jit(matmul)(x, y)
        assert out.devices() == {jax.devices("openhlo")[0]}, out.devices()
        want = x.astype(np.float64) @ y.astype(np.float64)
        np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5, atol=1e-5)
    """)
