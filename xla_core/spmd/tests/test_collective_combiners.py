"""all-gather-combiner and reduce-scatter-combiner (and the framework they share with
all-reduce-combiner): the cases XLA's combiner tests cover (thresholds, dependencies, groups,
dimensions, element types, while loops) plus the pipelined marker, and the combined programs'
results on 8 devices against the interpreter's results of the programs before combining."""
import numpy as np
import pytest

import pjrt
import stablehlo
from pjrt.api import CompileOptions
from stablehlo.ir.ops.base import COLLECTIVE, OPS
from stablehlo.text import print_module
from xla_core.passes import PassContext, make_pass, spmd_pipeline
from xla_core.spmd.combiner import PIPELINED
from xla_core.spmd.summary import collectives

ALL8 = ((0, 1, 2, 3, 4, 5, 6, 7),)


def _groups(groups) -> str:
    listed = "[" + ", ".join("[" + ", ".join(map(str, g)) + "]" for g in groups) + "]"
    return f"replica_groups = dense<{listed}> : tensor<{len(groups)}x{len(groups[0])}xi64>"


def _tensor(shape, element) -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + element + ">"


def all_gather(value, shape, dim, element="f32", groups=ALL8, pipelined=False) -> str:
    out = list(shape)
    out[dim] *= len(groups[0])
    marker = f" {{{PIPELINED}}}" if pipelined else ""
    return (f'"stablehlo.all_gather"({value}) <{{all_gather_dim = {dim} : i64, '
            f'{_groups(groups)}}}>{marker} : ({_tensor(shape, element)}) -> '
            f'{_tensor(out, element)}')


def reduce_scatter(value, shape, dim, element="f32", groups=ALL8, reducer="add",
                   pipelined=False, body=None) -> str:
    out = list(shape)
    out[dim] //= len(groups[0])
    marker = f" {{{PIPELINED}}}" if pipelined else ""
    scalar = f"tensor<{element}>"
    body = body or (f"%s = stablehlo.{reducer} %x, %y : {scalar}\n"
                    f"        stablehlo.return %s : {scalar}")
    return (f'"stablehlo.reduce_scatter"({value}) <{{scatter_dimension = {dim} : i64, '
            f'{_groups(groups)}}}> ({{\n'
            f"      ^bb0(%x: {scalar}, %y: {scalar}):\n        {body}\n    }}){marker} : "
            f"({_tensor(shape, element)}) -> {_tensor(out, element)}")


def program(args: list, lines: list, results: list, replicas=8) -> str:
    """``args``: (name, shape, element); ``lines``: (name, text); ``results``: (name, type)."""
    params = ", ".join(f"%{n}: {_tensor(s, e)}" for n, s, e in args)
    body = "\n".join(f"  %{n} = {text}" for n, text in lines)
    types = ", ".join(t for _, t in results)
    names = ", ".join(f"%{n}" for n, _ in results)
    return (f"module attributes {{mhlo.num_replicas = {replicas} : i32}} {{\n"
            f"func.func @main({params}) -> ({types}) {{\n{body}\n"
            f"  return {names} : {types}\n}}\n}}\n")


def combine(text: str, name: str, **options):
    module = stablehlo.parse(text)
    opts = {k.replace("_", "-"): str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in options.items()}
    changed = make_pass(name, opts).run(module, PassContext())
    printed = print_module(module)
    assert print_module(stablehlo.parse(printed)) == printed  # verifies and prints back
    return module, changed


def operand_counts(module, kind: str) -> list:
    """The number of operands of each collective of ``kind`` in program order."""
    return [len(shape) if shape and isinstance(shape[0], tuple) else 1
            for k, shape, _ in collectives(module) if k == kind]


def _collective_ops(module):
    return [op for op in module.walk() if op.name in ("stablehlo.all_gather",
                                                       "stablehlo.reduce_scatter")]


# ---------------------------------------------------------------------------------------
# all-gather-combiner

def _gathers(dims, elements=None, **kw) -> str:
    elements = elements or ["f32"] * len(dims)
    args = [(f"p{i}", (2, 2), e) for i, e in enumerate(elements)]
    lines = [(f"g{i}", all_gather(f"%p{i}", (2, 2), d, e, **kw))
             for i, (d, e) in enumerate(zip(dims, elements))]
    results = [(f"g{i}", _tensor((16, 2) if d == 0 else (2, 16), e))
               for i, (d, e) in enumerate(zip(dims, elements))]
    return program(args, lines, results)


