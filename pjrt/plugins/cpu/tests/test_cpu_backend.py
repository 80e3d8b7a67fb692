"""The cpu backend end to end, against the reference interpreter and numpy."""
from __future__ import annotations

import gc
import logging
import threading

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import ArgumentError, BufferDeletedError
from pjrt.plugins.cpu.native_module import native as native_module
from stablehlo.errors import CheckFailure, OpenHLOError
from stablehlo.interpreter import evaluate

LOOP = """
func.func @main(%x: tensor<4xf32>, %n: tensor<i32>) -> (tensor<4xf32>, tensor<i32>) {
  %i0 = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %c = stablehlo.constant dense<0.5> : tensor<4xf32>
  %r:2 = stablehlo.while(%i = %i0, %v = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %i2 = stablehlo.add %i, %one : tensor<i32>
      %h = stablehlo.multiply %v, %c : tensor<4xf32>
      %v2 = stablehlo.add %h, %c : tensor<4xf32>
      stablehlo.return %i2, %v2 : tensor<i32>, tensor<4xf32>
    }
  return %r#1, %r#0 : tensor<4xf32>, tensor<i32>
}
"""

BRANCHES = """
func.func @main(%p: tensor<i1>, %k: tensor<i32>, %x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %a = "stablehlo.if"(%p) ({
    %e = stablehlo.exponential %x : tensor<3xf32>
    stablehlo.return %e : tensor<3xf32>
  }, {
    stablehlo.return %x : tensor<3xf32>
  }) : (tensor<i1>) -> tensor<3xf32>
  %b = "stablehlo.case"(%k) ({
    %n = stablehlo.negate %x : tensor<3xf32>
    stablehlo.return %n : tensor<3xf32>
  }, {
    %c = func.call @twice(%x) : (tensor<3xf32>) -> tensor<3xf32>
    stablehlo.return %c : tensor<3xf32>
  }) : (tensor<i32>) -> tensor<3xf32>
  return %a, %b : tensor<3xf32>, tensor<3xf32>
}
func.func private @twice(%y: tensor<3xf32>) -> tensor<3xf32> {
  %s = stablehlo.add %y, %y : tensor<3xf32>
  return %s : tensor<3xf32>
}
"""

ALL_REDUCE = """
module attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<8xf32>) {
    %s = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %t : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    %g = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64,
        replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>} : (tensor<2xf32>) -> tensor<8xf32>
    return %s, %g : tensor<2xf32>, tensor<8xf32>
  }
}
"""


@pytest.fixture(scope="module")
def client():
    return pjrt.make_client("cpu", num_devices=4)


def _same_as_interpreter(text, args):
    module = stablehlo.parse(text)
    want = evaluate(module, args)
    got = pjrt.make_client("cpu").compile(text)(*args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-6)


def test_cpu_is_the_default_backend():
    assert pjrt.registry.DEFAULT_BACKEND == "cpu"
    assert "cpu" in pjrt.available_backends()


def test_while_loop_runs_in_native_code(client):
    args = [np.array([1, 2, 3, 4], np.float32), np.array(1000, np.int32)]
    _same_as_interpreter(LOOP, args)
    exe = client.compile(LOOP)
    # The loop and its body are native instructions: nothing calls back into Python.
    if {"stablehlo.add", "stablehlo.multiply", "stablehlo.compare"} <= \
            set(native_module().kernel_names()):
        assert exe.fallbacks == []


@pytest.mark.parametrize("p,k", [(True, 0), (False, 1), (True, 7), (False, -1)])
def test_if_case_and_calls(p, k):
    args = [np.array(p), np.array(k, np.int32), np.array([0.5, -1.0, 2.0], np.float32)]
    _same_as_interpreter(BRANCHES, args)


