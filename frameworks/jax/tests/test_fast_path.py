"""The C fast path of the PJRT plugin (executions that never enter Python) against the
Python path: same numbers, taken only when the program runs without interpreter fallbacks.

Each script runs in a fresh interpreter (see jax_subprocess.py); it counts the executions that
went through Python by wrapping the loader's ``_Runner.run``.
"""
import json
import textwrap

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

# Counts the executions that go through Python (the loader's slow path) in ``slow[0]``.
COUNT_SLOW_CALLS = """
from pjrt.c_api import loader
slow = [0]
original = loader._Runner.run
def counting(self, *args):
    slow[0] += 1
    return original(self, *args)
loader._Runner.run = counting
"""

SCRIPT = COUNT_SLOW_CALLS + """
import json

rng = np.random.default_rng(0)
w = rng.standard_normal((8, 4)).astype(np.float32)
x = rng.standard_normal((5, 8)).astype(np.float32)
a, b = np.arange(6, dtype=np.int32).reshape(2, 3), np.full((2, 3), 3, np.int32)
cases = {
    "add": (jax.jit(lambda x: x + 1), (np.arange(3, dtype=np.float32),)),
    "mlp": (jax.jit(lambda w, x: jnp.tanh(x @ w).sum(axis=0)), (w, x)),
    "two_int_outputs": (jax.jit(lambda a, b: (a * b, a - b)), (a, b)),
    "loop": (jax.jit(lambda n: jax.lax.fori_loop(0, 10, lambda i, c: c * 2 + i, n)),
             (np.int32(1),)),
    "empty": (jax.jit(lambda e, y: (e * 2, y + 1)), (np.zeros((0, 3), np.float32),
                                                      np.float32(1.5))),
    "fallback_sort": (jax.jit(jnp.sort), (np.array([0.5, -3.0, 7.25, 1.0], np.float32),)),
}
out = {}
for name, (f, args) in cases.items():
    before = slow[0]
    results = [jax.tree.leaves(f(*args)) for _ in range(3)]  # compile, then cached calls
    # Later calls give the same numbers as the first (which may have gone through Python).
    for later in results[1:]:
        for r0, r in zip(results[0], later):
            np.testing.assert_array_equal(np.asarray(r), np.asarray(r0))
    out[name] = {"values": [np.asarray(r).tolist() for r in results[-1]],
                 "slow_calls": slow[0] - before}
print("RESULT", json.dumps(out))
"""


def _results(**env) -> dict:
    stdout = run(SCRIPT, OPENHLO_CPU_ASYNC_CODEGEN="0", **env).stdout
    return json.loads(stdout.split("RESULT", 1)[1])


def test_fast_path_matches_python_path_and_falls_back():
    fast, slow = _results(), _results(OPENHLO_PJRT_FAST_PATH="0")
    for name in fast:
        assert fast[name]["values"] == slow[name]["values"], name
    # Independent numbers for a few cases.
    assert fast["add"]["values"] == [[1.0, 2.0, 3.0]]
    assert fast["two_int_outputs"]["values"] == [[[0, 3, 6], [9, 12, 15]],
                                                 [[-3, -2, -1], [0, 1, 2]]]
    c = 1
    for i in range(10):
        c = c * 2 + i
    assert fast["loop"]["values"] == [c]
    assert fast["empty"]["values"] == [[], 2.5]
    assert fast["fallback_sort"]["values"] == [[-3.0, 0.5, 1.0, 7.25]]
    # Fully native programs never enter Python; the fallback program always does.
    for name in ("add", "mlp", "two_int_outputs", "loop", "empty"):
        assert fast[name]["slow_calls"] == 0, (name, fast[name])
        assert slow[name]["slow_calls"] == 3, (name, slow[name])
    assert fast["fallback_sort"]["slow_calls"] == 3


def test_fast_path_after_background_codegen(tmp_path):
    # With kernels compiling in the background (an empty kernel cache), the first calls run
    # through Python; once the full program is in place, executions switch to C and give the
    # same numbers.
    proc = run(COUNT_SLOW_CALLS + textwrap.dedent("""
        import time
        f = jax.jit(lambda x: jnp.exp(x) * 2 + x)
        x = np.linspace(-1, 1, 1000, dtype=np.float32)
        want = np.exp(x) * 2 + x
        deadline = time.time() + 60
        while True:
            before = slow[0]
            np.testing.assert_allclose(np.asarray(f(x)), want, rtol=1e-5, atol=1e-6)
            if slow[0] == before or time.time() > deadline:
                break
            time.sleep(0.01)
        print("FIRST_CALL_SLOW", slow[0] > 0, "SWITCHED", slow[0] == before)
    """), OPENHLO_CPU_ASYNC_CODEGEN="1", OPENHLO_CACHE_DIR=str(tmp_path))
    assert "FIRST_CALL_SLOW True SWITCHED True" in proc.stdout, proc.stdout


def test_large_native_executions_dispatch_asynchronously():
    """Above the inline size, native executions go to the dispatch thread: the call returns
    before the work is done, dependent calls queue in order, inputs may be dropped or donated
    right after the call, and the numbers are numpy's."""
    run(COUNT_SLOW_CALLS + textwrap.dedent("""
        f = jax.jit(lambda a, b: jnp.tanh(a @ b) * 0.5)
        rng = np.random.default_rng(1)
        a = rng.standard_normal((384, 384)).astype(np.float32) * 0.05
        b = rng.standard_normal((384, 384)).astype(np.float32) * 0.05
        da, db = jax.device_put(a), jax.device_put(b)
        f(da, db).block_until_ready()  # compiled with its kernels: the fast path from now on
        x, not_ready = da, 0
        want = a
        for _ in range(12):  # a chain: each call reads the previous, still-queued, result
            x = f(x, db)
            not_ready += not x.is_ready()
            want = np.tanh(want @ b) * 0.5
        np.testing.assert_allclose(np.asarray(x), want, rtol=1e-4, atol=1e-6)
        assert not_ready > 0, "every execution had finished when its call returned"
        # an input dropped (and one donated) right after the call stays alive for the queued run
        g = jax.jit(lambda a, b: jnp.tanh(a @ b) * 0.5, donate_argnums=0)
        tmp = jax.device_put(a)
        y = f(jax.device_put(a), db)
        z = g(tmp, db)
        del tmp
        np.testing.assert_allclose(np.asarray(y), np.tanh(a @ b) * 0.5, rtol=1e-4, atol=1e-6)
        np.testing.assert_allclose(np.asarray(z), np.tanh(a @ b) * 0.5, rtol=1e-4, atol=1e-6)
        # small arrays but long work: queued once a native run of it was timed. Tens of ms,
        # so that the caller being descheduled on a busy machine cannot hide the queueing.
        loop = jax.jit(lambda v: jax.lax.fori_loop(0, 10_000_000, lambda i, c: c * 0.5 + 1.0, v))
        for _ in range(10):  # until a call ran natively, and so was timed
            before = slow[0]
            loop(np.zeros(16, np.float32)).block_until_ready()
            if slow[0] == before:
                break
        assert slow[0] == before, "the loop never took the native path"
        pending = loop(np.zeros(16, np.float32))
        assert not pending.is_ready(), "a long loop ran inline"
        np.testing.assert_allclose(np.asarray(pending), np.full(16, 2.0), rtol=1e-6)
    """), OPENHLO_CPU_ASYNC_CODEGEN="0")
