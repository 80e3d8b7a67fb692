"""The cpu backend's compiler pipeline: opt levels, the persistent compilation cache and the
memory figures of a compiled program, checked against the reference interpreter."""
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import ArgumentError, CompileOptions, PluginError

# Softmax over rows followed by a scaled residual: one reduction fusion at opt level 1.
SOFTMAX = """
func.func @main(%x: tensor<64x100xf32>) -> tensor<64x100xf32> {
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %m = stablehlo.reduce(%x init: %ninf) applies stablehlo.maximum across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
  %mb = stablehlo.broadcast_in_dim %m, dims = [0] : (tensor<64xf32>) -> tensor<64x100xf32>
  %d = stablehlo.subtract %x, %mb : tensor<64x100xf32>
  %e = stablehlo.exponential %d : tensor<64x100xf32>
  %s = stablehlo.reduce(%e init: %zero) applies stablehlo.add across dimensions = [1] : (tensor<64x100xf32>, tensor<f32>) -> tensor<64xf32>
  %sb = stablehlo.broadcast_in_dim %s, dims = [0] : (tensor<64xf32>) -> tensor<64x100xf32>
  %p = stablehlo.divide %e, %sb : tensor<64x100xf32>
  %r = stablehlo.add %p, %x : tensor<64x100xf32>
  return %r : tensor<64x100xf32>
}
"""


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENHLO_CACHE_DIR", str(tmp_path))
    return tmp_path


def _x():
    return np.random.default_rng(0).standard_normal((64, 100)).astype(np.float32)


def test_levels_agree_with_the_interpreter(cache_dir):
    x = _x()
    (expected,) = stablehlo.evaluate(stablehlo.parse(SOFTMAX), [x])
    client = pjrt.make_client("cpu")
    plain = client.compile(SOFTMAX, CompileOptions(env_option_overrides={"opt_level": 0}))
    fused = client.compile(SOFTMAX)
    assert plain.program.fusions_generated == []
    assert len(fused.program.fusions_generated) == 1
    assert [op.name for op in fused.optimized_module.lookup("main").body.operations
            ].count("stablehlo.composite") == 1
    for exe in (plain, fused):
        np.testing.assert_allclose(exe(x)[0], expected, rtol=2e-6, atol=1e-6)


def test_bad_levels_are_refused():
    with pytest.raises(PluginError, match="opt_level must be one of"):
        pjrt.make_client("cpu", opt_level=7)
    with pytest.raises(ArgumentError, match="opt_level"):
        pjrt.make_client("cpu").compile(
            SOFTMAX, CompileOptions(env_option_overrides={"opt_level": "fast"}))


def test_memory_stats_reuse_buffers(cache_dir):
    exe = pjrt.make_client("cpu", opt_level=0).compile(SOFTMAX)
    stats = exe.memory_stats()
    row, full = 64 * 4, 64 * 100 * 4
    assert stats["argument_bytes"] == full
    # Temporaries (the result is not one): two scalar constants, the scalar each reduce
    # body computes, two row vectors and five full-size arrays; with reuse far fewer are
    # live at once.
    assert stats["intermediate_bytes"] == 2 * 4 + 2 * 4 + 2 * row + 5 * full
    assert stats["output_bytes"] == full
    assert stats["peak_bytes"] < stats["argument_bytes"] + stats["intermediate_bytes"]
    assert "peak" in stats["report"]


_SECOND_PROCESS = textwrap.dedent("""
    import sys, numpy as np, pjrt
    from pjrt.plugins.cpu.codegen import build
    exe = pjrt.make_client("cpu").compile(open(sys.argv[1]).read())
    x = np.random.default_rng(0).standard_normal((64, 100)).astype(np.float32)
    print(exe.program.cache_hit, len(build.COMPILE_TIMES), len(exe.program.fusions_generated),
          repr(exe(x)[0].tobytes()))
""")


def test_second_process_loads_from_the_cache(cache_dir, tmp_path):
    program = tmp_path / "softmax.mlir"
    program.write_text(SOFTMAX)
    env = dict(os.environ, OPENHLO_CACHE_DIR=str(cache_dir))
    runs = [subprocess.run([sys.executable, "-c", _SECOND_PROCESS, str(program)], env=env,
                           capture_output=True, text=True, check=True).stdout.split(" ", 3)
            for _ in range(2)]
    (hit1, built1, fused1, out1), (hit2, built2, fused2, out2) = runs
    assert (hit1, built1, fused1) == ("False", "1", "1")
    assert (hit2, built2, fused2) == ("True", "0", "1")  # nothing compiled, still fused
    assert out1 == out2


def test_modules_and_options_key_the_cache(cache_dir):
    client = pjrt.make_client("cpu")
    module = stablehlo.parse(SOFTMAX)
    first, second = client.compile(module), client.compile(module)
    assert (first.program.cache_hit, second.program.cache_hit) == (False, True)
    # Other options are another program: no hit.
    other = client.compile(module, CompileOptions(env_option_overrides={"note": 1}))
    assert not other.program.cache_hit
    np.testing.assert_array_equal(second(_x())[0], first(_x())[0])


