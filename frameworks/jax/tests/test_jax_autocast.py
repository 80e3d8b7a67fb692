"""The ``autocast`` compile option from JAX: ``jax.jit(f).lower(...).compile(compiler_options=
{"autocast": "bf16"})`` reaches the compile driver through the plugin's compile options, and
the MLP's products then run in bf16 (error against float64 at bf16's scale, not f32's).
``autocast_force`` makes the test independent of the CPU's bf16 support."""
from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt


def test_compiler_options_autocast_runs_the_products_in_bf16():
    run("""
        rng = np.random.default_rng(0)
        w1 = rng.standard_normal((64, 32)).astype(np.float32)
        w2 = rng.standard_normal((32, 8)).astype(np.float32)
        x = rng.standard_normal((16, 64)).astype(np.float32)
        mlp = jax.jit(lambda w1, w2, x: jax.nn.relu(x @ w1) @ w2)
        want = np.maximum(x.astype(np.float64) @ w1, 0) @ w2
        scale = np.abs(want).max()
        lowered = mlp.lower(w1, w2, x)
        full = np.asarray(lowered.compile()(w1, w2, x))
        mixed = np.asarray(lowered.compile(compiler_options={
            "autocast": "bf16", "autocast_force": True})(w1, w2, x))
        assert np.abs(full - want).max() < 1e-5 * scale
        # bf16 operands: relative rounding 2^-9 each, summed over 64 and 32 terms
        assert 1e-4 * scale < np.abs(mixed - want).max() < 3e-2 * scale
    """)
