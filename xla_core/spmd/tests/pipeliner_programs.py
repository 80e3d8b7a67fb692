"""Programs of the collective-pipeliner tests (test_collective_pipeliner.py,
test_locations.py): a counted loop over stacked per-layer weights that all-gathers each
layer's piece, the FSDP pattern the pass moves."""

ALL8 = "dense<[[0, 1, 2, 3, 4, 5, 6, 7]]> : tensor<1x8xi64>"
STACK = 4  # layers stacked in the carried weights


def gather_loop(trips: int, limit: str = "") -> str:
    """h <- tanh(h @ all_gather(w[i])) for i < trips (``limit``: a function argument as the
    bound instead, an unknown trip count)."""
    bound = "%limit" if limit else "%n"
    return f"""
module attributes {{mhlo.num_replicas = 8 : i32}} {{
func.func @main(%w: tensor<{STACK}x2x16xf32>, %h: tensor<3x16xf32>{limit})
    -> tensor<3x16xf32> {{
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:3 = stablehlo.while(%i = %c0, %x = %h, %ws = %w)
      : tensor<i32>, tensor<3x16xf32>, tensor<{STACK}x2x16xf32>
  cond {{
    %n = stablehlo.constant dense<{trips}> : tensor<i32>
    %p = stablehlo.compare LT, %i, {bound}, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }} do {{
    %z = stablehlo.constant dense<0> : tensor<i32>
    %s = stablehlo.dynamic_slice %ws, %i, %z, %z, sizes = [1, 2, 16]
        : (tensor<{STACK}x2x16xf32>, tensor<i32>, tensor<i32>, tensor<i32>) -> tensor<1x2x16xf32>
    %piece = stablehlo.reshape %s : (tensor<1x2x16xf32>) -> tensor<2x16xf32>
    %g = "stablehlo.all_gather"(%piece) {{all_gather_dim = 0 : i64,
        replica_groups = {ALL8}}} : (tensor<2x16xf32>) -> tensor<16x16xf32>
    %y = stablehlo.dot_general %x, %g, contracting_dims = [1] x [0]
        : (tensor<3x16xf32>, tensor<16x16xf32>) -> tensor<3x16xf32>
    %t = stablehlo.tanh %y : tensor<3x16xf32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %next = stablehlo.add %i, %one : tensor<i32>
    stablehlo.return %next, %t, %ws : tensor<i32>, tensor<3x16xf32>, tensor<{STACK}x2x16xf32>
  }}
  return %r#1 : tensor<3x16xf32>
}}
}}
"""