def test_independent_all_gathers_become_one_variadic_all_gather():
    module, changed = combine(_gathers([0, 0]), "all-gather-combiner")
    assert changed
    (op,) = _collective_ops(module)
    main = module.lookup("main")
    assert op.operands == list(main.body.arguments)
    assert main.body.operations[-1].operands == op.results  # results rewired in order


def test_all_gathers_of_different_element_types_merge_unless_told_not_to():
    text = _gathers([0, 0], elements=["f32", "i32"])
    module, _ = combine(text, "all-gather-combiner")
    assert operand_counts(module, "all-gather") == [2]
    module, changed = combine(text, "all-gather-combiner", combine_different_dtypes=False)
    assert not changed and operand_counts(module, "all-gather") == [1, 1]


def test_all_gathers_group_by_gather_dimension():
    module, _ = combine(_gathers([0, 0, 1, 1, 0]), "all-gather-combiner")
    ops = _collective_ops(module)
    args = module.lookup("main").body.arguments
    by_dim = {op.attributes["all_gather_dim"].value: op.operands for op in ops}
    assert by_dim == {0: [args[0], args[1], args[4]], 1: [args[2], args[3]]}
    returned = module.lookup("main").body.operations[-1].operands
    first = next(op for op in ops if op.attributes["all_gather_dim"].value == 0)
    second = next(op for op in ops if op is not first)
    assert returned == [first.results[0], first.results[1], second.results[0],
                        second.results[1], first.results[2]]


@pytest.mark.parametrize("threshold, merged", [(256, True), (255, False)])
def test_all_gather_byte_threshold_counts_result_bytes(threshold, merged):
    # two f32[2,2] gathered 8-fold: 2 x 128 result bytes
    _, changed = combine(_gathers([0, 0]), "all-gather-combiner", threshold_bytes=threshold)
    assert changed == merged


def test_max_count_splits_groups():
    module, _ = combine(_gathers([0] * 5), "all-gather-combiner", max_count=2)
    assert operand_counts(module, "all-gather") == [2, 2, 1]


def test_an_op_over_the_threshold_alone_is_skipped_and_the_group_stays_open():
    args = [("a", (2, 2), "f32"), ("big", (64,), "f32"), ("c", (2, 2), "f32")]
    lines = [("g0", all_gather("%a", (2, 2), 0)), ("g1", all_gather("%big", (64,), 0)),
             ("g2", all_gather("%c", (2, 2), 0))]
    results = [("g0", _tensor((16, 2), "f32")), ("g1", _tensor((512,), "f32")),
               ("g2", _tensor((16, 2), "f32"))]
    module, _ = combine(program(args, lines, results), "all-gather-combiner",
                        threshold_bytes=1024)
    assert sorted(operand_counts(module, "all-gather")) == [1, 2]


def test_dependent_all_gathers_stay_apart():
    lines = [("g0", all_gather("%p", (1,), 0)), ("g1", all_gather("%g0", (8,), 0))]
    text = program([("p", (1,), "f32")], lines, [("g1", _tensor((64,), "f32"))])
    _, changed = combine(text, "all-gather-combiner")
    assert not changed


def test_all_gathers_over_different_groups_stay_apart():
    text = program([("a", (2,), "f32"), ("b", (2,), "f32")],
                   [("g0", all_gather("%a", (2,), 0, groups=((0, 1, 2, 3), (4, 5, 6, 7)))),
                    ("g1", all_gather("%b", (2,), 0, groups=((0, 2, 4, 6), (1, 3, 5, 7))))],
                   [("g0", _tensor((8,), "f32")), ("g1", _tensor((8,), "f32"))])
    _, changed = combine(text, "all-gather-combiner")
    assert not changed


def test_pipelined_and_other_all_gathers_never_merge():
    lines = [("g0", all_gather("%p0", (2, 2), 0, pipelined=True)),
             ("g1", all_gather("%p1", (2, 2), 0)),
             ("g2", all_gather("%p2", (2, 2), 0, pipelined=True)),
             ("g3", all_gather("%p3", (2, 2), 0))]
    args = [(f"p{i}", (2, 2), "f32") for i in range(4)]
    text = program(args, lines, [(f"g{i}", _tensor((16, 2), "f32")) for i in range(4)])
    module, _ = combine(text, "all-gather-combiner")
    ops = _collective_ops(module)
    assert sorted((len(op.operands), PIPELINED in op.attributes) for op in ops) == [
        (2, False), (2, True)]


