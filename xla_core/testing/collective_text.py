"""Text pieces of collective ops for the tests of passes that move collectives (the async
pair passes, the latency-hiding scheduler): one spelling of the sum reducer they share."""

# An all_reduce's reducer (a sum of f32 scalars) and its groups (devices 0 and 1), to follow
# `"stablehlo.all_reduce"(%x) ` in a test program.
SUM_OVER_PAIR = """({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}"""


def three_trip_loop(carried: str) -> str:
    """The head of a `stablehlo.while` running 3 trips over `%i` (from `%c0`, which it defines)
    and `%v` (from `%x`, of type `carried`), up to the body's opening: the body follows, then
    `stablehlo.return %next, ...` and `}}` (the caller's f-string braces)."""
    return f"""  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, {carried}
  cond {{
    %n = stablehlo.constant dense<3> : tensor<i32>
    %lt = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }} do {{"""
