"""latency-hiding-scheduler, in the style of XLA's latency_hiding_scheduler_test: programs
with collectives, the scheduler run with a fixed hardware description, then orderings
asserted (a start above independent compute, a done below it), the in-flight limit, the
memory limit, dependencies and the order of the starts, loop bodies."""
from __future__ import annotations

import stablehlo
from stablehlo.ir.ops.async_collectives import start_of
from stablehlo.verify import verify_module
from xla_core.passes import PassContext, make_pass, parse_pass_list
from xla_core.testing.collective_text import SUM_OVER_PAIR as SUM, three_trip_loop

M = "tensor<64x64xf32>"
DOT = "contracting_dims = [1] x [0]"


def gather(result: str, operand: str, out: str = "tensor<128x64xf32>") -> str:
    return (f'{result} = "stablehlo.all_gather"({operand}) {{all_gather_dim = 0 : i64, '
            f'replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} : ({M}) -> {out}')


def schedule(text: str, options: str = "") -> list:
    """The ops of @main after creator, scheduler (generic-cpu) and convert-async-to-sync."""
    module = stablehlo.parse(text)
    for p in parse_pass_list(f"async-collective-creator,latency-hiding-scheduler"
                             f"{{hardware=generic-cpu {options}}},convert-async-to-sync"):
        p.run(module, PassContext())
    verify_module(module)
    return list(module.lookup("main").body.operations)


def names(ops) -> list:
    return [op.name.split(".")[-1] for op in ops]


# The all-reduce is read right after it; two dots before it do not depend on it.
START_EARLY = f"""func.func @main(%x: {M}, %w: {M}, %v: {M}) -> ({M}, {M}) {{
  %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  %b = stablehlo.dot_general %a, %v, {DOT} : ({M}, {M}) -> {M}
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({M}) -> {M}
  %y = stablehlo.add %r, %x : {M}
  return %y, %b : {M}, {M}
}}"""


def test_start_moves_above_independent_compute():
    order = names(schedule(START_EARLY))
    assert order[0] == "async_start"
    assert order.index("async_start") < order.index("dot_general") < order.index("async_done")
    assert order.index("async_done") < order.index("add")


def test_done_moves_below_independent_compute():
    # (the overlap holds the dot's result with the all-reduce's and the negate's: above the
    # memory schedule's peak, so the limit is raised here; the memory test is below)
    text = f"""func.func @main(%x: {M}, %w: {M}) -> ({M}, {M}) {{
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({M}) -> {M}
  %y = stablehlo.negate %r : {M}
  %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  return %y, %a : {M}, {M}
}}"""
    assert names(schedule(text, "memory-limit=100000000")) == [
        "async_start", "dot_general", "async_done", "negate", "return"]


def test_without_independent_compute_nothing_moves():
    text = f"""func.func @main(%x: {M}) -> {M} {{
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({M}) -> {M}
  %y = stablehlo.negate %r : {M}
  return %y : {M}
}}"""
    assert names(schedule(text)) == ["all_reduce", "negate", "return"]


# three independent gathers, each read by a dot; plenty of independent compute
G = "tensor<128x64xf32>"
THREE_GATHERS = f"""func.func @main(%x: {M}, %y: {M}, %z: {M}, %w: {M}) -> ({G}, {G}, {G}, {M}) {{
  %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  %b = stablehlo.dot_general %a, %w, {DOT} : ({M}, {M}) -> {M}
  %c = stablehlo.dot_general %b, %w, {DOT} : ({M}, {M}) -> {M}
  %d = stablehlo.dot_general %c, %w, {DOT} : ({M}, {M}) -> {M}
  {gather("%g1", "%x")}
  {gather("%g2", "%y")}
  {gather("%g3", "%z")}
  return %g1, %g2, %g3, %d : {G}, {G}, {G}, {M}
}}"""


