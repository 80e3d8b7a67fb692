"""Async collectives on the cpu backend: every start/done program gives the interpreter's
results bit for bit on 8 virtual devices (the five kinds, two pairs in flight, a pair in a
loop), no collective falls back to the interpreter, and the communication thread really
runs a started collective while the instance goes on (a program that only completes if it
does).
"""
from __future__ import annotations

import numpy as np
import pytest

import pjrt
from pjrt.api import CompileOptions
from xla_core.testing.collective_text import three_trip_loop

DEVICES = 8
GROUP = "replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>"
SUM = """({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    })"""
T = "tensor<8x2xf32>"
PERMUTE = ", ".join(f"[{k}, {(k + 3) % DEVICES}]" for k in range(DEVICES))
# kind -> (collective over %a: T, result type)
COLLECTIVES = {
    "all_reduce": (f'"stablehlo.all_reduce"(%a) {SUM} {{{GROUP}}}', T),
    "all_gather": (f'"stablehlo.all_gather"(%a) {{all_gather_dim = 1 : i64, {GROUP}}}',
                   "tensor<8x16xf32>"),
    "reduce_scatter": (f'"stablehlo.reduce_scatter"(%a) {SUM} {{scatter_dimension = 0 : i64, '
                       f'{GROUP}}}', "tensor<1x2xf32>"),
    "all_to_all": (f'"stablehlo.all_to_all"(%a) {{split_dimension = 0 : i64, concat_dimension '
                   f'= 1 : i64, split_count = 8 : i64, {GROUP}}}', "tensor<1x16xf32>"),
    "collective_permute": (f'"stablehlo.collective_permute"(%a) {{source_target_pairs = '
                           f'dense<[{PERMUTE}]> : tensor<8x2xi64>}}', T),
}


def start(kind: str, handle: str, operand: str, indent: str = "  ") -> str:
    collective, result = COLLECTIVES[kind]
    return f"""{indent}{handle} = "openhlo.async_start"({operand}) ({{
{indent}^bb0(%a: {T}):
{indent}  %r = {collective} : ({T}) -> {result}
{indent}  stablehlo.return %r : {result}
{indent}}}) : ({T}) -> !openhlo.future<{result}>"""


def done(kind: str, result: str, handle: str, indent: str = "  ") -> str:
    t = COLLECTIVES[kind][1]
    return f'{indent}{result} = "openhlo.async_done"({handle}) : (!openhlo.future<{t}>) -> {t}'


def one_pair(kind: str) -> str:
    t = COLLECTIVES[kind][1]
    return f"""func.func @main(%x: {T}) -> ({t}, {T}) {{
{start(kind, "%h", "%x")}
  %y = stablehlo.multiply %x, %x : {T}
  %z = stablehlo.sine %y : {T}
{done(kind, "%d", "%h")}
  return %d, %z : {t}, {T}
}}"""


TWO_IN_FLIGHT = f"""func.func @main(%x: {T}) -> ({T}, tensor<8x16xf32>, {T}) {{
{start("all_reduce", "%h1", "%x")}
  %y = stablehlo.multiply %x, %x : {T}
{start("all_gather", "%h2", "%y")}
  %z = stablehlo.add %y, %x : {T}
{done("all_reduce", "%d1", "%h1")}
  %w = stablehlo.multiply %d1, %z : {T}
{done("all_gather", "%d2", "%h2")}
  return %w, %d2, %x : {T}, tensor<8x16xf32>, {T}
}}"""

IN_A_LOOP = f"""func.func @main(%x: {T}) -> {T} {{
{three_trip_loop(T)}
{start("all_reduce", "%h", "%v", "    ")}
    %s = stablehlo.sine %v : {T}
    %one = stablehlo.constant dense<1> : tensor<i32>
    %j = stablehlo.add %i, %one : tensor<i32>
{done("all_reduce", "%d", "%h", "    ")}
    %next = stablehlo.add %d, %s : {T}
    stablehlo.return %j, %next : tensor<i32>, {T}
  }}
  return %r#1 : {T}
}}"""

