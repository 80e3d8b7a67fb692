"""Native collectives of the cpu backend (native/collectives.cc) against the interpreter.

Every program runs with execute_sharded on 8 virtual devices of both backends and the
results must be identical (the native reductions fold in the interpreter's order, so even
float sums agree bit for bit); ``exe.fallbacks`` must name no collective. Failures of one
instance must reach every instance at once, never hang.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

import pjrt
from pjrt.api import CompileOptions, ExecutionError
from pjrt.plugins.cpu.native_module import native
from pjrt.plugins.cpu.tests.kernel_check import run_kernel
from stablehlo.ir.ops.base import COLLECTIVE, OPS

DEVICES = 8


@pytest.fixture(scope="module")
def cpu():
    return pjrt.make_client("cpu", num_devices=DEVICES)


@pytest.fixture(scope="module")
def reference():
    return pjrt.make_client("interpreter", num_devices=DEVICES)


def _run(client, text, args_per_device, replicas, partitions):
    exe = client.compile(text, CompileOptions(num_replicas=replicas, num_partitions=partitions))
    outs = exe.execute_sharded(args_per_device)
    return exe, [[b.to_numpy() for b in out] for out in outs]


def _collective(name: str) -> bool:
    opdef = OPS.lookup(name)
    return opdef is not None and opdef.has(COLLECTIVE)


def check(cpu, reference, text, args_per_device, replicas=DEVICES, partitions=1,
          fallbacks=0):
    """Runs ``text`` on both backends; asserts identical results and that all collectives
    but ``fallbacks`` of them are native."""
    exe, got = _run(cpu, text, args_per_device, replicas, partitions)
    collective_fallbacks = [f for f in exe.fallbacks if _collective(f.op)]
    assert len(collective_fallbacks) == fallbacks, collective_fallbacks
    _, want = _run(reference, text, args_per_device, replicas, partitions)
    for k, (g, w) in enumerate(zip(got, want)):
        assert len(g) == len(w)
        for j, (a, b) in enumerate(zip(g, w)):
            assert a.dtype == b.dtype and a.shape == b.shape, (k, j)
            np.testing.assert_array_equal(a, b, err_msg=f"device {k}, result {j}")
    return got


def _inputs(shape, dtype, seed=0, count=DEVICES):
    rng = np.random.default_rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return [rng.integers(0, 2, shape).astype(bool) for _ in range(count)]
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return [rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True)
                .astype(dtype) for _ in range(count)]
    return [rng.standard_normal(shape).astype(dtype) for _ in range(count)]


def _groups(groups) -> str:
    if not groups:
        return "dense<> : tensor<0x0xi64>"
    rows = ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups)
    return f"dense<[{rows}]> : tensor<{len(groups)}x{len(groups[0])}xi64>"


def _channel(channel, use_global_ids=False) -> str:
    attrs = ""
    if channel is not None:
        attrs += f", channel_handle = #stablehlo.channel_handle<handle = {channel}, type = 0>"
    if use_global_ids:
        attrs += ", use_global_device_ids"
    return attrs


def _region(op, type) -> str:
    return f"""({{
      ^bb0(%a: tensor<{type}>, %b: tensor<{type}>):
        %c = {op} %a, %b : tensor<{type}>
        stablehlo.return %c : tensor<{type}>
    }})"""


def _all_reduce(type_, shape, groups, combiner="stablehlo.add", operands=1, extra=""):
    t = f"tensor<{'x'.join(map(str, shape))}x{type_}>" if shape else f"tensor<{type_}>"
    params = ", ".join(f"%x{i}: {t}" for i in range(operands))
    args = ", ".join(f"%x{i}" for i in range(operands))
    types = ", ".join([t] * operands)
    return f"""
