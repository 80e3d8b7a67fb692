"""``compiled.as_text()``, ``cost_analysis()`` and ``memory_analysis()`` through the plugin, and
an unknown OPENHLO_JAX_BACKEND reported when JAX creates the backend.

References are computed in the test from shapes and numpy (flops of a matmul are 2*M*N*K, the
argument and output sizes are the arrays' nbytes) or by JAX's own CPU backend.
"""
from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt


def test_cost_and_memory_analysis_of_a_matmul(tmp_path):
    run("""
        M, K, N = 32, 48, 24
        a = np.ones((M, K), np.float32)
        b = np.ones((K, N), np.float32)
        compiled = jax.jit(lambda a, b: a @ b).lower(a, b).compile()
        cost = compiled.cost_analysis()
        assert cost["flops"] == 2 * M * N * K, cost
        assert cost["transcendentals"] == 0, cost
        assert cost["bytes accessed"] == a.nbytes + b.nbytes + M * N * 4, cost
        assert 0 < cost["optimal_seconds"] < 1, cost
        memory = compiled.memory_analysis()
        assert memory.argument_size_in_bytes == a.nbytes + b.nbytes, memory
        assert memory.output_size_in_bytes == M * N * 4, memory
        assert memory.alias_size_in_bytes == 0 and memory.temp_size_in_bytes >= 0, memory

        x = np.ones((5, 7), np.float32)
        cost = jax.jit(jnp.tanh).lower(x).compile().cost_analysis()
        assert cost["transcendentals"] == x.size, cost
    """, OPENHLO_CACHE_DIR=str(tmp_path))


def test_donated_argument_is_counted_as_aliased(tmp_path):
    run("""
        x = np.ones((64,), np.float32)
        compiled = jax.jit(lambda x: x * 2 + 1, donate_argnums=0).lower(x).compile()
        memory = compiled.memory_analysis()
        assert memory.argument_size_in_bytes == x.nbytes, memory
        assert memory.output_size_in_bytes == x.nbytes, memory
        assert memory.alias_size_in_bytes == x.nbytes, memory
    """, OPENHLO_CACHE_DIR=str(tmp_path))


def test_as_text_shows_the_optimized_program(tmp_path):
    run("""
        import pjrt, stablehlo
        rng = np.random.default_rng(0)
        x = rng.standard_normal((6, 8)).astype(np.float32)
        w = rng.standard_normal((8, 5)).astype(np.float32)
        f = lambda x, w: jnp.tanh(x @ w).sum(axis=0)
        compiled = jax.jit(f).lower(x, w).compile()
        hlo = compiled.as_text()   # jaxlib's HLO text of our optimized StableHLO
        for op in ("dot(", "tanh(", "reduce(", 'composite.name="openhlo.fusion"'):
            assert op in hlo, hlo
        text = plugin.optimized_text(compiled)
        module = stablehlo.parse(text)
        assert "stablehlo.composite \\"openhlo.fusion\\"" in text, text
        assert any(op.name == "stablehlo.tanh" for f in module.functions() for op in f.op.walk())
        # the text runs (on the reference interpreter) to what JAX's own CPU backend computes
        got, = pjrt.make_client("interpreter").compile(text)(x, w)
        cpu = jax.devices("cpu")[0]
        want = jax.jit(f)(jax.device_put(x, cpu), jax.device_put(w, cpu))
        assert want.devices() == {cpu}
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
    """, platform="openhlo,cpu", OPENHLO_CACHE_DIR=str(tmp_path))


def test_compile_reports_layouts_without_the_optimized_program(tmp_path):
    """Parameter and output layouts come from the plugin's Layouts extension: equal to what
    JAX's own CPU backend reports, and a plain compile never fetches the optimized program
    (which jaxlib would convert to HLO modules to derive them; only as_text asks for it)."""
    proc = run("""
        import sys
        x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
        f = lambda x, s: (jnp.transpose(x, (2, 0, 1)) * s, x.sum() + s, x[0].T)
        def formats(device):
            args = [jax.device_put(a, device) for a in (x, np.float32(2))]
            compiled = jax.jit(f).lower(*args).compile()
            outs = compiled(*args)
            return (compiled, [a.layout for a in compiled.input_formats[0]],
                    [o.layout for o in compiled.output_formats], [o.format.layout for o in outs])
        compiled, params, outputs, results = formats(jax.devices("openhlo")[0])
        _, cpu_params, cpu_outputs, _ = formats(jax.devices("cpu")[0])
        assert params == cpu_params, (params, cpu_params)
        assert outputs == cpu_outputs == results, (outputs, cpu_outputs, results)
        print("as_text", file=sys.stderr, flush=True)
        assert "transpose(" in compiled.as_text()
    """, platform="openhlo,cpu", OPENHLO_PJRT_TRACE="1", OPENHLO_CACHE_DIR=str(tmp_path))
    compiling, as_text = proc.stderr.split("\nas_text\n")
    assert "PJRT_Client_Compile" in compiling
    assert "PJRT_Executable_OptimizedProgram" not in compiling
    assert "PJRT_Executable_OptimizedProgram" in as_text


def test_unknown_backend_is_reported_when_jax_creates_the_backend(tmp_path):
    message = "OPENHLO_JAX_BACKEND='nosuch' is not an OpenHLO backend; known backends: cpu, "
    out = run("""
        try:
            jax.devices()
        except RuntimeError as exc:
            print(exc)
        else:
            raise AssertionError("no error")
    """, OPENHLO_JAX_BACKEND="nosuch", OPENHLO_CACHE_DIR=str(tmp_path)).stdout
    assert out.startswith("Unable to initialize backend 'openhlo': " + message), out
    assert "interpreter" in out
    # Not asked for: JAX runs on its cpu backend and a warning says why openhlo is missing.
    proc = run("""
        assert jax.devices()[0].platform == "cpu"
        print(jnp.ones(2).sum())
    """, platform="", OPENHLO_JAX_BACKEND="nosuch", OPENHLO_CACHE_DIR=str(tmp_path))
    assert proc.stdout.strip() == "2.0"
    assert "openhlo JAX plugin not registered: " + message in proc.stderr