def _while_program(collective: str) -> str:
    """A loop whose body holds two independent collectives of ``collective``'s kind."""
    one = (all_gather("%x", (2,), 0) if collective == "all-gather"
           else reduce_scatter("%x", (16,), 0))
    two = one.replace("(%x)", "(%y)")
    shape = (2,) if collective == "all-gather" else (16,)
    t = _tensor(shape, "f32")
    return f"""module attributes {{mhlo.num_replicas = 8 : i32}} {{
func.func @main(%a: {t}, %b: {t}) -> ({t}, {t}) {{
  %r:2 = stablehlo.while(%x = %a, %y = %b) : {t}, {t}
  cond {{
    %c = stablehlo.constant dense<false> : tensor<i1>
    stablehlo.return %c : tensor<i1>
  }} do {{
    %0 = {one}
    %1 = {two}
    stablehlo.return %x, %y : {t}, {t}
  }}
  return %r#0, %r#1 : {t}, {t}
}}
}}
"""


@pytest.mark.parametrize("kind", ["all-gather", "reduce-scatter"])
def test_collectives_in_while_loops_combine_unless_told_not_to(kind):
    text = _while_program(kind)
    module, changed = combine(text, f"{kind}-combiner")
    assert changed and operand_counts(module, kind) == [2]
    _, changed = combine(text, f"{kind}-combiner", combine_while_loops=False)
    assert not changed


def test_groups_that_would_wait_for_each_other_are_not_both_merged():
    # a0 | b0 | a1 reads b0 | b1 reads a0: merging both pairs would make the merged a wait
    # for the merged b and the merged b for the merged a; the first pair merges, b1 does not
    shape = (2, 2)
    lines = [("a0", all_gather("%p", shape, 0)), ("b0", all_gather("%q", shape, 1)),
             ("t", "stablehlo.slice %b0 [0:2, 0:2] : (tensor<2x16xf32>) -> tensor<2x2xf32>"),
             ("a1", all_gather("%t", shape, 0)),
             ("u", "stablehlo.slice %a0 [0:2, 0:2] : (tensor<16x2xf32>) -> tensor<2x2xf32>"),
             ("b1", all_gather("%u", shape, 1))]
    results = [("a1", _tensor((16, 2), "f32")), ("b1", _tensor((2, 16), "f32"))]
    text = program([("p", shape, "f32"), ("q", shape, "f32")], lines, results)
    module, changed = combine(text, "all-gather-combiner")
    assert changed and sorted(operand_counts(module, "all-gather")) == [1, 1, 2]


def _layered(matmuls: int) -> str:
    """Weight gathers (FSDP): w0's, then w1's and w2's, needed (summed) only after
    ``matmuls`` 256x256 matmuls that read w0."""
    mm = "(tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>"
    lines = [("w0", all_gather("%p0", (32, 256), 0)), ("w1", all_gather("%p1", (32, 256), 0)),
             ("w2", all_gather("%p2", (32, 256), 0))]
    h = "x"
    for i in range(matmuls):
        lines.append((f"h{i}", f"stablehlo.dot_general %{h}, %w0, contracting_dims = [1] x [0]"
                               f" : {mm}"))
        h = f"h{i}"
    lines.append(("s", "stablehlo.add %w1, %w2 : tensor<256x256xf32>"))
    lines.append(("z", f"stablehlo.dot_general %{h}, %s, contracting_dims = [1] x [0] : {mm}"))
    args = [("x", (256, 256), "f32")] + [(f"p{i}", (32, 256), "f32") for i in range(3)]
    return program(args, lines, [("z", "tensor<256x256xf32>")])


def test_overlap_aware_combining_keeps_apart_gathers_needed_a_layer_apart():
    # merged, the gather of w1 would have to be done before the first matmul, losing the
    # compute that can hide it; w1 and w2 are first read by one op and merge. Without
    # overlap-hardware: XLA's rule, everything independent merges.
    module, _ = combine(_layered(4), "all-gather-combiner", overlap_hardware="generic-cpu")
    assert operand_counts(module, "all-gather") == [1, 2]
    module, _ = combine(_layered(4), "all-gather-combiner")
    assert operand_counts(module, "all-gather") == [3]


def test_overlap_aware_combining_merges_what_no_compute_could_hide():
    # on a tiny program the compute between the first readers (one small matmul) is too
    # little to hide a collective's latency: they merge as in XLA
    tiny = _layered(0).replace("256", "8").replace("32x", "1x")
    module, _ = combine(tiny, "all-gather-combiner", overlap_hardware="generic-cpu")
    assert operand_counts(module, "all-gather") == [3]


# ---------------------------------------------------------------------------------------
# reduce-scatter-combiner

