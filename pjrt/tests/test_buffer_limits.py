"""Programs asking for buffers larger than OPENHLO_MAX_BUFFER_BYTES fail in compile, on every
backend, before anything is allocated."""
from __future__ import annotations

import resource

import numpy as np
import pytest

from pjrt import ErrorCode, error_code, make_client
from stablehlo.errors import OpenHLOError

BACKENDS = ("cpu", "interpreter")

# 100000 * 1000000 f32 = 4e11 bytes: more than any test machine has.
HUGE_BROADCAST = """
func.func @main(%x: tensor<f32>) -> tensor<100000x1000000xf32> {
  %0 = stablehlo.broadcast_in_dim %x, dims = [] : (tensor<f32>) -> tensor<100000x1000000xf32>
  return %0 : tensor<100000x1000000xf32>
}
"""
HUGE_ARGUMENT = """
func.func @main(%x: tensor<100000x1000000xf32>) -> tensor<f32> {
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%x init: %c) applies stablehlo.add across dimensions = [0, 1]
      : (tensor<100000x1000000xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""
# A huge temporary feeding a small result.
HUGE_IOTA = """
func.func @main() -> tensor<i64> {
  %0 = stablehlo.iota dim = 0 : tensor<100000000000xi64>
  %c = stablehlo.constant dense<0> : tensor<i64>
  %1 = stablehlo.reduce(%0 init: %c) applies stablehlo.add across dimensions = [0]
      : (tensor<100000000000xi64>, tensor<i64>) -> tensor<i64>
  return %1 : tensor<i64>
}
"""


def _iota(n: int) -> str:
    return f"""
func.func @main() -> tensor<{n}xi32> {{
  %0 = stablehlo.iota dim = 0 : tensor<{n}xi32>
  return %0 : tensor<{n}xi32>
}}
"""


def _max_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


@pytest.mark.parametrize("backend", BACKENDS)
def test_huge_broadcast_fails_in_compile_without_allocating(backend):
    client = make_client(backend)
    before = _max_rss_mb()
    with pytest.raises(OpenHLOError) as info:
        client.compile(HUGE_BROADCAST)
    assert _max_rss_mb() - before < 200
    message = str(info.value)
    for part in ("stablehlo.broadcast_in_dim", "tensor<100000x1000000xf32>", "400000000000 bytes",
                 "OPENHLO_MAX_BUFFER_BYTES", "<string>:3:"):
        assert part in message, message
    assert error_code(info.value) == ErrorCode.RESOURCE_EXHAUSTED


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program, names", [(HUGE_ARGUMENT, "argument #0 of @main"),
                                            (HUGE_IOTA, "stablehlo.iota")])
def test_huge_argument_or_temporary_fails_in_compile(backend, program, names):
    before = _max_rss_mb()
    with pytest.raises(OpenHLOError, match=names):
        make_client(backend).compile(program)
    assert _max_rss_mb() - before < 200


@pytest.mark.parametrize("backend", BACKENDS)
def test_limit_is_read_from_the_environment(backend, monkeypatch):
    monkeypatch.setenv("OPENHLO_MAX_BUFFER_BYTES", "1024")
    client = make_client(backend)
    exe = client.compile(_iota(256))  # exactly 1024 bytes: allowed, and runs
    np.testing.assert_array_equal(exe()[0], np.arange(256, dtype=np.int32))
    with pytest.raises(OpenHLOError, match="1028 bytes .* limit of 1024 bytes"):
        client.compile(_iota(257))


# 2^29 f32 = 2 GiB: within the buffer limit of a machine with more memory, over the default
# constant limit (1 GiB); a splat costs one element in the IR but a backend materializes it.
BIG_SPLAT_CONSTANT = """
func.func @main() -> tensor<f32> {
  %c = stablehlo.constant dense<1.0> : tensor<536870912xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %0 = stablehlo.reduce(%c init: %z) applies stablehlo.add across dimensions = [0]
      : (tensor<536870912xf32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_constant_over_the_constant_limit_fails_in_compile(backend, monkeypatch):
    monkeypatch.setenv("OPENHLO_MAX_BUFFER_BYTES", str(4 << 30))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(OpenHLOError, match=r"3:3: 'stablehlo.constant': constant "
                                           r"tensor<536870912xf32> needs 2147483648 bytes, "
                                           r"more than the limit of 1073741824 "
                                           r"\(OPENHLO_MAX_CONSTANT_BYTES\)") as info:
        make_client(backend).compile(BIG_SPLAT_CONSTANT)
    assert error_code(info.value) == ErrorCode.RESOURCE_EXHAUSTED
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 200 * 1024
