"""JAX and quantization: ``quantize_jit`` (a jitted function's StableHLO through the
quantizer, run on our cpu backend) and int4 / float8 arrays through the PJRT plugin."""
import numpy as np
import pytest

from frameworks.jax.tests.jax_subprocess import run


@pytest.fixture(scope="module")
def mlp():
    rng = np.random.default_rng(0)
    params = {"w1": (rng.standard_normal((64, 128)) * 0.1).astype(np.float32),
              "w2": (rng.standard_normal((128, 16)) * 0.1).astype(np.float32)}
    x = rng.standard_normal((4, 64)).astype(np.float32)

    def fn(p, x):
        import jax.numpy as jnp
        return jnp.tanh(x @ p["w1"]) @ p["w2"]
    want = np.tanh(x @ params["w1"]) @ params["w2"]
    return fn, params, x, want


@pytest.mark.parametrize("mode,tolerance", [("weight-int8", 0.02), ("weight-int4", 0.25),
                                            ("dynamic-int8", 0.03), ("static-int8", 0.1)])
def test_quantize_jit_modes(mlp, mode, tolerance):
    pytest.importorskip("jax")
    from frameworks.jax.quantize import quantize_jit
    fn, params, x, want = mlp
    rng = np.random.default_rng(1)
    calibration = [(rng.standard_normal((4, 64)).astype(np.float32),) for _ in range(3)] + [(x,)]
    q = quantize_jit(fn, params, x, mode=mode,
                     calibration=calibration if mode == "static-int8" else None)
    assert len(q.report.quantized) == 2          # both dots quantized
    assert "!quant.uniform" in q.text
    lowered = q.lowered()
    assert "quant.uniform" not in str(lowered)
    got = q(x)[0]
    # a relative error bound per mode: int4 weights are coarse (7 steps a side)
    error = np.abs(got - want).max() / np.abs(want).max()
    assert error < tolerance, error
    assert error > 0  # really quantized: not the float program


def test_int4_and_float8_arrays_through_the_plugin():
    run("""
        import ml_dtypes
        rng = np.random.default_rng(0)
        q = rng.integers(-7, 8, size=(5, 7)).astype(ml_dtypes.int4)   # odd sizes
        u = rng.integers(0, 16, size=(3,)).astype(ml_dtypes.uint4)
        f = rng.standard_normal((4, 6)).astype(ml_dtypes.float8_e4m3fn)
        g = rng.standard_normal((9,)).astype(ml_dtypes.float8_e5m2)
        for host in (q, u, f, g):           # in and out unchanged
            back = np.asarray(jax.device_put(host))
            assert back.dtype == host.dtype and back.shape == host.shape
            np.testing.assert_array_equal(back.view(np.uint8), host.view(np.uint8))
        # computing on them: int4 weights in a matmul, an int4 result, f8 in and out
        x = rng.standard_normal((3, 5)).astype(np.float32)
        y = jax.jit(lambda x, w: x @ w.astype(jnp.float32))(x, q)
        np.testing.assert_allclose(np.asarray(y), x @ q.astype(np.float32), rtol=1e-5, atol=1e-5)
        neg = jax.jit(lambda w: -w)(q)
        assert neg.dtype == jnp.int4
        np.testing.assert_array_equal(np.asarray(neg).astype(np.int8), -q.astype(np.int8))
        doubled = jax.jit(lambda v: (v.astype(jnp.float32) * 2).astype(jnp.float8_e4m3fn))(f)
        want = (f.astype(np.float32) * 2).astype(ml_dtypes.float8_e4m3fn)
        np.testing.assert_array_equal(np.asarray(doubled).view(np.uint8), want.view(np.uint8))
        total = jax.jit(lambda v: v.astype(jnp.float32).sum())(g)
        np.testing.assert_allclose(np.asarray(total), g.astype(np.float64).sum(), rtol=1e-6)
    """)
