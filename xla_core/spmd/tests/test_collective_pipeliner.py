"""collective-pipeliner on per-device loops written out: where the moved collectives land
(the gather for iteration i+1 in iteration i, prologue, epilogue, the peeled trip), the loops
it leaves alone, and the results of each rewritten program on 8 replicas of the cpu and
interpreter backends, bit for bit against the program before the pass (and numpy)."""
import numpy as np
import pytest

import pjrt
import stablehlo
from stablehlo.text import print_module
from xla_core.passes import PassContext, make_pass
from xla_core.spmd.combiner import PIPELINED
from xla_core.spmd.tests.pipeliner_programs import ALL8, STACK, gather_loop

def _reduce_loop(trips: int, collective: str = "all_reduce", extra_use: bool = False) -> str:
    """A reverse loop: acc[trips-1-i] <- transpose(reduce(x_i^T x_i)) with x_{i+1} =
    tanh(x_i); ``extra_use`` also adds the reduced value into the carried x (so it feeds
    more than the accumulator)."""
    reducer = """({
        ^bb0(%a: tensor<f32>, %b: tensor<f32>):
          %sum = stablehlo.add %a, %b : tensor<f32>
          stablehlo.return %sum : tensor<f32>
        })"""
    if collective == "all_reduce":
        reduce = (f'"stablehlo.all_reduce"(%g) {reducer} {{replica_groups = {ALL8}}} '
                  f': (tensor<8x8xf32>) -> tensor<8x8xf32>')
        rows = 8
    else:
        reduce = (f'"stablehlo.reduce_scatter"(%g) {reducer} {{scatter_dimension = 0 : i64, '
                  f'replica_groups = {ALL8}}} : (tensor<8x8xf32>) -> tensor<1x8xf32>')
        rows = 1
    mixed = ("%more = stablehlo.add %x, %x : tensor<3x8xf32>" if not extra_use else
             f"%more = stablehlo.add %x, %x : tensor<3x8xf32>\n"
             f"    %also = stablehlo.reshape %red : (tensor<{rows}x8xf32>) -> "
             f"tensor<{rows}x8xf32>")
    carried_x = "%tx" if not extra_use else "%tx2"
    extra = "" if not extra_use else (
        f"%bias = stablehlo.slice %also [0:1, 0:3] : (tensor<{rows}x8xf32>) -> tensor<1x3xf32>\n"
        f"    %bb = stablehlo.broadcast_in_dim %bias, dims = [1, 0] "
        f": (tensor<1x3xf32>) -> tensor<3x8xf32>\n"
        f"    %tx2 = stablehlo.add %tx, %bb : tensor<3x8xf32>")
    return f"""
module attributes {{mhlo.num_replicas = 8 : i32}} {{
func.func @main(%x0: tensor<3x8xf32>, %acc0: tensor<{trips}x{rows}x8xf32>)
    -> (tensor<{trips}x{rows}x8xf32>, tensor<3x8xf32>) {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %acc = %acc0, %x = %x0)
      : tensor<i32>, tensor<{trips}x{rows}x8xf32>, tensor<3x8xf32>
  cond {{
    %n = stablehlo.constant dense<{trips}> : tensor<i32>
    %p = stablehlo.compare LT, %i, %n, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %last = stablehlo.constant dense<{trips - 1}> : tensor<i32>
    %j = stablehlo.subtract %last, %i : tensor<i32>
    %g = stablehlo.dot_general %x, %x, contracting_dims = [0] x [0]
        : (tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<8x8xf32>
    %red = {reduce}
    %tr = stablehlo.transpose %red, dims = [1, 0] : (tensor<{rows}x8xf32>) -> tensor<8x{rows}xf32>
    %back = stablehlo.reshape %tr : (tensor<8x{rows}xf32>) -> tensor<1x{rows}x8xf32>
    {mixed}
    %tx = stablehlo.tanh %more : tensor<3x8xf32>
    {extra}
    %z = stablehlo.constant dense<0> : tensor<i32>
    %upd = stablehlo.dynamic_update_slice %acc, %back, %j, %z, %z
        : (tensor<{trips}x{rows}x8xf32>, tensor<1x{rows}x8xf32>, tensor<i32>, tensor<i32>,
           tensor<i32>) -> tensor<{trips}x{rows}x8xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %upd, {carried_x} : tensor<i32>, tensor<{trips}x{rows}x8xf32>,
        tensor<3x8xf32>
  }}
  return %r#1, %r#2 : tensor<{trips}x{rows}x8xf32>, tensor<3x8xf32>
}}
}}
"""


def _pipelined(text: str, **options):
    module = stablehlo.parse(text)
    changed = make_pass("collective-pipeliner", options).run(module, PassContext())
    return module, changed


