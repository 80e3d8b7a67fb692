"""Programs and runners the auto-sharding tests share: an SGD step, running a module
sharded on 8 virtual cpu devices or unsharded on one, inputs, and the comparison."""
from __future__ import annotations

import numpy as np

# A data-parallel SGD step: the batch is annotated split (kept as the user's), the weight is
# free. Without a limit it stays whole (its gradient all-reduced); a tight limit shards it.
SGD_STEP = """
sdy.mesh @mesh = <["model"=8]>
func.func public @main(
    %x: tensor<2048x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"model"}, {}]>},
    %w: tensor<32x256xf32>) -> (tensor<f32>, tensor<32x256xf32>) {
  %y = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] :
      (tensor<2048x32xf32>, tensor<32x256xf32>) -> tensor<2048x256xf32>
  %sq = stablehlo.multiply %y, %y : tensor<2048x256xf32>
  %zero = stablehlo.constant dense<0.0> : tensor<f32>
  %loss = stablehlo.reduce(%sq init: %zero) applies stablehlo.add across dimensions = [0, 1] :
      (tensor<2048x256xf32>, tensor<f32>) -> tensor<f32>
  %two = stablehlo.constant dense<2.0> : tensor<f32>
  %twos = stablehlo.broadcast_in_dim %two, dims = [] : (tensor<f32>) -> tensor<2048x256xf32>
  %dy = stablehlo.multiply %twos, %y : tensor<2048x256xf32>
  %dw = stablehlo.dot_general %x, %dy, contracting_dims = [0] x [0] :
      (tensor<2048x32xf32>, tensor<2048x256xf32>) -> tensor<32x256xf32>
  %lr = stablehlo.constant dense<0.01> : tensor<f32>
  %lrs = stablehlo.broadcast_in_dim %lr, dims = [] : (tensor<f32>) -> tensor<32x256xf32>
  %step = stablehlo.multiply %lrs, %dw : tensor<32x256xf32>
  %new = stablehlo.subtract %w, %step : tensor<32x256xf32>
  return %loss, %new : tensor<f32>, tensor<32x256xf32>
}
"""


def _run_sharded(module, inputs) -> list:
    import pjrt
    client = pjrt.make_client("cpu", num_devices=8)
    exe = client.compile(module, pjrt.CompileOptions(num_partitions=8))
    return [np.asarray(r) for r in exe.execute_global(*inputs)]


def _run_unsharded(text: str, inputs) -> list:
    import pjrt
    return [np.asarray(r) for r in pjrt.make_client("cpu").compile(text)(*inputs)]


def _inputs(module, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    return [0.1 * rng.standard_normal(t.shape).astype(np.float32)
            for t in module.lookup("main").type.inputs]


def _assert_close(got: list, want: list) -> None:
    """Equal up to float rounding: partial sums are added in another order on 8 devices."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        scale = float(np.max(np.abs(w))) if w.size else 1.0
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(scale, 1.0))