func.func @main({params}) -> ({types}) {{
  %r:{operands} = "stablehlo.all_reduce"({args}) {_region(combiner, type_)}
      {{replica_groups = {_groups(groups)}{extra}}} : ({types}) -> ({types})
  return {', '.join(f'%r#{i}' for i in range(operands))} : {types}
}}"""


ALL = [list(range(8))]
PAIRS = [[0, 1], [2, 3], [4, 5], [6, 7]]
STRIDED = [[0, 2, 4, 6], [1, 3, 5, 7]]
SHUFFLED = [[3, 1, 2, 0], [7, 5, 6, 4]]


@pytest.mark.parametrize("groups", [ALL, PAIRS, STRIDED, SHUFFLED, []])
def test_all_reduce_groups(cpu, reference, groups):
    xs = _inputs((3, 5), np.float32)
    check(cpu, reference, _all_reduce("f32", (3, 5), groups), [[x] for x in xs])


@pytest.mark.parametrize("type_, dtype, combiner", [
    ("f32", np.float32, "stablehlo.maximum"), ("f64", np.float64, "stablehlo.minimum"),
    ("f32", np.float32, "stablehlo.multiply"), ("i32", np.int32, "stablehlo.multiply"),
    ("i8", np.int8, "stablehlo.add"), ("ui16", np.uint16, "stablehlo.minimum"),
    ("i64", np.int64, "stablehlo.xor"), ("ui8", np.uint8, "stablehlo.or"),
    ("i1", np.bool_, "stablehlo.and"), ("i1", np.bool_, "stablehlo.add"),
])
def test_all_reduce_combiners(cpu, reference, type_, dtype, combiner):
    xs = _inputs((4, 7), dtype, seed=1)
    if dtype == np.float32:
        xs[2][0, 0] = np.nan  # NaN propagates through maximum/minimum
        xs[5][1, :] = -0.0
    check(cpu, reference, _all_reduce(type_, (4, 7), STRIDED, combiner), [[x] for x in xs])


def test_all_reduce_of_two_operands_and_a_large_array(cpu, reference):
    xs = _inputs((40000,), np.float32, seed=2)
    ys = _inputs((40000,), np.float32, seed=3)
    check(cpu, reference, _all_reduce("f32", (40000,), SHUFFLED, operands=2),
          [[x, y] for x, y in zip(xs, ys)])


@pytest.mark.parametrize("groups, channel, global_ids", [
    ([[0, 1]], None, False),            # cross_replica: within each partition
    ([[0, 1]], 1, False),               # cross_replica_and_partition
    ([[0, 1, 2, 3], [4, 5, 6, 7]], 1, True),  # flattened ids
    ([[0, 5], [1, 4], [2, 7], [3, 6]], 2, True),
    ([], 1, False),
])
def test_all_reduce_with_partitions(cpu, reference, groups, channel, global_ids):
    xs = _inputs((6,), np.float32, seed=4)
    text = _all_reduce("f32", (6,), groups, extra=_channel(channel, global_ids))
    check(cpu, reference, text, [[x] for x in xs], replicas=2, partitions=4)


@pytest.mark.parametrize("dim, groups, partitions", [
    (0, PAIRS, 1), (1, STRIDED, 1), (0, SHUFFLED, 1), (1, [[1, 0, 3, 2], [5, 4, 7, 6]], 4)])
def test_all_gather(cpu, reference, dim, groups, partitions):
    # with partitions: flattened ids (channel and use_global_device_ids)
    size = len(groups[0])
    out_a = (3 * size, 4) if dim == 0 else (3, 4 * size)
    out_b = (2 * size, 4) if dim == 0 else (2, 4 * size)
    text = f"""