def test_fallback_is_logged_with_its_reason(caplog):
    text = """
    func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
      %r = "stablehlo.map"(%x) ({
        ^bb0(%a: tensor<f32>):
          %e = stablehlo.sine %a : tensor<f32>
          %f = stablehlo.multiply %e, %e : tensor<f32>
          stablehlo.return %f : tensor<f32>
      }) {dimensions = array<i64: 0>} : (tensor<3xf32>) -> tensor<3xf32>
      return %r : tensor<3xf32>
    }"""
    with caplog.at_level(logging.INFO, logger="openhlo.cpu"):
        exe = pjrt.make_client("cpu").compile(text)
    assert [f.op for f in exe.fallbacks] == ["stablehlo.map"]
    assert "stablehlo.map" in caplog.text and "falls back to the interpreter" in caplog.text
    x = np.array([0.1, 0.2, 0.3], np.float32)
    np.testing.assert_allclose(exe(x)[0], np.sin(x) ** 2, rtol=1e-6)


def test_buffers_events_and_async_execute(client):
    exe = client.compile(LOOP)
    x = client.buffer_from_numpy(np.ones(4, np.float32))
    n = client.buffer_from_numpy(np.array(10, np.int32))
    results, event = exe.execute([x, n], with_event=True)
    event.wait()
    assert event.is_ready() and event.error() is None
    want = evaluate(stablehlo.parse(LOOP), [np.ones(4, np.float32), np.array(10, np.int32)])
    np.testing.assert_allclose(results[0].to_numpy(), want[0])
    assert results[1].to_numpy() == 10
    fired = threading.Event()
    results[0].ready_event().on_ready(lambda error: fired.set())
    assert fired.wait(5)


def test_donation_deletes_the_argument(client):
    exe = client.compile(LOOP)
    x = client.buffer_from_numpy(np.ones(4, np.float32))
    out = exe.execute([x, np.array(3, np.int32)], donate=[0])
    assert x.is_deleted
    out[0].block_until_ready()
    with pytest.raises(BufferDeletedError):
        x.to_numpy()
    with pytest.raises(BufferDeletedError):
        exe.execute([x, np.array(3, np.int32)])


def test_execute_from_four_threads(client):
    exe = client.compile(LOOP)
    errors, outputs = [], {}

    def work(t):
        try:
            for i in range(50):
                x = np.full(4, t + i, np.float32)
                outputs[(t, i)] = (x, exe(x, np.array(i % 7, np.int32))[0])
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    module = stablehlo.parse(LOOP)
    for (t, i), (x, got) in list(outputs.items())[::17]:
        want = evaluate(module, [x, np.array(i % 7, np.int32)])[0]
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_collectives_between_virtual_devices(client):
    exe = client.compile(ALL_REDUCE)
    xs = [np.array([k, 10 * k], np.float32) for k in range(4)]
    outs = exe.execute_sharded([[x] for x in xs])
    for out in outs:
        np.testing.assert_allclose(out[0].to_numpy(), np.sum(xs, axis=0))
        np.testing.assert_allclose(out[1].to_numpy(), np.concatenate(xs))


def test_errors_are_clear(client):
    exe = client.compile(LOOP)
    with pytest.raises(ArgumentError, match="takes 2 argument"):
        exe(np.ones(4, np.float32))
    with pytest.raises(ArgumentError, match="shape"):
        exe(np.ones(5, np.float32), np.array(1, np.int32))
    with pytest.raises(ArgumentError, match="dtype"):
        exe(np.ones(4, np.float64), np.array(1, np.int32))
    other = pjrt.make_client("cpu")
    with pytest.raises(ArgumentError, match="another client"):
        exe.execute([other.buffer_from_numpy(np.ones(4, np.float32)), np.array(1, np.int32)])
    on_device_1 = client.buffer_from_numpy(np.ones(4, np.float32), client.devices()[1])
    with pytest.raises(ArgumentError, match="cpu:1"):
        exe.execute([on_device_1, np.array(1, np.int32)])


def test_failed_check_raises_its_own_error():
    text = """
    func.func @main(%x: tensor<2xi32>) {
      check.expect_eq_const %x, dense<[1, 2]> : tensor<2xi32>
      func.return
    }"""
    exe = pjrt.make_client("cpu").compile(text)
    exe(np.array([1, 2], np.int32))
    with pytest.raises(CheckFailure):
        exe(np.array([1, 3], np.int32))


