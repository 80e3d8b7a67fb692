"""Text pieces of collective ops for the tests of passes that move collectives (the async
pair passes, the latency-hiding scheduler): one spelling of the sum reducer they share."""

# An all_reduce's reducer (a sum of f32 scalars) and its groups (devices 0 and 1), to follow
# `"stablehlo.all_reduce"(%x) ` in a test program.
SUM_OVER_PAIR = """({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}"""
