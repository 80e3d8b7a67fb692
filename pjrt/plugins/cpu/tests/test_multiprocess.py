"""A cpu client over 2 processes x 2 devices (gloo on the loopback address): collectives
whose groups span processes (async start/done pairs too), and a partitioned program, give the
interpreter's results on 4 devices in one process; large all-reduces give numpy's sums in group order; a process that
leaves early makes the other fail, naming it.

The processes are started by pjrt.distributed.launch (bounded in time, all stopped) and
run multiprocess_worker.py, which runs every program below in one client, in name order.
"""
from __future__ import annotations

import os
import pickle
import sys

import numpy as np
import pytest

import pjrt
from pjrt.api import CompileOptions
from pjrt.plugins.cpu.native_module import native
from stablehlo.text import parse_module
from tools.random_inputs import random_arguments

needs_gloo = pytest.mark.skipif(not native().HAVE_GLOO, reason="built without gloo")

PROCESSES, DEVICES = 2, 2  # instance k runs in process k // DEVICES
INSTANCES = PROCESSES * DEVICES
LAUNCH_TIMEOUT_S = 240.0


def _replicated(body: str, params: str, results: str) -> str:
    return f"""module attributes {{mhlo.num_replicas = {INSTANCES} : i32}} {{
func.func @main({params}) -> ({results}) {{
{body}
}}
}}"""


def _sum(type_: str) -> str:
    return f"""({{
    ^bb0(%a: tensor<{type_}>, %b: tensor<{type_}>):
      %c = stablehlo.add %a, %b : tensor<{type_}>
      stablehlo.return %c : tensor<{type_}>
  }})"""


def _groups(groups: list) -> str:
    rows = ", ".join(str(g) for g in groups)
    return f"dense<[{rows}]> : tensor<{len(groups)}x{len(groups[0])}xi64>"


def _all_reduce(type_: str, groups: list, shape: str = "3x5") -> str:
    t = f"tensor<{shape}x{type_}>"
    return _replicated(f"""  %r = "stablehlo.all_reduce"(%x) {_sum(type_)}
      {{replica_groups = {_groups(groups)}}} : ({t}) -> {t}
  return %r : {t}""", f"%x: {t}", t)