PROGRAMS = {**{f"pair_{kind}": one_pair(kind) for kind in COLLECTIVES},
            "two_in_flight": TWO_IN_FLIGHT, "in_a_loop": IN_A_LOOP}


@pytest.fixture(scope="module")
def clients():
    return (pjrt.make_client("cpu", num_devices=DEVICES),
            pjrt.make_client("interpreter", num_devices=DEVICES))


def _run(client, text, args):
    exe = client.compile(text, CompileOptions(num_replicas=DEVICES))
    return exe, [[b.to_numpy() for b in out] for out in exe.execute_sharded(args)]


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_async_programs_match_the_interpreter_bit_for_bit(clients, name):
    cpu, reference = clients
    rng = np.random.default_rng(7)
    args = [[rng.standard_normal((8, 2)).astype(np.float32)] for _ in range(DEVICES)]
    exe, got = _run(cpu, PROGRAMS[name], args)
    assert exe.fallbacks == []
    _, want = _run(reference, PROGRAMS[name], args)
    for k, (g, w) in enumerate(zip(got, want)):
        for j, (a, b) in enumerate(zip(g, w)):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b, err_msg=f"{name}: device {k}, result {j}")


# Device 0 starts an all-reduce with device 1, then sends device 1 the value it waits for
# before its own part of the all-reduce. Run synchronously, device 0 would wait in the
# all-reduce for device 1, which waits for the send: the program completes only because
# device 0's communication thread waits while device 0 goes on to the send.
PAIR = "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"
HELD_BACK = f"""module {{
func.func @first(%x: tensor<4xf32>, %t: !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token) {{
  %h = "openhlo.async_start"(%x) ({{
  ^bb0(%a: tensor<4xf32>):
    %r = "stablehlo.all_reduce"(%a) {SUM} {{{PAIR}}} : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.return %r : tensor<4xf32>
  }}) : (tensor<4xf32>) -> !openhlo.future<tensor<4xf32>>
  %s = "stablehlo.send"(%x, %t) {{
    channel_handle = #stablehlo.channel_handle<handle = 5, type = 2>, is_host_transfer = true
  }} : (tensor<4xf32>, !stablehlo.token) -> !stablehlo.token
  %d = "openhlo.async_done"(%h) : (!openhlo.future<tensor<4xf32>>) -> tensor<4xf32>
  return %d, %s : tensor<4xf32>, !stablehlo.token
}}
func.func @second(%x: tensor<4xf32>, %t: !stablehlo.token) -> (tensor<4xf32>, !stablehlo.token) {{
  %v, %t2 = "stablehlo.recv"(%t) {{
    channel_handle = #stablehlo.channel_handle<handle = 5, type = 3>, is_host_transfer = true
  }} : (!stablehlo.token) -> (tensor<4xf32>, !stablehlo.token)
  %y = stablehlo.add %x, %v : tensor<4xf32>
  %r = "stablehlo.all_reduce"(%y) {SUM} {{{PAIR}}} : (tensor<4xf32>) -> tensor<4xf32>
  return %r, %t2 : tensor<4xf32>, !stablehlo.token
}}
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {{
  %t = "stablehlo.create_token"() : () -> !stablehlo.token
  %r:4 = "interpreter.run_parallel"(%x, %t, %x, %t) {{programs = [[@first], [@second]]}}
      : (tensor<4xf32>, !stablehlo.token, tensor<4xf32>, !stablehlo.token)
      -> (tensor<4xf32>, !stablehlo.token, tensor<4xf32>, !stablehlo.token)
  return %r#0, %r#2 : tensor<4xf32>, tensor<4xf32>
}}
}}"""


def test_a_started_collective_waits_on_its_thread_while_the_instance_goes_on():
    cpu = pjrt.make_client("cpu")
    exe = cpu.compile(HELD_BACK)
    # the all-reduces are native (only send and recv, which use tokens, fall back)
    assert {f.op for f in exe.fallbacks} == {"stablehlo.send", "stablehlo.recv"}
    x = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    first, second = (b.to_numpy() for b in exe.execute([x]))
    np.testing.assert_array_equal(first, x + (x + x))
    np.testing.assert_array_equal(second, first)
