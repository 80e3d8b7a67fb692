"""A vendor's backend behind the JAX plugin: the example vendor plugin (examples/vendor_plugin),
registered with pjrt by name, is selected with OPENHLO_JAX_BACKEND and runs jax.jit programs;
an op it does not support is a Python exception naming the op. Numbers are numpy's."""
import os

from frameworks.jax.tests.jax_subprocess import ROOT, pytestmark, run  # noqa: F401

VENDOR_SRC = os.path.join(ROOT, "examples", "vendor_plugin", "src")


def test_vendor_backend_runs_jax_programs():
    out = run(f"""
        import sys
        import pjrt
        # what `pip install examples/vendor_plugin` does through its entry point
        sys.path.insert(0, {VENDOR_SRC!r})
        pjrt.register_plugin("vendor_example", "openhlo_vendor_example.plugin:create_client")
        x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
        w = np.linspace(0, 2, 20, dtype=np.float32).reshape(4, 5)
        f = jax.jit(lambda x, w: jnp.tanh(x @ w).sum(axis=0))
        np.testing.assert_allclose(np.asarray(f(x, w)), np.tanh(x @ w).sum(axis=0), rtol=1e-5)
        assert jax.devices()[0].platform == "openhlo" and len(jax.devices()) == 2
        try:
            jax.jit(jnp.sin)(x).block_until_ready()
        except Exception as exc:
            print("refused:", str(exc).splitlines()[0])
    """, OPENHLO_JAX_BACKEND="vendor_example", OPENHLO_JAX_NUM_DEVICES="2").stdout
    assert "refused:" in out and "'stablehlo.sine' is not supported by the vendor_example " \
        "backend" in out, out