func.func @main(%x: tensor<3x4xf32>, %y: tensor<2x4xi16>) -> (tensor<{out_a[0]}x{out_a[1]}xf32>,
                                                            tensor<{out_b[0]}x{out_b[1]}xi16>) {{
  %r:2 = "stablehlo.all_gather"(%x, %y) {{all_gather_dim = {dim} : i64,
      replica_groups = {_groups(groups)}{_channel(1, True) if partitions > 1 else ""}}}
      : (tensor<3x4xf32>, tensor<2x4xi16>)
      -> (tensor<{out_a[0]}x{out_a[1]}xf32>, tensor<{out_b[0]}x{out_b[1]}xi16>)
  return %r#0, %r#1 : tensor<{out_a[0]}x{out_a[1]}xf32>, tensor<{out_b[0]}x{out_b[1]}xi16>
}}"""
    xs, ys = _inputs((3, 4), np.float32, 5), _inputs((2, 4), np.int16, 6)
    check(cpu, reference, text, [[x, y] for x, y in zip(xs, ys)],
          replicas=DEVICES // partitions, partitions=partitions)


@pytest.mark.parametrize("dim, groups, combiner", [
    (0, PAIRS, "stablehlo.add"), (1, STRIDED, "stablehlo.maximum"),
    (0, SHUFFLED, "stablehlo.add"), (0, ALL, "stablehlo.multiply")])
def test_reduce_scatter(cpu, reference, dim, groups, combiner):
    size = len(groups[0])
    shape = (8, 4) if dim == 0 else (3, 8)
    out = (8 // size, 4) if dim == 0 else (3, 8 // size)
    tin, tout = (f"tensor<{shape[0]}x{shape[1]}xf32>", f"tensor<{out[0]}x{out[1]}xf32>")
    text = f"""
func.func @main(%x: {tin}) -> {tout} {{
  %r = "stablehlo.reduce_scatter"(%x) {_region(combiner, "f32")}
      {{scatter_dimension = {dim} : i64, replica_groups = {_groups(groups)}}} : ({tin}) -> {tout}
  return %r : {tout}
}}"""
    check(cpu, reference, text, [[x] for x in _inputs(shape, np.float32, 7)])


@pytest.mark.parametrize("split, concat, groups, partitions", [
    (0, 1, STRIDED, 1), (1, 0, [[0, 1, 2, 3]], 4), (1, 1, SHUFFLED, 1)])
def test_all_to_all(cpu, reference, split, concat, groups, partitions):
    n = len(groups[0])
    shape = [8, 4]
    out = list(shape)
    out[split] //= n
    out[concat] *= n
    tin = f"tensor<{shape[0]}x{shape[1]}x{{}}>"
    tout = f"tensor<{out[0]}x{out[1]}x{{}}>"
    text = f"""
func.func @main(%x: {tin.format('i32')}, %y: {tin.format('bf16')})
    -> ({tout.format('i32')}, {tout.format('bf16')}) {{
  %r:2 = "stablehlo.all_to_all"(%x, %y) {{split_dimension = {split} : i64,
      concat_dimension = {concat} : i64, split_count = {n} : i64,
      replica_groups = {_groups(groups)}{_channel(1 if partitions > 1 else None)}}}
      : ({tin.format('i32')}, {tin.format('bf16')}) -> ({tout.format('i32')}, {tout.format('bf16')})
  return %r#0, %r#1 : {tout.format('i32')}, {tout.format('bf16')}
}}"""
    import ml_dtypes
    xs = _inputs(shape, np.int32, 8)
    ys = [y.astype(ml_dtypes.bfloat16) for y in _inputs(shape, np.float32, 9)]
    check(cpu, reference, text, [[x, y] for x, y in zip(xs, ys)],
          replicas=DEVICES // partitions, partitions=partitions)


@pytest.mark.parametrize("pairs, channel, partitions", [
    ([[0, 1], [1, 2], [2, 3], [3, 4], [4, 5], [5, 6], [6, 7], [7, 0]], None, 1),  # a ring
    ([[0, 3], [3, 0], [5, 5], [6, 2]], None, 1),  # some receive zeros, some take no part
    ([[0, 1], [1, 0]], None, 2),                  # replicas within each partition
    ([[0, 1], [1, 2], [2, 3]], 1, 4),            # partitions within each replica
])
def test_collective_permute(cpu, reference, pairs, channel, partitions):
    rows = ", ".join(f"[{s}, {t}]" for s, t in pairs)
    text = f"""