PROGRAMS = {
    "all_reduce_f32.mlir": _all_reduce("f32", [[0, 1, 2, 3]]),
    "all_reduce_bf16.mlir": _all_reduce("bf16", [[0, 2], [1, 3]]),
    "all_reduce_f16.mlir": _all_reduce("f16", [[3, 1, 2, 0]]),
    "all_reduce_i32.mlir": _all_reduce("i32", [[0, 3], [2, 1]]),
    # groups inside one process, in a multi-process execution
    "all_reduce_local_groups.mlir": _all_reduce("f32", [[0, 1], [2, 3]]),
    # 8 MiB: many chunks along the processes (checked against numpy, not the interpreter);
    # f32 over 4 members keeps one chain, i32 and the f32 pairs rotate it per chunk
    "all_reduce_large_f32.mlir": _all_reduce("f32", [[0, 1, 2, 3]], "1024x2048"),
    "all_reduce_large_i32.mlir": _all_reduce("i32", [[2, 3, 0, 1]], "1024x2048"),
    "all_reduce_large_pairs_f32.mlir": _all_reduce("f32", [[0, 2], [3, 1]], "1024x2048"),
    "all_gather.mlir": _replicated("""  %r = "stablehlo.all_gather"(%x) {all_gather_dim = 1 : i64,
      replica_groups = dense<[[0, 2, 1, 3]]> : tensor<1x4xi64>}
      : (tensor<2x3xf32>) -> tensor<2x12xf32>
  return %r : tensor<2x12xf32>""", "%x: tensor<2x3xf32>", "tensor<2x12xf32>"),
    "reduce_scatter.mlir": _replicated(f"""  %r = "stablehlo.reduce_scatter"(%x) {_sum("f32")}
      {{scatter_dimension = 0 : i64, replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}}
      : (tensor<8x3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>""", "%x: tensor<8x3xf32>", "tensor<2x3xf32>"),
    # two operands, as reduce-scatter-combiner makes them (xla_core/spmd/combiner.py)
    "reduce_scatter_variadic.mlir": _replicated(f"""  %r:2 = "stablehlo.reduce_scatter"(%x, %y)
      {_sum("f32")} {{scatter_dimension = 0 : i64,
      replica_groups = dense<[[2, 0, 3, 1]]> : tensor<1x4xi64>}}
      : (tensor<8x3xf32>, tensor<4x2xf32>) -> (tensor<2x3xf32>, tensor<1x2xf32>)
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<1x2xf32>""",
                                                "%x: tensor<8x3xf32>, %y: tensor<4x2xf32>",
                                                "tensor<2x3xf32>, tensor<1x2xf32>"),
    "all_to_all.mlir": _replicated("""  %r = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64,
      concat_dimension = 1 : i64, split_count = 4 : i64,
      replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>}
      : (tensor<4x2xi32>) -> tensor<1x8xi32>
  return %r : tensor<1x8xi32>""", "%x: tensor<4x2xi32>", "tensor<1x8xi32>"),
    "collective_permute.mlir": _replicated("""  %r = "stablehlo.collective_permute"(%x) {
      source_target_pairs = dense<[[0, 2], [2, 1], [1, 3], [3, 0]]> : tensor<4x2xi64>}
      : (tensor<3xf32>) -> tensor<3xf32>
  return %r : tensor<3xf32>""", "%x: tensor<3xf32>", "tensor<3xf32>"),
    "collective_broadcast.mlir": _replicated("""  %r = "stablehlo.collective_broadcast"(%x) {
      replica_groups = dense<[[2, 0, 1, 3]]> : tensor<1x4xi64>}
      : (tensor<2x2xf16>) -> tensor<2x2xf16>
  return %r : tensor<2x2xf16>""", "%x: tensor<2x2xf16>", "tensor<2x2xf16>"),
    # a local op on the interpreter (argmax: a reduce of two values the native executor
    # has no kernel for) between native collectives and replica_id across processes
    "local_fallback.mlir": _replicated(f"""  %i = stablehlo.iota dim = 1 : tensor<3x5xi32>
  %ninf = stablehlo.constant dense<0xFF800000> : tensor<f32>
  %z = stablehlo.constant dense<0> : tensor<i32>
  %m:2 = stablehlo.reduce(%x init: %ninf), (%i init: %z) across dimensions = [1]
      : (tensor<3x5xf32>, tensor<3x5xi32>, tensor<f32>, tensor<i32>)
        -> (tensor<3xf32>, tensor<3xi32>)
   reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<i32>, %d: tensor<i32>) {{
    %gt = stablehlo.compare GT, %a, %c : (tensor<f32>, tensor<f32>) -> tensor<i1>
    %v = stablehlo.select %gt, %a, %c : tensor<i1>, tensor<f32>
    %j = stablehlo.select %gt, %b, %d : tensor<i1>, tensor<i32>
    stablehlo.return %v, %j : tensor<f32>, tensor<i32>
  }}
  %s = "stablehlo.all_reduce"(%m#0) {_sum("f32")}
      {{replica_groups = {_groups([[0, 1, 2, 3]])}}} : (tensor<3xf32>) -> tensor<3xf32>
  %id = stablehlo.replica_id : tensor<ui32>
  %idi = stablehlo.convert %id : (tensor<ui32>) -> tensor<i32>
  %idb = stablehlo.broadcast_in_dim %idi, dims = [] : (tensor<i32>) -> tensor<3xi32>
  %t = stablehlo.add %m#1, %idb : tensor<3xi32>
  return %s, %t : tensor<3xf32>, tensor<3xi32>""", "%x: tensor<3x5xf32>",
                                       "tensor<3xf32>, tensor<3xi32>"),
    # partitioned: the contracting dimension is sharded, so the partitioner all-reduces
    "sharded_dot.mlir": f"""module attributes {{mhlo.num_partitions = {INSTANCES} : i32}} {{
sdy.mesh @mesh = <["x"={INSTANCES}]>
func.func public @main(
    %a: tensor<8x16xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{}}, {{"x"}}]>}},
    %b: tensor<16x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}, {{}}]>}})
    -> (tensor<8x8xf32> {{sdy.sharding = #sdy.sharding<@mesh, [{{"x"}}, {{}}]>}}) {{
  %0 = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] :
      (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}}
}}""",
}