def _scatters(specs, **kw) -> str:
    """``specs``: (shape, dim) per reduce_scatter of its own argument."""
    args = [(f"p{i}", shape, "f32") for i, (shape, _) in enumerate(specs)]
    lines, results = [], []
    for i, (shape, dim) in enumerate(specs):
        out = list(shape)
        out[dim] //= 8
        lines.append((f"r{i}", reduce_scatter(f"%p{i}", shape, dim, **kw)))
        results.append((f"r{i}", _tensor(out, "f32")))
    return program(args, lines, results)


def test_independent_reduce_scatters_become_one():
    module, changed = combine(_scatters([((16,), 0), ((8, 3), 0)]), "reduce-scatter-combiner")
    assert changed
    (op,) = _collective_ops(module)
    assert [tuple(r.type.shape) for r in op.results] == [(2,), (1, 3)]
    assert module.lookup("main").body.operations[-1].operands == op.results


def test_reduce_scatters_group_by_scatter_dimension():
    specs = [((16, 16), 0), ((16, 16), 0), ((16, 16), 1), ((16, 16), 1)]
    module, _ = combine(_scatters(specs), "reduce-scatter-combiner")
    assert operand_counts(module, "reduce-scatter") == [2, 2]


def test_dependent_reduce_scatters_stay_apart():
    lines = [("r0", reduce_scatter("%p", (64, 2), 0)),
             ("r1", reduce_scatter("%r0", (8, 2), 0))]
    text = program([("p", (64, 2), "f32")], lines, [("r1", _tensor((1, 2), "f32"))])
    _, changed = combine(text, "reduce-scatter-combiner")
    assert not changed


def test_reduce_scatters_with_groups_listed_in_another_order_stay_apart():
    args = [("a", (16,), "f32"), ("b", (16,), "f32")]
    lines = [("r0", reduce_scatter("%a", (16,), 0, groups=((0, 1),))),
             ("r1", reduce_scatter("%b", (16,), 0, groups=((1, 0),)))]
    text = program(args, lines, [("r0", _tensor((8,), "f32")), ("r1", _tensor((8,), "f32"))],
                   replicas=2)
    _, changed = combine(text, "reduce-scatter-combiner")
    assert not changed


def test_reduce_scatters_with_other_reducers_or_no_plain_reducer_stay_apart():
    widened = ("%wx = stablehlo.convert %x : (tensor<bf16>) -> tensor<f32>\n"
               "        %wy = stablehlo.convert %y : (tensor<bf16>) -> tensor<f32>\n"
               "        %w = stablehlo.add %wx, %wy : tensor<f32>\n"
               "        %s = stablehlo.convert %w : (tensor<f32>) -> tensor<bf16>\n"
               "        stablehlo.return %s : tensor<bf16>")
    args = [("a", (16,), "bf16"), ("b", (16,), "bf16"), ("c", (16,), "f32"),
            ("d", (16,), "f32")]
    lines = [("r0", reduce_scatter("%a", (16,), 0, "bf16", body=widened)),
             ("r1", reduce_scatter("%b", (16,), 0, "bf16", body=widened)),
             ("r2", reduce_scatter("%c", (16,), 0, reducer="add")),
             ("r3", reduce_scatter("%d", (16,), 0, reducer="maximum"))]
    results = [(n, _tensor((2,), e)) for n, e in
               (("r0", "bf16"), ("r1", "bf16"), ("r2", "f32"), ("r3", "f32"))]
    _, changed = combine(program(args, lines, results), "reduce-scatter-combiner")
    assert not changed


@pytest.mark.parametrize("threshold, merged", [(16, True), (15, False)])
def test_reduce_scatter_byte_threshold_counts_result_bytes(threshold, merged):
    # two f32[16] scattered 8-fold: 2 x 8 result bytes
    _, changed = combine(_scatters([((16,), 0), ((16,), 0)]), "reduce-scatter-combiner",
                         threshold_bytes=threshold)
    assert changed == merged


def test_pipelined_and_other_reduce_scatters_never_merge():
    args = [(f"p{i}", (16,), "f32") for i in range(3)]
    lines = [("r0", reduce_scatter("%p0", (16,), 0, pipelined=True)),
             ("r1", reduce_scatter("%p1", (16,), 0)),
             ("r2", reduce_scatter("%p2", (16,), 0))]
    text = program(args, lines, [(f"r{i}", _tensor((2,), "f32")) for i in range(3)])
    module, _ = combine(text, "reduce-scatter-combiner")
    ops = _collective_ops(module)
    assert [(len(op.operands), PIPELINED in op.attributes) for op in ops] == [
        (1, True), (2, False)]


