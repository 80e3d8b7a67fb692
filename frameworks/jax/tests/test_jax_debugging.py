"""The debugging tools from JAX (JAX_PLATFORMS=openhlo): pjrt.metrics() counts the plugin's
compiles and executions, the C fast path's included; OPENHLO_DUMP_TO names dumps after the
jitted function; OPENHLO_TRACE records compiles and executions."""
import json

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

SCRIPT = """
import json, pjrt
def softsign_sum(x):
    return (x / (1 + jnp.abs(x))).sum()
f = jax.jit(softsign_sum)
x = np.linspace(-3, 3, 12, dtype=np.float32)
pjrt.reset_metrics()
values = [float(f(x)) for _ in range(3)]
first = pjrt.metrics()
pjrt.reset_metrics()
after_reset = pjrt.metrics()
jax.clear_caches()
again = float(jax.jit(softsign_sum)(x))
second = pjrt.metrics()
print("RESULT", json.dumps({
    "values": values + [again], "expected": float((x / (1 + np.abs(x))).sum()),
    "first": [first.compiles, first.executions, first.transfers_to_host],
    "after_reset": [after_reset.compiles, after_reset.executions],
    "second": [second.compiles, second.executions, second.recompilations]}))
"""


def _result(stdout: str) -> dict:
    return json.loads(stdout.split("RESULT", 1)[1])


def test_jit_compiled_once_executed_three_times(tmp_path):
    for fast_path in ("1", "0"):  # the C fast path counts in C, the Python path in Python
        out = _result(run(SCRIPT, OPENHLO_CACHE_DIR=str(tmp_path),
                          OPENHLO_PJRT_FAST_PATH=fast_path).stdout)
        for value in out["values"]:
            assert abs(value - out["expected"]) < 1e-5
        assert out["first"] == [1, 3, 3], fast_path
        assert out["after_reset"] == [0, 0]
        # A cleared cache compiles the same program again: one recompilation.
        assert out["second"] == [1, 1, {"same program compiled again": 1}]


def test_dump_and_trace_name_the_jitted_function(tmp_path):
    run(SCRIPT, OPENHLO_CACHE_DIR=str(tmp_path / "cache"), OPENHLO_CPU_ASYNC_CODEGEN="0",
        OPENHLO_DUMP_TO=str(tmp_path / "dump"), OPENHLO_TRACE=str(tmp_path / "trace.json"))
    folders = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert folders == ["jit_softsign_sum", "jit_softsign_sum-2"]
    files = sorted(p.name for p in (tmp_path / "dump" / folders[0]).iterdir())
    assert files[0] == "000.input.mlir" and any(".cpu.fusion." in f for f in files)
    assert "func.func public @main" in (tmp_path / "dump" / folders[0] / files[0]).read_text()
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    names = [e["name"] for e in events if e["ph"] == "X"]
    assert names.count("compile") == 2 and "pipeline cpu" in names
    # Traced executions take the Python path, so each one is an event.
    assert names.count("execute jit_softsign_sum") == 4
