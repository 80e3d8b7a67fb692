"""The PJRT C-API boundary under hostile conditions: any Python exception in a callback is a
PJRT error through JAX (never a crash), programs asking for too much fail at compile, and
mismatched channels fail at compile instead of waiting."""
from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt


def test_python_exceptions_in_callbacks_surface_as_pjrt_errors():
    out = run("""
        import pjrt
        calls = []
        original = pjrt.api.Client.compile

        def hostile_compile(self, *args, **kwargs):
            kind = calls.pop(0)
            raise kind("hostile " + kind.__name__)

        pjrt.api.Client.compile = hostile_compile
        for kind in (MemoryError, TypeError, KeyboardInterrupt):
            calls.append(kind)
            try:
                jax.jit(lambda x, k=kind.__name__: x * len(k))(jnp.ones(3)).block_until_ready()
            except Exception as exc:  # JAX's XlaRuntimeError
                assert f"hostile {kind.__name__}" in str(exc), str(exc)
                print("raised", kind.__name__)
        pjrt.api.Client.compile = original
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: x + 1)(jnp.ones(2))), [2, 2])
    """).stdout.splitlines()
    assert out[:3] == ["raised MemoryError", "raised TypeError", "raised KeyboardInterrupt"]


def test_huge_result_fails_at_compile_through_jax():
    out = run("""
        import resource
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            jax.jit(lambda x: jnp.broadcast_to(x, (100000, 1000000)))(jnp.float32(1))
        except Exception as exc:
            message = str(exc)
        grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
        assert grown_mb < 200, grown_mb
        assert "RESOURCE_EXHAUSTED" in message and "OPENHLO_MAX_BUFFER_BYTES" in message, message
        assert "tensor<100000x1000000xf32>" in message, message
        print("ok")
    """).stdout
    assert out.strip() == "ok"