func.func @main(%x: tensor<2x3xcomplex<f32>>) -> tensor<2x3xcomplex<f32>> {{
  %r = "stablehlo.collective_permute"(%x) {{
      source_target_pairs = dense<[{rows}]> : tensor<{len(pairs)}x2xi64>{_channel(channel)}}}
      : (tensor<2x3xcomplex<f32>>) -> tensor<2x3xcomplex<f32>>
  return %r : tensor<2x3xcomplex<f32>>
}}"""
    xs = [(a + 1j * b).astype(np.complex64) for a, b in
          zip(_inputs((2, 3), np.float32, 10), _inputs((2, 3), np.float32, 11))]
    check(cpu, reference, text, [[x] for x in xs],
          replicas=DEVICES // partitions, partitions=partitions)


@pytest.mark.parametrize("groups, channel, partitions", [
    ([[2, 0, 1], [5, 4]], None, 1),   # instances 3, 6 and 7 are in no group: zeros
    ([[1, 0]], 1, 2)])
def test_collective_broadcast(cpu, reference, groups, channel, partitions):
    width = max(len(g) for g in groups)
    padded = [g + [-1] * (width - len(g)) for g in groups]
    text = f"""
func.func @main(%x: tensor<5xui64>) -> tensor<5xui64> {{
  %r = "stablehlo.collective_broadcast"(%x) {{
      replica_groups = {_groups(padded)}{_channel(channel)}}} : (tensor<5xui64>) -> tensor<5xui64>
  return %r : tensor<5xui64>
}}"""
    check(cpu, reference, text, [[x] for x in _inputs((5,), np.uint64, 12)],
          replicas=DEVICES // partitions, partitions=partitions)



def test_collective_broadcast_with_dynamic_roots(cpu, reference):
    # has_dynamic_root (an interpreter extension): root j of result j is read at run time
    text = """
func.func @main(%x: tensor<2xf32>, %y: tensor<3xi8>, %root: tensor<2xui8>)
    -> (tensor<2xf32>, tensor<3xi8>) {
  %r:2 = "stablehlo.collective_broadcast"(%x, %y, %root) {
      replica_groups = dense<[[0, 1, 2, 3], [7, 6, 5, 4]]> : tensor<2x4xi64>, has_dynamic_root}
      : (tensor<2xf32>, tensor<3xi8>, tensor<2xui8>) -> (tensor<2xf32>, tensor<3xi8>)
  return %r#0, %r#1 : tensor<2xf32>, tensor<3xi8>
}"""
    xs, ys = _inputs((2,), np.float32, 14), _inputs((3,), np.int8, 15)
    root = np.array([2, 1], np.uint8)
    check(cpu, reference, text, [[x, y, root] for x, y in zip(xs, ys)])

LOOP = """
func.func @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<i32>) {
  %zero = stablehlo.constant dense<0> : tensor<i32>
  %one = stablehlo.constant dense<1> : tensor<i32>
  %n = stablehlo.constant dense<5> : tensor<i32>
  %r:2 = stablehlo.while(%i = %zero, %v = %x) : tensor<i32>, tensor<4xf32>
    cond {
      %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %lt : tensor<i1>
    } do {
      %s = "stablehlo.all_reduce"(%v) ({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %c = stablehlo.maximum %a, %b : tensor<f32>
          stablehlo.return %c : tensor<f32>
      }) {replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}
          : (tensor<4xf32>) -> tensor<4xf32>
      %p = "stablehlo.collective_permute"(%s) {
          source_target_pairs = dense<[[0, 4], [4, 0], [1, 5], [5, 2]]> : tensor<4x2xi64>}
          : (tensor<4xf32>) -> tensor<4xf32>
      %w = stablehlo.add %p, %v : tensor<4xf32>
      %j = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %j, %w : tensor<i32>, tensor<4xf32>
    }
  return %r#1, %r#0 : tensor<4xf32>, tensor<i32>
}"""


def test_collectives_in_a_while_loop(cpu, reference):
    check(cpu, reference, LOOP, [[x] for x in _inputs((4,), np.float32, 13)])


def test_collectives_in_a_while_loop_run_after_run(cpu):
    exe = cpu.compile(LOOP, CompileOptions(num_replicas=DEVICES))
    args = [[x] for x in _inputs((4,), np.float32, 16)]
    first = [out[0].to_numpy() for out in exe.execute_sharded(args)]
    for _ in range(20):
        for want, out in zip(first, exe.execute_sharded(args)):
            np.testing.assert_array_equal(out[0].to_numpy(), want)


@pytest.mark.parametrize("ctype,part", [("complex<f32>", np.float32),
                                         ("complex<f64>", np.float64)])
def test_complex_sums_are_native_and_componentwise(cpu, reference, ctype, part):
    """all_reduce and reduce_scatter of complex sums: native folds of the parts, bit for bit
    the interpreter's (numpy's complex add) in group order."""
    text = f"""