def most_in_flight(ops) -> int:
    open_now = most = 0
    for op in ops:
        open_now += {"openhlo.async_start": 1, "openhlo.async_done": -1}.get(op.name, 0)
        most = max(most, open_now)
    return most


def test_in_flight_limit_is_respected():
    one = schedule(THREE_GATHERS, "max-in-flight=1 memory-limit=100000000")
    assert most_in_flight(one) == 1
    assert names(one).count("async_start") >= 2  # overlapping some dot
    two = schedule(THREE_GATHERS, "max-in-flight=2 memory-limit=100000000")
    assert most_in_flight(two) == 2


def test_dependencies_and_start_order_are_kept():
    ops = schedule(THREE_GATHERS, "max-in-flight=3 memory-limit=100000000")
    position = {op: k for k, op in enumerate(ops)}
    for op in ops:  # every operand defined above its reader
        for v in op.operands:
            if v.owner in position:
                assert position[v.owner] < position[op]
    # the collectives start in program order (every device's communication thread runs them
    # in start order): gathers of %x, %y, %z
    starts = [op for op in ops if op.name == "openhlo.async_start"]
    args = list(ops[0].parent.arguments)
    assert [args.index(s.operands[0]) for s in starts] == [0, 1, 2]
    for op in ops:
        if op.name == "openhlo.async_done":
            assert position[start_of(op)] < position[op]


def test_memory_limit_keeps_the_gather_from_starting_early():
    # The peak of the memory schedule (64 KiB) is reached twice: at the concatenate (%a, %b,
    # %c live) and at the end (%g, %d, %e). Holding the gather's 32 KiB across the
    # concatenate would reach 96 KiB, so by default no window spans it and the peak stays;
    # with room to spare the gather starts first and overlaps the dots.
    text = f"""func.func @main(%x: {M}, %w: {M}) -> ({M}, {M}) {{
  %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  %b = stablehlo.dot_general %a, %w, {DOT} : ({M}, {M}) -> {M}
  %c = stablehlo.concatenate %a, %b, dim = 0 : ({M}, {M}) -> tensor<128x64xf32>
  %d = stablehlo.slice %c [0:64, 0:64] : (tensor<128x64xf32>) -> {M}
  {gather("%g", "%x")}
  %e = stablehlo.slice %g [64:128, 0:64] : (tensor<128x64xf32>) -> {M}
  return %d, %e : {M}, {M}
}}"""
    memory_order = stablehlo.parse(text)  # the pair as the creator places it, memory-scheduled
    for name in ("async-collective-creator", "memory-schedule"):
        make_pass(name).run(memory_order, PassContext())
    limit = _peak(memory_order)
    tight = schedule(text)
    assert _peak(tight[0].parent.parent.parent) <= limit
    order = names(tight)
    if "async_start" in order:  # a window that does not hold the gather across the concat
        window = order[order.index("async_start"):order.index("async_done")]
        assert "concatenate" not in window
    roomy = names(schedule(text, "memory-limit=100000000"))
    assert roomy[0] == "async_start"
    assert roomy.index("async_done") > roomy.index("dot_general")


def _peak(func_op) -> int:
    from xla_core.buffers import BlockGraph, NestedPeaks
    body = func_op.regions[0].blocks[0] if func_op.name == "func.func" else \
        func_op.lookup("main").body
    graph = BlockGraph(body, NestedPeaks(None))
    return graph.peak(range(len(graph.ops)))


def test_loop_bodies_are_scheduled_on_their_own():
    text = f"""func.func @main(%x: {M}, %w: {M}) -> {M} {{
{three_trip_loop(M)}
    %one = stablehlo.constant dense<1> : tensor<i32>
    %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
    %s = "stablehlo.all_reduce"(%v) {SUM} : ({M}) -> {M}
    %y = stablehlo.add %s, %a : {M}
    %j = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %j, %y : tensor<i32>, {M}
  }}
  return %r#1 : {M}
}}"""
    ops = schedule(text)
    body = names(next(op for op in ops if op.name == "stablehlo.while")
                 .regions[1].blocks[0].operations)
    assert body.index("async_start") < body.index("dot_general") < body.index("async_done")


