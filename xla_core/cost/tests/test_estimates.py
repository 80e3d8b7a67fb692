"""op_cost / fusion_cost / roofline / module_cost against formulas written from
the definitions (shapes are spelled out in each test, not read back from the code)."""
import math

import pytest

import stablehlo
from xla_core.cost import (
    DEFAULT_TRIP_COUNT,
    Cost,
    CostModelError,
    HardwareDescription,
    fusion_cost,
    module_cost,
    op_cost,
    roofline_seconds,
    while_trip_count,
)

F32 = 4  # bytes


def _ops(text: str, function: str = "main") -> list:
    module = stablehlo.parse(text)
    return [op for op in module.lookup(function).body.operations if op.name != "func.return"]


def test_dot_general_batched():
    # batch 3, M = 4*2 (two free lhs dims), K = 5*6 (two contracting dims), N = 7
    ops = _ops("""
    func.func @main(%a: tensor<3x4x5x2x6xf32>, %b: tensor<3x6x5x7xf32>) -> tensor<3x4x2x7xf32> {
      %0 = stablehlo.dot_general %a, %b, batching_dims = [0] x [0],
             contracting_dims = [2, 4] x [2, 1]
           : (tensor<3x4x5x2x6xf32>, tensor<3x6x5x7xf32>) -> tensor<3x4x2x7xf32>
      return %0 : tensor<3x4x2x7xf32>
    }""")
    batch, m, k, n = 3, 4 * 2, 5 * 6, 7
    cost = op_cost(ops[0])
    assert cost.flops == 2 * batch * m * n * k
    assert cost.bytes_read == (3 * 4 * 5 * 2 * 6 + 3 * 6 * 5 * 7) * F32
    assert cost.bytes_written == batch * m * n * F32


def test_dot_legacy_and_bf16_bytes():
    ops = _ops("""
    func.func @main(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>) -> tensor<8x32xbf16> {
      %0 = stablehlo.dot %a, %b : (tensor<8x16xbf16>, tensor<16x32xbf16>) -> tensor<8x32xbf16>
      return %0 : tensor<8x32xbf16>
    }""")
    cost = op_cost(ops[0])
    assert cost.flops == 2 * 8 * 32 * 16
    assert cost.bytes_read == (8 * 16 + 16 * 32) * 2 and cost.bytes_written == 8 * 32 * 2


def test_convolution_grouped():
    # NHWC input, 6 features in 3 groups; HWIO kernel 3x2, 2 input features per group
    ops = _ops("""
    func.func @main(%x: tensor<2x8x10x6xf32>, %w: tensor<3x2x2x9xf32>) -> tensor<2x6x9x9xf32> {
      %0 = stablehlo.convolution(%x, %w) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
             window = {} {batch_group_count = 1 : i64, feature_group_count = 3 : i64}
           : (tensor<2x8x10x6xf32>, tensor<3x2x2x9xf32>) -> tensor<2x6x9x9xf32>
      return %0 : tensor<2x6x9x9xf32>
    }""")
    out_elements = 2 * (8 - 3 + 1) * (10 - 2 + 1) * 9
    window = 3 * 2
    input_features_per_group = 6 // 3
    assert op_cost(ops[0]).flops == 2 * out_elements * window * input_features_per_group


def test_elementwise_weights():
    ops = _ops("""
    func.func @main(%a: tensor<10x20xf32>, %b: tensor<10x20xf32>) -> tensor<10x20xf32> {
      %0 = stablehlo.add %a, %b : tensor<10x20xf32>
      %1 = stablehlo.exponential %0 : tensor<10x20xf32>
      %2 = stablehlo.divide %1, %b : tensor<10x20xf32>
      return %2 : tensor<10x20xf32>
    }""")
    n = 10 * 20
    add, exp, div = (op_cost(op) for op in ops)
    assert add == Cost(n * 1, 2 * n * F32, n * F32)
    assert exp.flops == n * 10  # transcendental weight (Note [op weights])
    assert div.flops == n * 4
    assert exp.bytes_read == n * F32


def test_complex_elementwise_costs_more():
    ops = _ops("""
    func.func @main(%a: tensor<5xcomplex<f32>>) -> tensor<5xcomplex<f32>> {
      %0 = stablehlo.multiply %a, %a : tensor<5xcomplex<f32>>
      return %0 : tensor<5xcomplex<f32>>
    }""")
    cost = op_cost(ops[0])
    assert cost.flops == 5 * 4 and cost.bytes_written == 5 * 8