func.func @main(%x: tensor<4x3x{ctype}>) -> (tensor<4x3x{ctype}>, tensor<1x3x{ctype}>) {{
  %s = "stablehlo.all_reduce"(%x) ({{
    ^bb0(%a: tensor<{ctype}>, %b: tensor<{ctype}>):
      %c = stablehlo.add %a, %b : tensor<{ctype}>
      stablehlo.return %c : tensor<{ctype}>
  }}) {{replica_groups = {_groups([[3, 0, 2, 1], [4, 5, 6, 7]])}}}
      : (tensor<4x3x{ctype}>) -> tensor<4x3x{ctype}>
  %t = "stablehlo.reduce_scatter"(%x) ({{
    ^bb0(%a: tensor<{ctype}>, %b: tensor<{ctype}>):
      %c = stablehlo.add %a, %b : tensor<{ctype}>
      stablehlo.return %c : tensor<{ctype}>
  }}) {{scatter_dimension = 0 : i64, replica_groups = {_groups([[0, 1, 2, 3], [7, 6, 5, 4]])}}}
      : (tensor<4x3x{ctype}>) -> tensor<1x3x{ctype}>
  return %s, %t : tensor<4x3x{ctype}>, tensor<1x3x{ctype}>
}}"""
    xs = [a + 1j * b for a, b in zip(_inputs((4, 3), part, 21), _inputs((4, 3), part, 22))]
    check(cpu, reference, text, [[x.astype(np.result_type(part, np.complex64))] for x in xs])


def test_native_and_fallback_collectives_in_one_program(cpu, reference):
    # complex products have no native combiner: that all_reduce meets in the interpreter's grid
    text = """
func.func @main(%x: tensor<3xf32>, %z: tensor<2xcomplex<f32>>)
    -> (tensor<3xf32>, tensor<2xcomplex<f32>>) {
  %s = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }) {replica_groups = dense<[[0, 1, 2, 3], [4, 5, 6, 7]]> : tensor<2x4xi64>}
      : (tensor<3xf32>) -> tensor<3xf32>
  %t = "stablehlo.all_reduce"(%z) ({
    ^bb0(%a: tensor<complex<f32>>, %b: tensor<complex<f32>>):
      %c = stablehlo.multiply %a, %b : tensor<complex<f32>>
      stablehlo.return %c : tensor<complex<f32>>
  }) {replica_groups = dense<[[0, 4], [1, 5], [2, 6], [3, 7]]> : tensor<4x2xi64>}
      : (tensor<2xcomplex<f32>>) -> tensor<2xcomplex<f32>>
  return %s, %t : tensor<3xf32>, tensor<2xcomplex<f32>>
}"""
    xs = _inputs((3,), np.float32, 17)
    zs = [(a + 1j * a).astype(np.complex64) for a in _inputs((2,), np.float32, 18)]
    check(cpu, reference, text, [[x, z] for x, z in zip(xs, zs)], fallbacks=1)


def test_run_parallel_uses_native_collectives():
    text = """