def _whiles(module):
    return [op for op in module.lookup("main").body.operations if op.name == "stablehlo.while"]


def _names(block):
    return [op.name for op in block.operations]


def _pieces(seed: int, shape) -> list:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(np.float32) * 0.5 for _ in range(8)]


def _run(text: str, backend: str, per_device: list) -> list:
    client = pjrt.make_client(backend, num_devices=8)
    exe = client.compile(text)
    if backend == "cpu":  # generated kernels: the op-by-op tier cuts GEMMs into other panels,
        # and a BLAS that rounds by panel (blas.gemm_bits_depend_on_panels) would make the
        # bits depend on which tier each program ran
        exe.wait_optimized()
    outputs = exe.execute_sharded(per_device)
    return [[o.to_numpy() for o in out] for out in outputs]


def _same_results(before: str, after, per_device: list) -> list:
    """The results of both programs on 8 replicas of each backend, asserted bit-identical;
    the cpu backend's."""
    got = {}
    for backend in ("cpu", "interpreter"):
        want = _run(before, backend, per_device)
        have = _run(print_module(after), backend, per_device)
        for w, h in zip(want, have):
            for a, b in zip(w, h):
                np.testing.assert_array_equal(a, b)
        got[backend] = have
    return got["cpu"]


@pytest.mark.parametrize("trips", [2, 3, 4])
def test_gather_for_the_next_iteration_is_started_in_this_one(trips):
    module, changed = _pipelined(gather_loop(trips))
    assert changed
    main = module.lookup("main").body
    loop, = _whiles(module)
    body = loop.regions[1].block
    # prologue: iteration 0's gather before the loop, carried in
    prologue = [op for op in main.operations[:main.operations.index(loop)]
                if op.name == "stablehlo.all_gather"]
    assert len(prologue) == 1 and PIPELINED in prologue[0].attributes
    assert prologue[0].results[0] is loop.operands[-1]
    # in the body: the gather of dynamic_slice(w, i + 1), before the layer's dot, yielded
    gather, = [op for op in body.operations if op.name == "stablehlo.all_gather"]
    assert PIPELINED in gather.attributes
    names = _names(body)
    assert names.index("stablehlo.all_gather") < names.index("stablehlo.dot_general")
    assert body.terminator.operands[-1] is gather.results[0]
    piece = gather.operands[0].owner.operands[0].owner
    index = piece.operands[1].owner
    assert piece.name == "stablehlo.dynamic_slice" and index.name == "stablehlo.add"
    assert index.operands[0] is body.arguments[0]
    # the dot reads the carried gather; the loop runs one trip fewer, the last one after it
    dot = next(op for op in body.operations if op.name == "stablehlo.dot_general")
    assert dot.operands[1] is body.arguments[-1]
    after = main.operations[main.operations.index(loop) + 1:]
    assert "stablehlo.dot_general" in _names(main) and not any(
        op.name == "stablehlo.all_gather" for op in after)
    from xla_core.cost.estimates import while_trip_count
    assert while_trip_count(loop) == trips - 1