def test_no_native_memory_leak_over_many_executions():
    native = native_module()
    exe = pjrt.make_client("cpu").compile(LOOP)
    args = [np.ones(4, np.float32), np.array(5, np.int32)]
    for _ in range(50):
        exe(*args)
        exe.execute(args)[0].block_until_ready()
    gc.collect()
    before = native.live_storage_count()
    for _ in range(2000):
        exe(*args)
        exe.execute(args)[0].block_until_ready()
    gc.collect()
    assert native.live_storage_count() <= before


def test_the_storage_high_water_mark_is_what_a_run_held():
    # %a and %b (1 MiB each) are both live when %c is computed (into a third array, or into
    # %a's or %b's storage): a run holds 2 or 3 MiB at most, beyond its borrowed argument.
    native = native_module()
    exe = pjrt.make_client("cpu", opt_level=0).compile("""
func.func @main(%x: tensor<262144xf32>) -> tensor<262144xf32> {
  %a = stablehlo.exponential %x : tensor<262144xf32>
  %b = stablehlo.exponential %a : tensor<262144xf32>
  %c = stablehlo.add %a, %b : tensor<262144xf32>
  return %c : tensor<262144xf32>
}""")
    x = np.zeros(262144, np.float32)
    exe(x)
    before = native.live_storage_bytes()
    native.reset_peak_storage_bytes()
    assert native.peak_storage_bytes() == before
    result = exe(x)
    assert 2 * x.nbytes <= native.peak_storage_bytes() - before <= 3 * x.nbytes
    np.testing.assert_allclose(result, np.e + 1, rtol=1e-6)


def test_numpy_arguments_are_read_in_place_and_never_aliased_by_results():
    text = """
    func.func @main(%x: tensor<4xf32>, %y: tensor<2x2xf32>) -> (tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>) {
      %r = stablehlo.reshape %y : (tensor<2x2xf32>) -> tensor<4xf32>
      %s = stablehlo.add %x, %r : tensor<4xf32>
      return %x, %y, %s : tensor<4xf32>, tensor<2x2xf32>, tensor<4xf32>
    }"""
    exe = pjrt.make_client("cpu").compile(text)
    unaligned = np.frombuffer(bytearray(17), np.uint8, offset=1).view(np.float32)
    unaligned[:] = [0, 1, 2, 3]
    strided = np.arange(8, dtype=np.float32).reshape(2, 4)[:, ::2]  # [[0, 2], [4, 6]]
    for x, y in [(np.arange(4, dtype=np.float32), strided.copy()), (unaligned, strided)]:
        assert x.flags.aligned == (x is not unaligned)
        got_x, got_y, got_s = exe(x, y)
        x[:] = -1  # results returning an argument are copies of it
        y[...] = -1
        assert got_x.tolist() == [0, 1, 2, 3] and got_y.tolist() == [[0, 2], [4, 6]]
        assert got_s.tolist() == [0, 3, 6, 9]


def test_unsupported_program_reports_the_op():
    text = """
    func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
      %r = stablehlo.custom_call @no_such_target(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    }"""
    exe = pjrt.make_client("cpu").compile(text)
    with pytest.raises(OpenHLOError, match="custom_call"):
        exe(np.ones(2, np.float32))


_EXIT_SCRIPT = '''
import numpy as np, pjrt
exe = pjrt.make_client("cpu", num_devices=4).compile("""
module attributes {mhlo.num_replicas = 4 : i32} {
  func.func @main(%x: tensor<1000xf32>) -> tensor<1000xf32> {
    %r = "stablehlo.map"(%x) ({
      ^bb0(%a: tensor<f32>):
        %e = stablehlo.sine %a : tensor<f32>
        stablehlo.return %e : tensor<f32>
    }) {dimensions = array<i64: 0>} : (tensor<1000xf32>) -> tensor<1000xf32>
    %s = "stablehlo.all_reduce"(%r) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %t = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %t : tensor<f32>
    }) {replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<1000xf32>) -> tensor<1000xf32>
    return %s : tensor<1000xf32>
  }
}""")
outs = [exe.execute_sharded([[np.full(1000, k, np.float32)] for k in range(4)])
        for _ in range(20)]
print("queued")
'''