func.func @reduce(%x: tensor<3xi32>) -> tensor<3xi32> {
  %r = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<i32>, %b: tensor<i32>):
      %c = stablehlo.add %a, %b : tensor<i32>
      stablehlo.return %c : tensor<i32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
      channel_handle = #stablehlo.channel_handle<handle = 1, type = 0>}
      : (tensor<3xi32>) -> tensor<3xi32>
  return %r : tensor<3xi32>
}
func.func @main(%a: tensor<3xi32>, %b: tensor<3xi32>, %c: tensor<3xi32>, %d: tensor<3xi32>)
    -> (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>) {
  %r:4 = "interpreter.run_parallel"(%a, %b, %c, %d) {programs = [[@reduce, @reduce],
                                                                 [@reduce, @reduce]]}
      : (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>)
      -> (tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>)
  return %r#0, %r#1, %r#2, %r#3 : tensor<3xi32>, tensor<3xi32>, tensor<3xi32>, tensor<3xi32>
}"""
    exe = pjrt.make_client("cpu").compile(text)
    assert not [f for f in exe.fallbacks if _collective(f.op)]
    xs = [np.arange(3, dtype=np.int32) * (k + 1) for k in range(4)]
    got = exe(*xs)
    # channel 1 without global ids: cross_replica_and_partition, one group of all four
    for g in got:
        np.testing.assert_array_equal(g, sum(xs))


def test_single_device_execution_runs_trivial_groups_natively():
    exe = pjrt.make_client("cpu").compile(_all_reduce("f32", (3,), []))
    assert not exe.fallbacks
    x = np.array([1, 2, 3], np.float32)
    np.testing.assert_array_equal(exe(x)[0], x)


def test_groups_outside_the_grid_fall_back_to_the_interpreter():
    exe = pjrt.make_client("cpu").compile(_all_reduce("f32", (3,), [[0, 1]]))
    assert [f.op for f in exe.fallbacks] == ["stablehlo.all_reduce"]
    with pytest.raises(Exception, match="grid"):
        exe(np.ones(3, np.float32))


def _run_all_reduce_kernel(**attrs):
    return run_kernel("stablehlo.all_reduce", {"combiner": "stablehlo.add", **attrs},
                      [("f32", [2])], [("f32", [2])], [np.ones(2, np.float32)])


def test_kernel_without_groups_from_the_lowering_is_unsupported():
    with pytest.raises(native().Unsupported, match="no attribute num_replicas"):
        _run_all_reduce_kernel()


def test_kernel_checks_the_grid_it_runs_in():
    one = {"num_replicas": 1, "num_partitions": 1, "collective_groups": [[0]]}
    np.testing.assert_array_equal(_run_all_reduce_kernel(**one)[0], np.ones(2, np.float32))
    two = {"num_replicas": 2, "num_partitions": 1, "collective_groups": [[0, 1], [0, 1]]}
    with pytest.raises(native().ExecError, match="compiled for 2 replica"):
        _run_all_reduce_kernel(**two)


FAILING = """
func.func @main(%x: tensor<4xf32>, %ok: tensor<i32>) -> tensor<4xf32> {
  check.expect_eq_const %ok, dense<1> : tensor<i32>
  %s = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %c = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %c : tensor<f32>
  }) {replica_groups = dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>}
      : (tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}"""


def test_a_failing_instance_fails_every_instance_at_once(cpu):
    from stablehlo.errors import CheckFailure
    exe = cpu.compile(FAILING, CompileOptions(num_replicas=DEVICES))
    args = [[np.ones(4, np.float32), np.array(0 if k == 3 else 1, np.int32)]
            for k in range(DEVICES)]
    start = time.monotonic()
    outs, events = exe.execute_sharded(args, with_events=True)
    for k, (out, event) in enumerate(zip(outs, events)):
        expected = CheckFailure if k == 3 else ExecutionError
        with pytest.raises(expected):
            event.wait(timeout=30)
        with pytest.raises(expected, match=None if k == 3 else "instance 3 failed"):
            out[0].to_numpy()
    assert time.monotonic() - start < 30
    # The executable stays usable.
    good = [[np.full(4, k, np.float32), np.array(1, np.int32)] for k in range(DEVICES)]
    for out in exe.execute_sharded(good):
        np.testing.assert_array_equal(out[0].to_numpy(), np.full(4, 28, np.float32))


DIVERGENT = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %id = stablehlo.replica_id : tensor<ui32>
  %zero = stablehlo.constant dense<0> : tensor<ui32>
  %first = stablehlo.compare EQ, %id, %zero : (tensor<ui32>, tensor<ui32>) -> tensor<i1>
  %r = "stablehlo.if"(%first) ({
    %s = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %c = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %c : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<2xf32>) -> tensor<2xf32>
    stablehlo.return %s : tensor<2xf32>
  }, {
    stablehlo.return %x : tensor<2xf32>
  }) : (tensor<i1>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}"""