def test_the_spmd_pipeline_runs_every_combiner():
    """After partitioning, in XLA's order, before the collectives become async pairs."""
    names = [p.name for p in spmd_pipeline().passes]
    assert names[-5:] == ["all-reduce-combiner", "all-gather-combiner",
                          "reduce-scatter-combiner", "async-collective-creator",
                          "convert-async-to-sync"]


# ---------------------------------------------------------------------------------------
# Numerics: combined programs on 8 devices against the interpreter's uncombined run

MIXED_ARGS = [("a", (2, 3), "f32"), ("b", (4,), "i32"), ("c", (16, 3), "f32"),
              ("d", (3, 8), "f32"), ("e", (8,), "i32"), ("f", (2, 3), "f32"),
              ("s", (24, 2), "f32")]
MIXED_LINES = [
    ("g0", all_gather("%a", (2, 3), 0)),
    ("g1", all_gather("%b", (4,), 0, "i32")),
    ("r0", reduce_scatter("%c", (16, 3), 0)),
    ("r1", reduce_scatter("%d", (3, 8), 1)),
    ("r2", reduce_scatter("%e", (8,), 0, "i32")),
    ("m", "stablehlo.multiply %a, %f : tensor<2x3xf32>"),
    ("g2", all_gather("%m", (2, 3), 0)),
    ("r3", reduce_scatter("%c", (16, 3), 0, reducer="maximum")),
    ("h", "stablehlo.slice %g0 [0:2, 0:3] : (tensor<16x3xf32>) -> tensor<2x3xf32>"),
    ("g3", all_gather("%h", (2, 3), 1, groups=((0, 1, 2, 3), (4, 5, 6, 7)))),
    ("r4", reduce_scatter("%c", (16, 3), 0, groups=((0, 2, 4, 6), (1, 3, 5, 7)))),
    ("r5", reduce_scatter("%s", (24, 2), 0)),
]
MIXED_RESULTS = [("g0", "tensor<16x3xf32>"), ("g1", "tensor<32xi32>"),
                 ("r0", "tensor<2x3xf32>"), ("r1", "tensor<3x1xf32>"), ("r2", "tensor<1xi32>"),
                 ("g2", "tensor<16x3xf32>"), ("r3", "tensor<2x3xf32>"),
                 ("g3", "tensor<2x12xf32>"), ("r4", "tensor<4x3xf32>"),
                 ("r5", "tensor<3x2xf32>")]


def _args(k: int) -> list:
    rng = np.random.default_rng(k)
    out = []
    for _, shape, element in MIXED_ARGS:
        if element == "f32":
            out.append(rng.standard_normal(shape).astype(np.float32))
        else:
            out.append(rng.integers(-1000, 1000, shape).astype(np.int32))
    return out


def _run(backend: str, text: str):
    client = pjrt.make_client(backend, num_devices=8)
    exe = client.compile(text, CompileOptions(num_replicas=8, num_partitions=1))
    outs = exe.execute_sharded([_args(k) for k in range(8)])
    return exe, [[b.to_numpy() for b in out] for out in outs]


def test_combined_programs_give_the_interpreters_results_of_the_uncombined_one_bit_for_bit():
    text = program(MIXED_ARGS, MIXED_LINES, MIXED_RESULTS)
    module = stablehlo.parse(text)
    for name in ("all-gather-combiner", "reduce-scatter-combiner"):
        assert make_pass(name).run(module, PassContext())
    combined = print_module(module)
    # g0, g1 (another element type) and g2 merge; g3 reads g0 and has other groups. Of the
    # reduce-scatters only r0 and r5 share reducer, type, dimension and groups
    assert sorted(operand_counts(module, "all-gather")) == [1, 3]
    assert sorted(operand_counts(module, "reduce-scatter")) == [1, 1, 1, 1, 2]
    _, want = _run("interpreter", text)
    for backend in ("interpreter", "cpu"):
        exe, got = _run(backend, combined)
        if backend == "cpu":
            assert not [f for f in exe.fallbacks
                        if OPS.lookup(f.op) is not None and OPS.lookup(f.op).has(COLLECTIVE)]
        for k, (g, w) in enumerate(zip(got, want)):
            for j, (a, b) in enumerate(zip(g, w)):
                assert a.dtype == b.dtype and a.shape == b.shape, (backend, k, j)
                np.testing.assert_array_equal(a, b, err_msg=f"{backend}, device {k}, #{j}")