def test_exit_with_executions_in_flight_is_clean():
    """Interpreter exit while executions (with interpreter fallbacks, which need the GIL)
    are still queued on worker threads: no abort, no hang, exit status 0."""
    import subprocess
    import sys
    for _ in range(5):
        done = subprocess.run([sys.executable, "-c", _EXIT_SCRIPT], capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == "queued" and "terminate" not in done.stderr


SHARDED = """
module @m attributes {mhlo.num_partitions = 1 : i32} {
  sdy.mesh @mesh = <["x"=1]>
  func.func @main(%a: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.multiply %a, %a : tensor<4x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"x"}]> : tensor<4x8xf32>
    %2 = stablehlo.add %1, %a : tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
}
"""


@pytest.mark.parametrize("backend", ["cpu", "interpreter"])
def test_a_sharding_constraint_passes_its_value_through(backend):
    # JAX writes sdy.sharding_constraint (e.g. in jax.random) even for one device.
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    (out,) = pjrt.make_client(backend).compile(SHARDED)(a)
    np.testing.assert_array_equal(out, a * a + a)


# In a subprocess, so that a crash fails the test instead of killing pytest.
_SIZE_SCRIPT = '''
import sys
import numpy as np, pjrt, stablehlo
from pjrt.plugins.cpu.tests.kernel_check import run_native, single_op
result = f"tensor<{sys.argv[1]}xf32>"
text = (f"func.func @main(%x: tensor<f32>) -> {result} {{\\n"
        f"  %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> {result}\\n"
        f"  return %0 : {result}\\n}}\\n")
try:
    if sys.argv[2] == "native":  # the kernel alone, on a module the verifier never saw
        run_native(single_op(stablehlo.parse(text, verify=False)), [np.float32(1)])
    else:
        pjrt.make_client("cpu").compile(text)(np.float32(1))
except Exception as exc:
    print(type(exc).__name__, exc)
'''


def _run_size_script(shape: str, how: str) -> str:
    import subprocess
    import sys
    done = subprocess.run([sys.executable, "-c", _SIZE_SCRIPT, shape, how],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("shape,message", [
    ("9223372036854775807x2", "element count does not fit in int64"),
    ("1099511627776x1099511627776", "element count does not fit in int64"),
    ("4611686018427387904", "size in bytes does not fit in int64"),
])
def test_size_overflowing_int64(shape, message):
    """The verifier rejects the program; the native kernel given it anyway refuses the
    shape instead of allocating a wrapped size."""
    assert _run_size_script(shape, "compile").startswith(
        "VerificationError <string>:2:3: 'stablehlo.broadcast_in_dim': result #0 type")
    assert message in _run_size_script(shape, "native")


def test_valid_but_unallocatable_fails_in_compile():
    # 2^52 bytes fit in int64 but not in memory: refused by the per-buffer limit.
    out = _run_size_script("1099511627776x1024", "compile")
    assert out.startswith("BufferLimitError") and "stablehlo.broadcast_in_dim" in out, out
    assert "OPENHLO_MAX_BUFFER_BYTES" in out, out


TOKEN_THROUGH = """
func.func @main(%t: !stablehlo.token, %x: tensor<2xf32>) -> (tensor<2xf32>, !stablehlo.token) {
  %0 = stablehlo.add %x, %x : tensor<2xf32>
  return %0, %t : tensor<2xf32>, !stablehlo.token
}
"""


def test_a_token_argument_is_taken_and_a_token_result_can_be_passed_back(client):
    # Found by the fuzzer: the executor refused every token argument (ArgumentMismatch).
    from stablehlo.interpreter.values import TOKEN
    exe = client.compile(TOKEN_THROUGH)
    x = np.array([1.5, -2.0], np.float32)
    doubled, token = exe(TOKEN, x)
    np.testing.assert_array_equal(doubled, evaluate(stablehlo.parse(TOKEN_THROUGH), [TOKEN, x])[0])
    assert token is TOKEN
    again, _ = exe(token, doubled)
    np.testing.assert_array_equal(again, x * 4)
    with pytest.raises(ArgumentError, match="expected a token"):
        exe(x, x)