def test_an_instance_that_never_joins_is_an_error_not_a_hang(cpu):
    exe = cpu.compile(DIVERGENT, CompileOptions(num_replicas=2))
    start = time.monotonic()
    outs = exe.execute_sharded([[np.ones(2, np.float32)]] * 2)
    with pytest.raises(ExecutionError, match="without joining"):
        outs[0][0].to_numpy()
    np.testing.assert_array_equal(outs[1][0].to_numpy(), np.ones(2, np.float32))
    assert time.monotonic() - start < 30


def _reduce_in(groups) -> str:
    return f"""
    %s = "stablehlo.all_reduce"(%x) ({{
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %c = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %c : tensor<f32>
    }}) {{replica_groups = {_groups(groups)}}} : (tensor<2xf32>) -> tensor<2xf32>
    stablehlo.return %s : tensor<2xf32>"""


# Instance 0 waits for 1 (group [0, 1]), 1 for 2 ([1, 2]), 2 for 0 ([0, 2]): a cycle.
CYCLE = f"""
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {{
  %id = stablehlo.replica_id : tensor<ui32>
  %i = stablehlo.convert %id : (tensor<ui32>) -> tensor<i32>
  %r = "stablehlo.case"(%i) ({{{_reduce_in([[0, 1], [2, -1]])}
  }}, {{{_reduce_in([[1, 2], [0, -1]])}
  }}, {{{_reduce_in([[0, 2], [1, -1]])}
  }}) : (tensor<i32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}}"""


def test_instances_waiting_on_each_other_time_out(cpu, monkeypatch):
    monkeypatch.setenv("OPENHLO_COLLECTIVE_TIMEOUT_S", "0.5")
    exe = cpu.compile(CYCLE, CompileOptions(num_replicas=3))
    assert not exe.fallbacks
    start = time.monotonic()
    outs = exe.execute_sharded([[np.ones(2, np.float32)]] * 3)
    for out in outs:
        with pytest.raises(ExecutionError, match="timed out after 0.5 s|instance . failed"):
            out[0].to_numpy()
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf"])
def test_bad_collective_timeout_is_refused_by_name(cpu, monkeypatch, value):
    from stablehlo.errors import OpenHLOError
    monkeypatch.setenv("OPENHLO_COLLECTIVE_TIMEOUT_S", value)
    exe = cpu.compile(CYCLE, CompileOptions(num_replicas=3))
    with pytest.raises(OpenHLOError, match="OPENHLO_COLLECTIVE_TIMEOUT_S"):
        exe.execute_sharded([[np.ones(2, np.float32)]] * 3)
