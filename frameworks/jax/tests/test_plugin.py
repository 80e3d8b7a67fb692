"""JAX on the openhlo PJRT plugin, end to end.

Each test runs a script in a fresh interpreter with JAX_PLATFORMS=openhlo (a process can
register a PJRT platform only once, and the exit path is part of what is tested); results
are checked against numpy written independently.
"""
from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt


def test_device_listing():
    out = run("""
        devices = jax.devices()
        print(len(devices), devices[1].platform, devices[1].id, jax.default_backend())
    """, OPENHLO_JAX_NUM_DEVICES="2").stdout.split()
    assert out == ["2", "openhlo", "1", "openhlo"]


def test_jit_numerics_match_numpy():
    run("""
        rng = np.random.default_rng(0)
        w1 = rng.standard_normal((8, 16)).astype(np.float32)
        w2 = rng.standard_normal((16, 4)).astype(np.float32)
        x = rng.standard_normal((5, 8)).astype(np.float32)
        mlp = jax.jit(lambda w1, w2, x: jnp.tanh(jax.nn.relu(x @ w1) @ w2).sum(axis=0))
        want = np.tanh(np.maximum(x @ w1, 0) @ w2).sum(axis=0)
        np.testing.assert_allclose(np.asarray(mlp(w1, w2, x)), want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: x + 1)(jnp.ones(3))), [2, 2, 2])
        # several outputs, integers, a cached second call
        f = jax.jit(lambda a, b: (a * b, a - b))
        a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.full((2, 3), 3, np.int32)
        for _ in range(2):
            p, m = f(a, b)
            np.testing.assert_array_equal(np.asarray(p), a * b)
            np.testing.assert_array_equal(np.asarray(m), a - b)
        g = jax.grad(lambda x: (x ** 2).sum())(jnp.arange(3.0))
        np.testing.assert_allclose(np.asarray(g), [0.0, 2.0, 4.0])
    """)


def test_transfers_both_ways():
    run("""
        import ml_dtypes
        base = np.arange(24, dtype=np.float32).reshape(4, 6)
        for host in (base, base[:, ::-2], base.T, base[1:3, 2:]):   # negative / non-dense strides
            buf = jax.device_put(host)
            assert buf.devices() == {jax.devices()[0]}
            np.testing.assert_array_equal(np.asarray(buf), host)
        h = np.array([1.5, -2.25], dtype=ml_dtypes.bfloat16)
        back = np.asarray(jax.device_put(h))
        assert back.dtype == h.dtype and back.tolist() == h.tolist()
        x = jax.device_put(np.ones(4, np.int64 if jax.config.x64_enabled else np.int32))
        x.delete()
        assert x.is_deleted()
    """)


def test_unsupported_op_raises_naming_it():
    proc = run("""
        def f(x):
            return jax.ffi.ffi_call("openhlo_no_such_target",
                                    jax.ShapeDtypeStruct(x.shape, x.dtype))(x)
        try:
            jax.jit(f)(jnp.ones(3)).block_until_ready()
        except Exception as exc:
            print("RAISED", type(exc).__name__, exc)
        else:
            print("NO ERROR")
    """)
    assert "RAISED" in proc.stdout and "openhlo_no_such_target" in proc.stdout, proc.stdout


def test_interpreter_backend_option():
    proc = run("""
        print(jax.devices()[0].device_kind, np.asarray(jax.jit(lambda x: x * 2)(jnp.arange(3.0))))
    """, OPENHLO_JAX_BACKEND="interpreter")
    assert proc.stdout.split()[0] == "openhlo-interpreter"
    assert "[0. 2. 4.]" in proc.stdout


def test_donated_buffers_are_consumed():
    run("""
        import warnings
        warnings.simplefilter("error")  # "Some donated buffers were not usable" would raise
        step = jax.jit(lambda w, g: w - 0.5 * g, donate_argnums=0)
        w = jax.device_put(np.arange(4, dtype=np.float32))
        g = jax.device_put(np.ones(4, np.float32))
        want = np.arange(4, dtype=np.float32)
        for _ in range(3):  # the usual training-loop shape: params = step(params, grads)
            old, w = w, step(w, g)
            want = want - 0.5
            assert old.is_deleted() and not g.is_deleted()
            np.testing.assert_array_equal(np.asarray(w), want)
        try:
            np.asarray(old)
        except RuntimeError as exc:
            assert "deleted" in str(exc), exc
        else:
            raise AssertionError("a donated array could still be read")
        # the same array twice: JAX keeps it (non-donatable), the result is still right
        twice = jax.jit(lambda a, b: a + b, donate_argnums=0)
        np.testing.assert_array_equal(np.asarray(twice(g, g)), [2, 2, 2, 2])
    """)