# Async collectives across processes: two pairs in flight (an all-reduce and an all-gather
# whose groups interleave the processes) with compute between, run on each instance's
# communication thread.
PROGRAMS["async_two_in_flight.mlir"] = _replicated(f"""  %h1 = "openhlo.async_start"(%x) ({{
  ^bb0(%a: tensor<3x5xf32>):
    %r = "stablehlo.all_reduce"(%a) {_sum("f32")}
        {{replica_groups = {_groups([[0, 2, 1, 3]])}}} : (tensor<3x5xf32>) -> tensor<3x5xf32>
    stablehlo.return %r : tensor<3x5xf32>
  }}) : (tensor<3x5xf32>) -> !openhlo.future<tensor<3x5xf32>>
  %y = stablehlo.multiply %x, %x : tensor<3x5xf32>
  %h2 = "openhlo.async_start"(%y) ({{
  ^bb0(%a: tensor<3x5xf32>):
    %r = "stablehlo.all_gather"(%a) {{all_gather_dim = 0 : i64,
        replica_groups = {_groups([[3, 0], [1, 2]])}}} : (tensor<3x5xf32>) -> tensor<6x5xf32>
    stablehlo.return %r : tensor<6x5xf32>
  }}) : (tensor<3x5xf32>) -> !openhlo.future<tensor<6x5xf32>>
  %z = stablehlo.sine %y : tensor<3x5xf32>
  %d1 = "openhlo.async_done"(%h1) : (!openhlo.future<tensor<3x5xf32>>) -> tensor<3x5xf32>
  %w = stablehlo.add %d1, %z : tensor<3x5xf32>
  %d2 = "openhlo.async_done"(%h2) : (!openhlo.future<tensor<6x5xf32>>) -> tensor<6x5xf32>
  return %w, %d2 : tensor<3x5xf32>, tensor<6x5xf32>""", "%x: tensor<3x5xf32>",
                                                   "tensor<3x5xf32>, tensor<6x5xf32>")


# Every element type the native runtime holds, across processes: an all-reduce (add; logical
# or for i1) whose group interleaves the processes, and an all-gather (f8E4M3FN is raw bytes
# to the runtime: gathered, not reduced).
EVERY_DTYPE = ("f64", "i1", "i8", "i16", "i64", "ui8", "ui16", "ui32", "ui64", "complex<f32>",
               "complex<f64>")
for _type in EVERY_DTYPE:
    _name = _type.replace("<", "_").replace(">", "")
    PROGRAMS[f"dtype_all_reduce_{_name}.mlir"] = _all_reduce(_type, [[0, 2, 1, 3]], "2x3")
for _type in EVERY_DTYPE + ("f8E4M3FN",):
    _name = _type.replace("<", "_").replace(">", "")
    PROGRAMS[f"dtype_all_gather_{_name}.mlir"] = _replicated(f"""  %r = "stablehlo.all_gather"(%x)
      {{all_gather_dim = 0 : i64, replica_groups = {_groups([[3, 1, 0, 2]])}}}
      : (tensor<2x3x{_type}>) -> tensor<8x3x{_type}>
  return %r : tensor<8x3x{_type}>""", f"%x: tensor<2x3x{_type}>", f"tensor<8x3x{_type}>")