def test_constants_the_greedy_emits_early_are_sunk_without_moving_compute():
    # the greedy emits a ready constant as soon as it can (it takes no time); held from the
    # start to its reader at the end it can push a schedule past the memory limit, and the
    # memory scheduler's sinking would also move compute (and the overlap). _sink_free
    # moves only the constant: same timeline, lower peak.
    from xla_core.buffers import BlockGraph, NestedPeaks
    from xla_core.cost import hardware
    from xla_core.scheduling.estimator import CostModelEstimator
    from xla_core.scheduling.scheduler import _sink_free
    from xla_core.scheduling.timeline import simulate
    row = "tensor<1x64xf32>"
    module = stablehlo.parse(f"""func.func @main(%x: {row}, %w: {M}) -> ({row}, {M}) {{
  %c = stablehlo.constant dense<1.0> : {row}
  %a = stablehlo.dot_general %w, %w, {DOT} : ({M}, {M}) -> {M}
  %b = stablehlo.dot_general %a, %w, {DOT} : ({M}, {M}) -> {M}
  %e = stablehlo.add %a, %b : {M}
  %f = stablehlo.add %e, %a : {M}
  %r = "stablehlo.all_reduce"(%x) {SUM} : ({row}) -> {row}
  %y = stablehlo.add %r, %c : {row}
  return %y, %f : {row}, {M}
}}""")
    make_pass("async-collective-creator").run(module, PassContext())
    body = module.lookup("main").body
    graph = BlockGraph(body, NestedPeaks(module), async_windows=False)
    estimator = CostModelEstimator(hardware("generic-cpu"), module)
    order = list(range(len(graph.ops)))
    sunk = _sink_free(graph, order, estimator)
    graph.check_order(sunk)
    names_of = [graph.ops[i].name.split(".")[-1] for i in sunk]
    assert names_of.index("constant") == len(names_of) - 3  # just before %y, then return
    assert [i for i in sunk if graph.ops[i].name != "stablehlo.constant"] == \
        [i for i in order if graph.ops[i].name != "stablehlo.constant"]
    assert graph.peak(sunk) < graph.peak(order)
    assert simulate([graph.ops[i] for i in sunk], estimator).now == \
        simulate([graph.ops[i] for i in order], estimator).now


def _order_on(devices_per_host: int, text: str = START_EARLY) -> list:
    module = stablehlo.parse(text)
    for p in parse_pass_list(f"async-collective-creator,latency-hiding-scheduler"
                             f"{{hardware=generic-cpu devices-per-host={devices_per_host}}},"
                             f"convert-async-to-sync"
                             f"{{hardware=generic-cpu devices-per-host={devices_per_host}}}"):
        p.run(module, PassContext())
    verify_module(module)
    return names(module.lookup("main").body.operations)


def test_devices_with_a_core_each_for_communication_keep_the_overlap():
    # generic-cpu has 4 cores: 2 devices still get an executing and a communication core
    # each, and every estimate stretches alike, so the order is the one-device order
    assert _order_on(2) == _order_on(0)
    assert _order_on(2)[0] == "async_start"


def test_devices_oversubscribing_the_cores_keep_their_collectives_synchronous():
    # 8 devices on 4 cores: a communication thread would take a core from compute, so no
    # order hides a collective: the scheduler keeps the memory schedule and
    # convert-async-to-sync makes each pair its synchronous collective where the start was
    # (the creator's window left the all-reduce in program order)
    assert _order_on(8) == ["dot_general", "dot_general", "all_reduce", "add", "return"]
    three = _order_on(8, THREE_GATHERS)
    assert "async_start" not in three and three.count("all_gather") == 3