def test_a_damaged_entry_is_dropped_and_compiled_again(cache_dir):
    client = pjrt.make_client("cpu")
    client.compile(SOFTMAX)
    (entry,) = (cache_dir / "cpu_programs").glob("*.pkl")
    entry.write_bytes(b"not a pickle")
    exe = client.compile(SOFTMAX)
    assert not exe.program.cache_hit
    (expected,) = stablehlo.evaluate(stablehlo.parse(SOFTMAX), [_x()])
    np.testing.assert_allclose(exe(_x())[0], expected, rtol=2e-6, atol=1e-6)
    assert client.compile(SOFTMAX).program.cache_hit  # written again


def test_the_test_sessions_caches_are_temporary(tmp_path_factory):
    # no cache_dir fixture: the session's own (the root conftest.py), not ~/.cache/openhlo
    from pjrt.plugins.cpu import compile_cache
    from pjrt.plugins.cpu.codegen import build
    root = pathlib.Path(os.environ["OPENHLO_CACHE_DIR"]).resolve()
    assert pathlib.Path(tmp_path_factory.getbasetemp()).resolve() in root.parents
    assert pathlib.Path(compile_cache.cache_dir()).resolve() == root / "cpu_programs"
    assert pathlib.Path(build.cache_dir()).resolve() == root / "cpu_kernels"
    before = set(pathlib.Path(compile_cache.cache_dir()).glob("*.pkl"))
    pjrt.make_client("cpu").compile(SOFTMAX.replace("%r = stablehlo.add %p, %x",
                                                    "%r = stablehlo.subtract %p, %x"))
    assert set(pathlib.Path(compile_cache.cache_dir()).glob("*.pkl")) - before  # written there


def _host_options(pipeline) -> set:
    """(pass, devices_per_host) of the passes of ``pipeline`` that describe the host."""
    return {(p.name, p.devices_per_host) for p in pipeline.passes
            if hasattr(p, "devices_per_host")}


def test_the_executable_devices_here_describe_the_host_to_fusion_and_the_scheduler():
    from xla_core.compile import CompileRequest
    client = pjrt.make_client("cpu", num_devices=8)
    options = CompileOptions(num_partitions=4)
    backend = client._compiler(options)
    four = CompileRequest(options, "main", num_replicas=1, num_partitions=4)
    assert client.devices_here(four) == 4
    assert _host_options(backend.pipeline(four)) == {
        ("fusion", 4), ("latency-hiding-scheduler", 4), ("convert-async-to-sync", 4)}
    # two replicas of three partitions on devices 0-5, or on the ones the options name
    six = CompileRequest(options, "main", num_replicas=2, num_partitions=3)
    assert client.devices_here(six) == 6
    # the option, where given, describes the host instead (and keys the cache: identity)
    given = CompileOptions(num_partitions=4, env_option_overrides={"devices_per_host": 1})
    assert _host_options(client._compiler(given).pipeline(four)) == {
        ("fusion", 1), ("latency-hiding-scheduler", 1), ("convert-async-to-sync", 1)}
    assert client._compiler(given).identity != backend.identity
    with pytest.raises(ArgumentError, match="devices_per_host"):
        client._compiler(CompileOptions(env_option_overrides={"devices_per_host": 0}))


def test_devices_without_a_core_for_communication_run_synchronous_collectives(cache_dir):
    # 2 devices described as one per core of the calibrated host: no core is left for the
    # communication threads, whatever the host
    from xla_core.cost import hardware
    text = """
func.func @main(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %r = "stablehlo.all_reduce"(%x) ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
  %a = stablehlo.dot_general %w, %w, contracting_dims = [1] x [0] : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %y = stablehlo.negate %r : tensor<64x64xf32>
  return %y, %a : tensor<64x64xf32>, tensor<64x64xf32>
}
"""
    crowded = max(2, hardware("cpu").cores)
    assert not hardware("cpu", crowded).communication_beside_compute
    client = pjrt.make_client("cpu", num_devices=2)
    rng = np.random.default_rng(0)
    args = [[rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2)]
            for _ in range(2)]
    results = {}
    for devices in (1, crowded):
        exe = client.compile(text, CompileOptions(
            num_replicas=2, env_option_overrides={"devices_per_host": devices}))
        names = [op.name for op in exe.optimized_module.walk()]
        overlaps = hardware("cpu", devices).communication_beside_compute
        assert ("openhlo.async_start" in names) == overlaps
        results[devices] = [[b.to_numpy() for b in out] for out in exe.execute_sharded(args)]
    for one, shared in zip(results[1], results[crowded]):
        for a, b in zip(one, shared):
            np.testing.assert_array_equal(a, b)
    # each replica's all-reduce of %x: the sum over both, negated
    np.testing.assert_array_equal(results[crowded][0][0], -(args[0][0] + args[1][0]))


def test_compile_cache_identity_names_the_hardware_description(tmp_path, monkeypatch):
    """OPENHLO_HARDWARE changes what the pipeline's cost model reads, so programs compiled
    under another description are not reused."""
    from pjrt.plugins.cpu import compile_cache
    from xla_core.cost.hardware import GENERIC_CPU, HARDWARE_ENV
    measured = compile_cache.identity(1, "cpu")
    assert "hardware=" not in measured  # this machine's calibration: the processor's
    path = tmp_path / "generic.json"
    path.write_text(GENERIC_CPU.to_json())
    monkeypatch.setenv(HARDWARE_ENV, str(path))
    assert compile_cache.identity(1, "cpu") != measured
    assert f"hardware={GENERIC_CPU.cache_key()}" in compile_cache.identity(1, "cpu")
