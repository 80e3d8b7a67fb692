"""openhlo.async_start / async_done: print-parse round trips, the verifier's pairing rules,
and the interpreter (the pair gives the synchronous collective's results)."""
from __future__ import annotations

import numpy as np
import pytest

from stablehlo.errors import VerificationError
from stablehlo.text import parse_module
from stablehlo.verify import verify_module

SUM = """({
      ^bb0(%p: tensor<f32>, %q: tensor<f32>):
        %s = stablehlo.add %p, %q : tensor<f32>
        stablehlo.return %s : tensor<f32>
      })"""
GROUPS = "replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>"
# kind -> (collective text over %a: tensor<4x2xf32>, its result type)
COLLECTIVES = {
    "all_reduce": (f'"stablehlo.all_reduce"(%a) {SUM} {{{GROUPS}}}', "tensor<4x2xf32>"),
    "all_gather": (f'"stablehlo.all_gather"(%a) {{all_gather_dim = 1 : i64, {GROUPS}}}',
                   "tensor<4x4xf32>"),
    "reduce_scatter": (f'"stablehlo.reduce_scatter"(%a) {SUM} {{scatter_dimension = 0 : i64, '
                       f'{GROUPS}}}', "tensor<2x2xf32>"),
    "all_to_all": (f'"stablehlo.all_to_all"(%a) {{split_dimension = 0 : i64, concat_dimension '
                   f'= 1 : i64, split_count = 2 : i64, {GROUPS}}}', "tensor<2x4xf32>"),
    "collective_permute": ('"stablehlo.collective_permute"(%a) {source_target_pairs = '
                           'dense<[[0, 1], [1, 0]]> : tensor<2x2xi64>}', "tensor<4x2xf32>"),
}
T = "tensor<4x2xf32>"


def pair(kind: str, between: str = "", done: str = "%d") -> str:
    collective, result = COLLECTIVES[kind]
    return f"""
  %h = "openhlo.async_start"(%x) ({{
  ^bb0(%a: {T}):
    %r = {collective} : ({T}) -> {result}
    stablehlo.return %r : {result}
  }}) : ({T}) -> !openhlo.future<{result}>
{between}
  {done} = "openhlo.async_done"(%h) : (!openhlo.future<{result}>) -> {result}"""


def program(kind: str, body: str) -> str:
    result = COLLECTIVES[kind][1]
    return f"""func.func @main(%x: {T}) -> {result} {{{body}
  return %d : {result}
}}"""


@pytest.mark.parametrize("kind", sorted(COLLECTIVES))
def test_every_kind_round_trips_and_verifies(kind):
    text = program(kind, pair(kind, f"  %y = stablehlo.negate %x : {T}"))
    module = parse_module(text)
    verify_module(module)
    printed = str(module)
    assert "!openhlo.future<" in printed and f'"stablehlo.{kind}"' in printed
    again = parse_module(printed)
    verify_module(again)
    assert str(again) == printed


def _rejects(text: str, match: str) -> None:
    with pytest.raises(VerificationError, match=match):
        verify_module(parse_module(text))


def test_a_handle_used_twice_is_rejected():
    body = pair("all_reduce") + f"""
  %e = "openhlo.async_done"(%h) : (!openhlo.future<{T}>) -> {T}"""
    _rejects(program("all_reduce", body), r"async_start'.*used by exactly one "
                                          r"openhlo.async_done in the same block")


def test_a_start_without_done_is_rejected():
    text = f"""func.func @main(%x: {T}) -> {T} {{{pair("all_reduce", done="%unused")}
  %h2 = "openhlo.async_start"(%x) ({{
  ^bb0(%a: {T}):
    %r = {COLLECTIVES["all_reduce"][0]} : ({T}) -> {T}
    stablehlo.return %r : {T}
  }}) : ({T}) -> !openhlo.future<{T}>
  return %unused : {T}
}}"""
    _rejects(text, r"used by: nothing")


def test_a_done_in_another_block_is_rejected():
    text = f"""func.func @main(%x: {T}, %c: tensor<i1>) -> {T} {{
  %h = "openhlo.async_start"(%x) ({{
  ^bb0(%a: {T}):
    %r = {COLLECTIVES["all_reduce"][0]} : ({T}) -> {T}
    stablehlo.return %r : {T}
  }}) : ({T}) -> !openhlo.future<{T}>
  %d = "stablehlo.if"(%c) ({{
    %e = "openhlo.async_done"(%h) : (!openhlo.future<{T}>) -> {T}
    stablehlo.return %e : {T}
  }}, {{
    stablehlo.return %x : {T}
  }}) : (tensor<i1>) -> {T}
  return %d : {T}
}}"""
    _rejects(text, r"exactly one openhlo.async_done in the same block, used by: .*:12:5")


def test_a_future_from_elsewhere_is_rejected():
    text = f"""func.func @main(%h: !openhlo.future<{T}>) -> {T} {{
  %d = "openhlo.async_done"(%h) : (!openhlo.future<{T}>) -> {T}
  return %d : {T}
}}"""
    _rejects(text, r"result of a openhlo.async_start")


def test_region_must_hold_one_collective():
    text = program("all_reduce", pair("all_reduce")).replace(
        "    stablehlo.return %r", f"    %n = stablehlo.negate %r : {T}\n    stablehlo.return %r")
    _rejects(text, r"exactly one collective .* found stablehlo.all_reduce, stablehlo.negate")
    not_collective = program("all_reduce", pair("all_reduce")).replace(
        COLLECTIVES["all_reduce"][0], "stablehlo.negate %a")
    _rejects(not_collective, r"exactly one collective")


def test_types_must_match_the_collective():
    wrong_future = program("all_gather", pair("all_gather")).replace(
        "!openhlo.future<tensor<4x4xf32>>", "!openhlo.future<tensor<4x2xf32>>")
    _rejects(wrong_future, r"result has type !openhlo.future<tensor<4x2xf32>>, expected "
                           r"!openhlo.future<tensor<4x4xf32>>")
    wrong_done = program("all_gather", pair("all_gather")).replace(
        "(!openhlo.future<tensor<4x4xf32>>) -> tensor<4x4xf32>",
        "(!openhlo.future<tensor<4x4xf32>>) -> tensor<4x2xf32>").replace(
        "-> tensor<4x4xf32> {", "-> tensor<4x2xf32> {").replace(
        "return %d : tensor<4x4xf32>", "return %d : tensor<4x2xf32>")
    _rejects(wrong_done, r"results have types \(tensor<4x2xf32>\), expected \(tensor<4x4xf32>\)")


@pytest.mark.parametrize("kind", sorted(COLLECTIVES))
def test_interpreter_gives_the_synchronous_results(kind):
    import pjrt
    from pjrt.api import CompileOptions
    collective, result = COLLECTIVES[kind]
    sync = f"""func.func @main(%x: {T}) -> {result} {{
  %d = {collective.replace("(%a)", "(%x)")} : ({T}) -> {result}
  return %d : {result}
}}"""
    client = pjrt.make_client("interpreter", num_devices=2)
    args = [[np.arange(8, dtype=np.float32).reshape(4, 2) * (k + 1) + k] for k in range(2)]
    outs = {}
    for name, text in (("sync", sync), ("async", program(kind, pair(kind)))):
        exe = client.compile(text, CompileOptions(num_replicas=2))
        outs[name] = [o[0].to_numpy() for o in exe.execute_sharded(args)]
    for a, b in zip(outs["async"], outs["sync"]):
        np.testing.assert_array_equal(a, b)