def test_reduce_and_reduce_window():
    ops = _ops("""
    func.func @main(%x: tensor<6x8xf32>) -> (tensor<6xf32>, tensor<5x3xf32>) {
      %z = stablehlo.constant dense<0.0> : tensor<f32>
      %0 = stablehlo.reduce(%x init: %z) applies stablehlo.add across dimensions = [1]
           : (tensor<6x8xf32>, tensor<f32>) -> tensor<6xf32>
      %1 = "stablehlo.reduce_window"(%x, %z) <{window_dimensions = array<i64: 2, 3>,
             window_strides = array<i64: 1, 2>}> ({
        ^bb0(%p: tensor<f32>, %q: tensor<f32>):
          %m = stablehlo.maximum %p, %q : tensor<f32>
          stablehlo.return %m : tensor<f32>
      }) : (tensor<6x8xf32>, tensor<f32>) -> tensor<5x3xf32>
      return %0, %1 : tensor<6xf32>, tensor<5x3xf32>
    }""")
    const, reduce, window = ops
    assert op_cost(const) == Cost()
    assert op_cost(reduce).flops == 6 * 8  # one add per input element
    assert op_cost(reduce).bytes_read == (6 * 8 + 1) * F32
    assert op_cost(reduce).bytes_written == 6 * F32
    out_rows, out_cols = (6 - 2) // 1 + 1, (8 - 3) // 2 + 1
    assert op_cost(window).flops == out_rows * out_cols * (2 * 3)


def test_reshape_is_free_and_transpose_moves_bytes():
    ops = _ops("""
    func.func @main(%x: tensor<4x6xf32>) -> tensor<3x8xf32> {
      %0 = stablehlo.transpose %x, dims = [1, 0] : (tensor<4x6xf32>) -> tensor<6x4xf32>
      %1 = stablehlo.reshape %0 : (tensor<6x4xf32>) -> tensor<3x8xf32>
      return %1 : tensor<3x8xf32>
    }""")
    assert op_cost(ops[0]) == Cost(0, 24 * F32, 24 * F32)
    assert op_cost(ops[1]) == Cost()


FUSIBLE = """
func.func @main(%a: tensor<100xf32>, %b: tensor<100xf32>) -> tensor<100xf32> {
  %0 = stablehlo.add %a, %b : tensor<100xf32>
  %1 = stablehlo.multiply %0, %a : tensor<100xf32>
  %2 = stablehlo.tanh %1 : tensor<100xf32>
  return %2 : tensor<100xf32>
}"""


def test_fusion_counts_intermediates_as_zero_bytes():
    module = stablehlo.parse(FUSIBLE)
    body = module.lookup("main").body
    ops = body.operations[:3]
    a, b = body.arguments
    fused = fusion_cost(ops, [a, b], [ops[-1].result])
    unfused = [op_cost(op) for op in ops]
    assert fused.flops == sum(c.flops for c in unfused) == 100 + 100 + 100 * 10
    assert fused.bytes_read == 2 * 100 * F32  # %a read once although two ops use it
    assert fused.bytes_written == 100 * F32
    assert sum(c.bytes_accessed for c in unfused) == (3 + 3 + 2) * 100 * F32
    assert fusion_cost(ops, None, [ops[-1].result]) == fused  # inputs inferred


def test_fusion_rejects_inconsistent_boundaries():
    module = stablehlo.parse(FUSIBLE)
    body = module.lookup("main").body
    ops = body.operations[:3]
    with pytest.raises(CostModelError, match="produced inside"):
        fusion_cost(ops, [ops[0].result], [ops[-1].result])
    with pytest.raises(CostModelError, match="not produced"):
        fusion_cost(ops[1:], None, [body.arguments[0]])


def test_roofline_picks_the_max():
    hw = HardwareDescription("toy", peak_flops=1e9, memory_bandwidth=1e8, cores=1,
                             step_overhead=1e-6)
    compute_bound = Cost(flops=1e6, bytes_read=10, bytes_written=10)      # 1 ms vs 0.2 us
    memory_bound = Cost(flops=10, bytes_read=5e4, bytes_written=5e4)      # 10 ns vs 1 ms
    assert roofline_seconds(compute_bound, hw) == pytest.approx(1e-3 + 1e-6)
    assert roofline_seconds(memory_bound, hw) == pytest.approx(1e-3 + 1e-6)
    both = Cost(flops=2e6, bytes_read=1e5, bytes_written=0)               # 2 ms vs 1 ms
    assert roofline_seconds(both, hw) == pytest.approx(2e-3 + 1e-6)
    assert roofline_seconds(Cost(), hw) == pytest.approx(1e-6)