def _launch(tmp_path, programs: dict, *extra: str, timeout_s: float = LAUNCH_TIMEOUT_S):
    from pjrt.distributed.launch import launch
    source, out = tmp_path / "programs", tmp_path / "out"
    source.mkdir()
    out.mkdir()
    for name, text in programs.items():
        (source / name).write_text(text)
    root = os.path.dirname(os.path.dirname(os.path.abspath(pjrt.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    launch([sys.executable, "-m", "pjrt.plugins.cpu.tests.multiprocess_worker", str(source),
            str(out), str(DEVICES), *extra], PROCESSES, timeout_s, env=env, cwd=root)
    return out


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every program's results from one launch of the processes."""
    return _launch(tmp_path_factory.mktemp("multiprocess"), PROGRAMS)


def _load(path) -> list:
    with open(path, "rb") as f:
        return pickle.load(f)


def _assert_same(got: list, want: list, what: str) -> None:
    assert len(got) == len(want), what
    for j, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, (what, j, a.dtype, b.dtype)
        np.testing.assert_array_equal(a, b, err_msg=f"{what}, result {j}")


LARGE = {  # program: its groups
    "all_reduce_large_f32.mlir": [[0, 1, 2, 3]],
    "all_reduce_large_i32.mlir": [[2, 3, 0, 1]],
    "all_reduce_large_pairs_f32.mlir": [[0, 2], [3, 1]],
}


@needs_gloo
@pytest.mark.parametrize("name", [n for n in PROGRAMS
                                  if n != "sharded_dot.mlir" and n not in LARGE])
def test_collectives_across_processes_match_the_interpreter(results, name):
    reference = pjrt.make_client("interpreter", num_devices=INSTANCES)
    exe = reference.compile(PROGRAMS[name])
    args = [random_arguments(exe.parameter_types, seed=k) for k in range(INSTANCES)]
    want = [[b.to_numpy() for b in out] for out in exe.execute_sharded(args)]
    for k in range(INSTANCES):
        _assert_same(_load(results / f"{name}.{k}.pkl"), want[k], f"{name}, instance {k}")


@needs_gloo
@pytest.mark.parametrize("name", sorted(LARGE))
def test_a_large_all_reduce_across_processes_sums_in_group_order(results, name):
    """Bit for bit numpy's elementwise sum folded in group order ((x0 + x1) + x2) + x3 (float
    rounding included; int32 wraps): the partial sums travel along the processes in chunks."""
    text = PROGRAMS[name]
    types = list(parse_module(text).lookup("main").type.inputs)
    args = [random_arguments(types, seed=k)[0] for k in range(INSTANCES)]
    for group in LARGE[name]:
        want = args[group[0]]
        for k in group[1:]:
            want = want + args[k]
        assert want.nbytes == 8 * 1024 * 1024 and want.dtype == args[0].dtype
        for k in group:
            _assert_same(_load(results / f"{name}.{k}.pkl"), [want], f"{name}, instance {k}")


@needs_gloo
def test_partitioned_program_across_processes_matches_one_process(results):
    """Bit for bit the cpu backend's run on 4 devices in one process; the interpreter's
    within float rounding (its dot sums in another order than the cpu backend's BLAS)."""
    text = PROGRAMS["sharded_dot.mlir"]
    types = list(parse_module(text).lookup("main").type.inputs)
    args = random_arguments(types, seed=0)
    got = _load(results / "sharded_dot.mlir.pkl")
    for backend in ("cpu", "interpreter"):
        client = pjrt.make_client(backend, num_devices=INSTANCES)
        want = client.compile(text, CompileOptions(num_partitions=INSTANCES)).execute_global(*args)
        if backend == "cpu":
            _assert_same(got, want, "sharded_dot")
        else:
            np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], args[0] @ args[1], rtol=1e-5, atol=1e-5)


@needs_gloo
def test_a_process_that_leaves_makes_the_other_fail_naming_it(tmp_path, monkeypatch):
    from pjrt.errors import ExecutionError
    monkeypatch.setenv("OPENHLO_COLLECTIVE_TIMEOUT_S", "5")
    programs = {"a.mlir": PROGRAMS["all_reduce_f32.mlir"],
                "b.mlir": PROGRAMS["all_gather.mlir"]}
    # Process 1 runs the first collective with process 0, then exits before the second.
    with pytest.raises(ExecutionError) as failed:
        _launch(tmp_path, programs, "1:b.mlir", timeout_s=120.0)
    message = str(failed.value)
    assert message.startswith("process 0 of 2 failed"), message
    assert "process(es) [1] of [0, 1] did not arrive" in message, message
    assert "all_gather" in message, message


def test_without_gloo_a_multi_process_client_is_unimplemented(monkeypatch):
    from pjrt.distributed.options import DistributedOptions
    from pjrt.distributed.store import TcpStore
    from pjrt.errors import PluginError
    monkeypatch.setattr(native(), "HAVE_GLOO", False)
    store = TcpStore.serve()
    try:
        with pytest.raises(PluginError, match="UnimplementedError: a multi-process cpu client "
                                              "needs gloo: install Debian's libgloo-dev"):
            pjrt.make_client("cpu", num_devices=1, distributed=DistributedOptions(
                process_index=0, num_processes=2, store=store))
    finally:
        store.close()


@needs_gloo
def test_a_collective_on_the_interpreter_is_refused_across_processes(tmp_path):
    """An all-reduce whose region has no native kernel (a subtraction) would meet its peers
    in the interpreter's process grid, which spans one process: every process refuses it,
    naming the op, instead of waiting for peers that never come."""
    from pjrt.errors import ExecutionError
    subtract = _all_reduce("f32", [[0, 1, 2, 3]]).replace("stablehlo.add", "stablehlo.subtract")
    with pytest.raises(ExecutionError) as failed:
        _launch(tmp_path, {"subtract.mlir": subtract}, timeout_s=120.0)
    message = str(failed.value)
    assert "collectives that run on the interpreter" in message, message
    assert "stablehlo.all_reduce" in message, message
