"""Programs that could only fail far from their cause fail in compile, on every backend,
naming the op: device-to-device send/recv pairs that can never meet (instead of waiting for
the collective timeout at run time), and calls of a function declared without a body
(instead of an error inside a backend's lowering)."""
from __future__ import annotations

import numpy as np
import pytest

from pjrt import make_client
from stablehlo.errors import VerificationError

BACKENDS = ("cpu", "interpreter")


def _program(send_channel: int, recv_channel: int, recv_type: str = "tensor<2xf32>") -> str:
    return f"""
func.func @main(%x: tensor<2xf32>, %t: !stablehlo.token) -> {recv_type} {{
  %s = "stablehlo.send"(%x, %t) {{
    channel_handle = #stablehlo.channel_handle<handle = {send_channel}, type = 1>,
    is_host_transfer = false
  }} : (tensor<2xf32>, !stablehlo.token) -> !stablehlo.token
  %v, %t2 = "stablehlo.recv"(%s) {{
    channel_handle = #stablehlo.channel_handle<handle = {recv_channel}, type = 1>,
    is_host_transfer = false
  }} : (!stablehlo.token) -> ({recv_type}, !stablehlo.token)
  return %v : {recv_type}
}}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_recv_without_send_on_its_channel_fails_in_compile(backend):
    with pytest.raises(VerificationError,
                       match=r"<string>:7:\d+: 'stablehlo.recv'.*channel 2 has no stablehlo.send"):
        make_client(backend).compile(_program(1, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_send_and_recv_types_must_agree(backend):
    with pytest.raises(VerificationError,
                       match=r"<string>:7:\d+: 'stablehlo.recv': .*expects \(tensor<3xf32>\) but "
                             r"<string>:3:\d+: 'stablehlo.send' sends \(tensor<2xf32>\)"):
        make_client(backend).compile(_program(1, 1, "tensor<3xf32>"))


def test_matched_pair_compiles_and_runs():
    from stablehlo.interpreter.values import TOKEN
    exe = make_client("interpreter").compile(_program(4, 4))
    x = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(exe(x, TOKEN)[0], x)


CALLS_A_DECLARATION = """
func.func private @f(%a: tensor<f32>) -> tensor<f32>
func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %0 = func.call @f(%a) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_call_of_a_declaration_fails_in_compile_naming_the_call(backend):
    with pytest.raises(VerificationError, match=r"4:3: 'func.call': calls @f, which is a "
                                                r"declaration without a body"):
        make_client(backend).compile(CALLS_A_DECLARATION)


HOST_RECV_WITHOUT_SEND = """
func.func @main(%t: !stablehlo.token) -> tensor<2xi64> {
  %r, %t2 = "stablehlo.recv"(%t) {
    channel_handle = #stablehlo.channel_handle<handle = 1, type = 3>,
    is_host_transfer = true
  } : (!stablehlo.token) -> (tensor<2xi64>, !stablehlo.token)
  return %r : tensor<2xi64>
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_host_transfer_recv_without_a_send_fails_in_compile(backend):
    # Found by the fuzzer: the interpreter waited for the collective timeout. No runtime of
    # OpenHLO has a host side that would send on the channel.
    with pytest.raises(VerificationError, match=r"3:3: 'stablehlo.recv': recv on channel 1 "
                                                r"has no stablehlo.send"):
        make_client(backend).compile(HOST_RECV_WITHOUT_SEND)