COUNTED_LOOP = """
func.func @main(%x: tensor<16xf32>) -> tensor<16xf32> {
  %c0 = stablehlo.constant dense<2> : tensor<i64>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i64>, tensor<16xf32>
  cond {
    %lim = stablehlo.constant dense<%LIMIT%> : tensor<i64>
    %p = stablehlo.compare %DIR%, %i, %lim : (tensor<i64>, tensor<i64>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  } do {
    %one = stablehlo.constant dense<3> : tensor<i64>
    %n = stablehlo.add %i, %one : tensor<i64>
    %e = stablehlo.exponential %v : tensor<16xf32>
    stablehlo.return %n, %e : tensor<i64>, tensor<16xf32>
  }
  return %r#1 : tensor<16xf32>
}"""


@pytest.mark.parametrize("direction, limit, trips", [
    ("LT", 11, 3),   # i = 2, 5, 8
    ("LT", 12, 4),   # i = 2, 5, 8, 11
    ("LE", 11, 4),   # i = 2, 5, 8, 11
    ("LT", 2, 0),
])
def test_counted_while_loop(direction, limit, trips):
    text = COUNTED_LOOP.replace("%LIMIT%", str(limit)).replace("%DIR%", direction)
    module = stablehlo.parse(text)
    loop = module.lookup("main").body.operations[1]
    assert while_trip_count(loop) == trips
    # per trip: compare (1) + scalar add (1) + 16 exps (16 * 10)
    assert module_cost(module).flops == trips * (1 + 1 + 16 * 10)


def test_unknown_trip_count_uses_default():
    text = COUNTED_LOOP.replace("%LIMIT%", "11").replace("%DIR%", "GT")
    module = stablehlo.parse(text)
    assert while_trip_count(module.lookup("main").body.operations[1]) is None
    assert module_cost(module).flops == DEFAULT_TRIP_COUNT * (1 + 1 + 160)
    assert module_cost(module, trip_count_default=7).flops == 7 * (1 + 1 + 160)


def test_module_cost_follows_calls():
    module = stablehlo.parse("""
    func.func private @f(%x: tensor<8xf32>) -> tensor<8xf32> {
      %0 = stablehlo.log %x : tensor<8xf32>
      return %0 : tensor<8xf32>
    }
    func.func @main(%x: tensor<8xf32>) -> tensor<8xf32> {
      %0 = func.call @f(%x) : (tensor<8xf32>) -> tensor<8xf32>
      %1 = func.call @f(%0) : (tensor<8xf32>) -> tensor<8xf32>
      return %1 : tensor<8xf32>
    }""")
    cost = module_cost(module)
    assert cost == Cost(2 * 8 * 10, 2 * 8 * F32, 2 * 8 * F32, transcendentals=2 * 8)


def test_composite_is_one_op_with_its_decomposition_flops():
    module = stablehlo.parse("""
    func.func private @fused(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = stablehlo.tanh %x : tensor<4x8xf32>
      %1 = stablehlo.multiply %0, %y : tensor<4x8xf32>
      %2 = stablehlo.sqrt %1 : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    func.func @main(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %0 = stablehlo.composite "openhlo.fusion" %x, %y {decomposition = @fused} :
          (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      return %0 : tensor<4x8xf32>
    }""")
    # tanh (10/element) + multiply (1) + sqrt (4); only the composite's operands and result
    # touch memory; tanh and sqrt are transcendental.
    assert module_cost(module) == Cost(32 * (10 + 1 + 4), 2 * 32 * F32, 32 * F32,
                                       transcendentals=2 * 32)


def test_dynamic_shape_is_an_error():
    ops = _ops("""
    func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
      %0 = stablehlo.negate %x : tensor<?xf32>
      return %0 : tensor<?xf32>
    }""")
    with pytest.raises(CostModelError, match="dynamic"):
        op_cost(ops[0])


def test_conformance_programs_get_a_cost():
    # real programs: no crash, nothing negative, and flops whenever there is arithmetic
    from xla_core.testing.conformance import conformance_dir
    testdata = conformance_dir("testdata")
    if testdata is None:
        pytest.skip("shared conformance suite not present")
    files = sorted(testdata.glob("*.mlir"))[::60]  # a spread-out sample keeps this fast
    assert files
    for path in files:
        module = stablehlo.parse(path.read_text(), str(path))
        cost = module_cost(module)
        assert min(cost.flops, cost.bytes_read, cost.bytes_written) >= 0, path.name
        assert math.isfinite(cost.flops), path.name
        main_ops = list(module.lookup("main").op.walk())
        if any(op.opdef is not None and op.opdef.has("elementwise") for op in main_ops):
            assert cost.flops > 0, path.name