@pytest.mark.parametrize("trips", [2, 4])
def test_pipelined_gathers_give_the_same_bits(trips):
    w = _pieces(0, (STACK, 2, 16))
    h = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    module, _ = _pipelined(gather_loop(trips))
    got = _same_results(gather_loop(trips), module, [[w[d], h] for d in range(8)])
    whole = np.concatenate(w, axis=1)  # the gathered layers
    want = h
    for i in range(trips):
        want = np.tanh(want @ whole[i])
    np.testing.assert_allclose(got[0][0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
@pytest.mark.parametrize("trips", [2, 3])
def test_reduction_is_finished_in_the_next_iteration(collective, trips):
    module, changed = _pipelined(_reduce_loop(trips, collective))
    assert changed
    main = module.lookup("main").body
    loop, = _whiles(module)
    body = loop.regions[1].block
    at = main.operations.index(loop)
    name = f"stablehlo.{collective}"
    # the first trip peeled without its reduction; the last reduction after the loop
    assert name not in _names(main)[:at] and "stablehlo.dot_general" in _names(main)[:at]
    epilogue = [op for op in main.operations[at + 1:] if op.name == name]
    assert len(epilogue) == 1 and PIPELINED in epilogue[0].attributes
    assert epilogue[0].operands[0] is loop.results[3]  # the carried unreduced value
    # in the body: the previous trip's reduction first, its write into the accumulator last
    names = _names(body)
    reduction, = [op for op in body.operations if op.name == name]
    assert names[0] == name and PIPELINED in reduction.attributes
    assert reduction.operands[0] is body.arguments[3]
    assert names[-2] == "stablehlo.dynamic_update_slice"
    assert names.index(name) < names.index("stablehlo.dot_general") < names.index(
        "stablehlo.dynamic_update_slice")
    # its index is the previous trip's, carried
    assert body.operations[-2].operands[2] is body.arguments[4]
    from xla_core.cost.estimates import while_trip_count
    assert while_trip_count(loop) == trips - 1


@pytest.mark.parametrize("collective", ["all_reduce", "reduce_scatter"])
def test_pipelined_reductions_give_the_same_bits(collective):
    trips = 3
    rows = 8 if collective == "all_reduce" else 1
    x = _pieces(2, (3, 8))
    acc = np.zeros((trips, rows, 8), np.float32)
    module, _ = _pipelined(_reduce_loop(trips, collective))
    got = _same_results(_reduce_loop(trips, collective), module,
                        [[x[d], acc] for d in range(8)])
    xs = list(x)
    for i in range(trips):
        total = sum(v.T @ v for v in xs)
        for d in range(8):
            reduced = total if rows == 8 else total[d:d + 1]
            want = reduced.T.reshape(rows, 8)  # transposed, then reshaped, as written
            np.testing.assert_allclose(got[d][0][trips - 1 - i], want, rtol=1e-5, atol=1e-5)
        xs = [np.tanh(v + v) for v in xs]


def test_moved_ones_never_merge_with_the_others():
    # an independent gather of h before the loop, not moved: the prologue's could join it
    text = gather_loop(3).replace(
        "  %r:3 = stablehlo.while",
        f'  %other = "stablehlo.all_gather"(%h) {{all_gather_dim = 0 : i64, '
        f'replica_groups = {ALL8}}} : (tensor<3x16xf32>) -> tensor<24x16xf32>\n'
        f"  %r:3 = stablehlo.while")
    module, _ = _pipelined(text)

    def outside(module):
        return [op for op in module.lookup("main").body.operations
                if op.name == "stablehlo.all_gather"]
    before = outside(module)
    assert [PIPELINED in op.attributes for op in before] == [False, True]
    make_pass("all-gather-combiner").run(module, PassContext())
    assert [len(op.operands) for op in outside(module)] == [1, 1]
    # the marker is what keeps them apart
    del before[1].attributes[PIPELINED]
    make_pass("all-gather-combiner").run(module, PassContext())
    assert [len(op.operands) for op in outside(module)] == [2]


@pytest.mark.parametrize("text", [
    gather_loop(0), gather_loop(1),  # nothing to overlap
    gather_loop(3, limit=", %limit: tensor<i32>"),  # unknown trip count
    _reduce_loop(1), _reduce_loop(3, extra_use=True),  # the reduced value feeds more
], ids=["0-trips", "1-trip", "unknown-trips", "1-trip-reduce", "reduced-value-read-twice"])
def test_loops_that_do_not_match_are_left_alone(text):
    module, changed = _pipelined(text)
    assert not changed
    assert print_module(module) == print_module(stablehlo.parse(text))


def test_gathers_that_do_not_follow_the_induction_variable_are_left_alone():
    same_slice = gather_loop(3).replace("dynamic_slice %ws, %i, %z", "dynamic_slice %ws, %z, %z")
    assert "dynamic_slice %ws, %z, %z" in same_slice
    # the gathered piece depends on the carried h, which the loop changes
    changing = gather_loop(3).replace(
        "%piece = stablehlo.reshape %s : (tensor<1x2x16xf32>) -> tensor<2x16xf32>",
        "%piece = stablehlo.slice %x [0:2, 0:16] : (tensor<3x16xf32>) -> tensor<2x16xf32>")
    assert "stablehlo.slice %x" in changing
    for text in (same_slice, changing):
        module, changed = _pipelined(text)
        assert not changed
        assert print_module(module) == print_module(stablehlo.parse(text))


def test_modes_turn_off_one_by_one():
    assert not _pipelined(gather_loop(3), **{"all-gather": "false"})[1]
    assert not _pipelined(_reduce_loop(3), reduce="false")[1]
    assert _pipelined(_reduce_loop(3), **{"all-gather": "false"})[1]


def test_compile_option_turns_it_off_and_must_be_a_bool():
    from xla_core.compile.driver import collective_pipelining
    from xla_core.passes import PassError
    assert collective_pipelining(pjrt.CompileOptions()) is True
    off = pjrt.CompileOptions(env_option_overrides={"collective_pipelining": False})
    assert collective_pipelining(off) is False
    with pytest.raises(PassError, match=r"env_option_overrides\['collective_pipelining'\]"):
        collective_pipelining(pjrt.CompileOptions(
            env_option_overrides={"collective_pipelining": "no"}))
