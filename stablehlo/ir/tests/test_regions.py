"""region_monoids / region_monoid: which reducer bodies are monoids, and their identities
checked against the op itself (op(identity, x) == x, evaluated by numpy)."""
import numpy as np
import pytest

from stablehlo.ir.regions import (MONOIDS, VALUE_STATES, ArgReduce, region_argreduce,
                                  region_monoid, region_monoids, region_value_picks)
from stablehlo.ir.types import FloatType, IntegerType, numpy_dtype
from stablehlo.text import parse_module


def _body(text: str):
    module = parse_module(f"""
func.func @main(%x: tensor<4xf32>, %y: tensor<4xi32>) -> (tensor<f32>, tensor<i32>) {{
  %zf = stablehlo.constant dense<0.0> : tensor<f32>
  %zi = stablehlo.constant dense<0> : tensor<i32>
  %r:2 = stablehlo.reduce(%x init: %zf), (%y init: %zi) across dimensions = [0] :
      (tensor<4xf32>, tensor<4xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {{
{text}
    }}
  return %r#0, %r#1 : tensor<f32>, tensor<i32>
}}""")
    (reduce,) = [op for op in module.walk() if op.name == "stablehlo.reduce"]
    return reduce.regions[0]


def test_one_monoid_per_result_in_either_operand_order():
    region = _body("""
      %s = stablehlo.add %b, %a : tensor<f32>
      %m = stablehlo.maximum %c, %d : tensor<i32>
      stablehlo.return %s, %m : tensor<f32>, tensor<i32>""")
    assert [m.op for m in region_monoids(region)] == ["stablehlo.add", "stablehlo.maximum"]
    assert region_monoid(region) is None  # two different ops


@pytest.mark.parametrize("body", [
    # the same argument twice
    """%s = stablehlo.add %a, %a : tensor<f32>
      %m = stablehlo.maximum %c, %d : tensor<i32>
      stablehlo.return %s, %m : tensor<f32>, tensor<i32>""",
    # arguments of another pair
    """%s = stablehlo.add %a, %b : tensor<f32>
      %m = stablehlo.maximum %c, %c : tensor<i32>
      stablehlo.return %s, %m : tensor<f32>, tensor<i32>""",
    # not a monoid
    """%s = stablehlo.subtract %a, %b : tensor<f32>
      %m = stablehlo.maximum %c, %d : tensor<i32>
      stablehlo.return %s, %m : tensor<f32>, tensor<i32>""",
    # an extra op
    """%s = stablehlo.add %a, %b : tensor<f32>
      %n = stablehlo.negate %s : tensor<f32>
      %m = stablehlo.maximum %c, %d : tensor<i32>
      stablehlo.return %n, %m : tensor<f32>, tensor<i32>""",
    # a block argument returned as it is
    """%m = stablehlo.maximum %c, %d : tensor<i32>
      %m2 = stablehlo.minimum %c, %d : tensor<i32>
      stablehlo.return %b, %m : tensor<f32>, tensor<i32>""",
])
def test_other_bodies_are_not_monoids(body):
    assert region_monoids(_body(body)) is None


_TYPES = ["i1", "i8", "ui8", "i32", "ui64", "f16", "bf16", "f32", "f64", "f8E4M3FN",
          "f8E5M2", "f8E4M3FNUZ"]


def _element_type(name):
    if name.startswith("ui"):
        return IntegerType(int(name[2:]), False)
    if name.startswith("i"):
        return IntegerType(int(name[1:]))
    return FloatType(name)


_NUMPY = {"stablehlo.add": np.add, "stablehlo.multiply": np.multiply,
          "stablehlo.maximum": np.maximum, "stablehlo.minimum": np.minimum,
          "stablehlo.and": np.bitwise_and, "stablehlo.or": np.bitwise_or,
          "stablehlo.xor": np.bitwise_xor}


@pytest.mark.parametrize("name", _TYPES)
@pytest.mark.parametrize("op", sorted(MONOIDS))
def test_the_identity_leaves_every_value_as_it_is(op, name):
    element_type = _element_type(name)
    dtype = numpy_dtype(element_type)
    identity = MONOIDS[op].identity(element_type)
    is_float = isinstance(element_type, FloatType)
    if is_float and op in ("stablehlo.and", "stablehlo.or", "stablehlo.xor"):
        assert identity is None  # bitwise ops are not defined on floats
        return
    rng = np.random.default_rng(0)
    if is_float:
        values = np.concatenate([rng.standard_normal(64), [0.0, 1.0, -1.0, 3.5]]).astype(dtype)
        compute = np.float64  # numpy has no ufuncs of its own for the ml_dtypes floats
    elif dtype == np.bool_:
        values, compute = np.array([False, True]), np.bool_
    else:
        info = np.iinfo(dtype)
        values = np.array([info.min, info.max, 0, 1, 7], dtype)
        compute = dtype
    e = np.asarray(identity).astype(dtype).astype(compute)
    x = values.astype(compute)
    with np.errstate(over="ignore"):
        got = _NUMPY[op](e, x).astype(dtype)
    np.testing.assert_array_equal(got, values)


# argmax bodies as JAX writes them (NaN picked), as a plain one writes them (no NaN test),
# and as the PyTorch lowering writes them (NaN picked, two NaNs by index)
_JAX_ARGMAX = """
      %gt = stablehlo.compare GT, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %pick = stablehlo.or %gt, %nan : tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %c, %d, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %pick_index = stablehlo.or %pick, %tie : tensor<i1>
      %m = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %i = stablehlo.select %pick_index, %c, %d : tensor<i1>, tensor<i32>
      stablehlo.return %m, %i : tensor<f32>, tensor<i32>"""
_PLAIN_ARGMIN = """
      %lt = stablehlo.compare LT, %b, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %later = stablehlo.compare GT, %c, %d : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %later : tensor<i1>
      %pick = stablehlo.or %lt, %tie : tensor<i1>
      %m = stablehlo.select %pick, %b, %a : tensor<i1>, tensor<f32>
      %i = stablehlo.select %pick, %d, %c : tensor<i1>, tensor<i32>
      stablehlo.return %m, %i : tensor<f32>, tensor<i32>"""
_TORCH_ARGMAX = """
      %an = stablehlo.compare NE, %a, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %bn = stablehlo.compare NE, %b, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %eq = stablehlo.compare EQ, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %lt = stablehlo.compare LT, %c, %d : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %tie = stablehlo.and %eq, %lt : tensor<i1>
      %both = stablehlo.and %an, %bn : tensor<i1>
      %nbn = stablehlo.not %bn : tensor<i1>
      %a_only = stablehlo.and %an, %nbn : tensor<i1>
      %better = stablehlo.or %gt, %tie : tensor<i1>
      %ordered = stablehlo.and %nbn, %better : tensor<i1>
      %p0 = stablehlo.or %a_only, %ordered : tensor<i1>
      %both_first = stablehlo.and %both, %lt : tensor<i1>
      %pick = stablehlo.or %p0, %both_first : tensor<i1>
      %m = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      %i = stablehlo.select %pick, %c, %d : tensor<i1>, tensor<i32>
      stablehlo.return %m, %i : tensor<f32>, tensor<i32>"""


@pytest.mark.parametrize("body, which", [(_JAX_ARGMAX, "max"), (_PLAIN_ARGMIN, "min"),
                                         (_TORCH_ARGMAX, "max"),
                                         (_JAX_ARGMAX.replace("GT, %a", "LT, %a"), "min")])
def test_argmax_and_argmin_bodies_are_recognised(body, which):
    region = _body(body)
    assert region_monoids(region) is None
    assert region_argreduce(region).which == which
    assert ArgReduce(which).value_monoid.op == f"stablehlo.{which}imum"


# One (first, second) pair of f32 bit patterns per value state, each side told apart by its
# bits: equal values as +0.0 and -0.0, NaNs with different payloads.
_STATE_BITS = {"lt": (0x3F800000, 0x40000000), "eq": (0x00000000, 0x80000000),
               "gt": (0x40000000, 0x3F800000), "nan_first": (0x7FC00001, 0x3F800000),
               "nan_second": (0x3F800000, 0x7FC00002), "nan_both": (0x7FC00001, 0x7FC00002)}
_INDEX_PAIRS = {"lt": (3, 5), "eq": (4, 4), "gt": (5, 3)}


def _apply_body(text: str, first, second):
    """The body applied once to (first, second) by the interpreter: a reduce of the one
    element ``second`` from the init pair ``first``."""
    from stablehlo.interpreter import evaluate
    module = parse_module(f"""
func.func @main(%x: tensor<1xf32>, %y: tensor<1xi32>, %v: tensor<f32>, %i: tensor<i32>)
    -> (tensor<f32>, tensor<i32>) {{
  %r:2 = stablehlo.reduce(%x init: %v), (%y init: %i) across dimensions = [0] :
      (tensor<1xf32>, tensor<1xi32>, tensor<f32>, tensor<i32>) -> (tensor<f32>, tensor<i32>)
    reducer(%a: tensor<f32>, %b: tensor<f32>) (%c: tensor<i32>, %d: tensor<i32>) {{
{text}
    }}
  return %r#0, %r#1 : tensor<f32>, tensor<i32>
}}""")
    value, index = evaluate(module, [second[0].reshape(1), second[1].reshape(1), *first])
    return int(np.asarray(value).view(np.uint32)), int(index)


@pytest.mark.parametrize("body", [_JAX_ARGMAX, _PLAIN_ARGMIN, _TORCH_ARGMAX])
def test_pick_table_is_what_the_body_computes(body):
    # ArgReduce.picks against the interpreter running the body on one input per entry.
    picks = region_argreduce(_body(body)).picks
    assert len(picks) == len(VALUE_STATES) * 3
    for s, state in enumerate(VALUE_STATES):
        for r, relation in enumerate(("lt", "eq", "gt")):
            bits, idx = _STATE_BITS[state], _INDEX_PAIRS[relation]
            pairs = [(np.array(b, np.uint32).view(np.float32), np.int32(i))
                     for b, i in zip(bits, idx)]
            value, index = _apply_body(body, pairs[0], pairs[1])
            entry = picks[3 * s + r]
            assert value == bits[entry & 1], (state, relation)
            if relation != "eq":
                assert index == idx[entry >> 1], (state, relation)


def test_totalorder_bodies_have_no_pick_table():
    # NaNs and signed zeros are ordered in TOTALORDER: the value states do not describe it.
    body = _JAX_ARGMAX.replace("GT, %a, %b, FLOAT", "GT, %a, %b, TOTALORDER")
    argreduce = region_argreduce(_body(body))
    assert argreduce is not None and argreduce.picks is None


@pytest.mark.parametrize("body", [
    # ties go to the higher index
    _JAX_ARGMAX.replace("LT, %c, %d", "GT, %c, %d"),
    # ties go to the first pair whatever the indices (GE instead of GT)
    _JAX_ARGMAX.replace("GT, %a", "GE, %a"),
    # the index follows another predicate than the value when the values differ
    _JAX_ARGMAX.replace("select %pick_index, %c, %d", "select %tie, %c, %d"),
    # the value and the index picked from opposite sides
    _PLAIN_ARGMIN.replace("select %pick, %d, %c", "select %pick, %c, %d"),
    # an unsigned order of signed indices
    _JAX_ARGMAX.replace("%d, SIGNED", "%d, UNSIGNED"),
    # an op that is no comparison or boolean logic
    _JAX_ARGMAX.replace("%pick = stablehlo.or %gt, %nan", "%pick = stablehlo.add %gt, %nan"),
    # the value pair compared with itself only
    _JAX_ARGMAX.replace("GT, %a, %b", "GT, %a, %a").replace("EQ, %a, %b", "EQ, %b, %b"),
])
def test_other_pair_bodies_are_no_argreduce(body):
    assert region_argreduce(_body(body)) is None


def test_a_monoid_body_is_no_argreduce():
    region = _body("""
      %s = stablehlo.add %b, %a : tensor<f32>
      %m = stablehlo.maximum %c, %d : tensor<i32>
      stablehlo.return %s, %m : tensor<f32>, tensor<i32>""")
    assert region_argreduce(region) is None


def test_a_pair_body_returning_an_argument_is_no_argreduce():
    region = _body("""
      %gt = stablehlo.compare GT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %m = stablehlo.select %gt, %a, %b : tensor<i1>, tensor<f32>
      stablehlo.return %m, %c : tensor<f32>, tensor<i32>""")
    assert region_argreduce(region) is None


def _value_body(text: str):
    module = parse_module(f"""
func.func @main(%x: tensor<4xf32>) -> tensor<f32> {{
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %r = stablehlo.reduce(%x init: %z) across dimensions = [0] : (tensor<4xf32>, tensor<f32>)
      -> tensor<f32>
    reducer(%a: tensor<f32>, %b: tensor<f32>) {{
{text}
    }}
  return %r : tensor<f32>
}}""")
    (reduce,) = [op for op in module.walk() if op.name == "stablehlo.reduce"]
    return reduce.regions[0]


# What prune-argreduce-index leaves of PyTorch's pooling body (the first of equal values and
# of two NaNs wins), and an argmin keeping the second of equal values, NaNs by position.
_FIRST_MAX = """
      %ge = stablehlo.compare GE, %a, %b, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %nan = stablehlo.compare NE, %a, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %pick = stablehlo.or %ge, %nan : tensor<i1>
      %v = stablehlo.select %pick, %a, %b : tensor<i1>, tensor<f32>
      stablehlo.return %v : tensor<f32>"""
_LAST_MIN = """
      %le = stablehlo.compare LE, %b, %a, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %v = stablehlo.select %le, %b, %a : tensor<i1>, tensor<f32>
      stablehlo.return %v : tensor<f32>"""


@pytest.mark.parametrize("body, want", [(_FIRST_MAX, (1, 0, 0, 0, 1, 0)),
                                        (_LAST_MIN, (0, 1, 1, 0, 0, 0))])
def test_value_pick_table_is_what_the_body_computes(body, want):
    from stablehlo.interpreter import evaluate
    picks = region_value_picks(_value_body(body))
    assert picks == want
    for state, side in zip(VALUE_STATES, picks):
        bits = _STATE_BITS[state]
        first, second = (np.array(b, np.uint32).view(np.float32) for b in bits)
        module = parse_module(f"""
func.func @main(%x: tensor<1xf32>, %v: tensor<f32>) -> tensor<f32> {{
  %r = stablehlo.reduce(%x init: %v) across dimensions = [0] : (tensor<1xf32>, tensor<f32>)
      -> tensor<f32>
    reducer(%a: tensor<f32>, %b: tensor<f32>) {{
{body}
    }}
  return %r : tensor<f32>
}}""")
        (value,) = evaluate(module, [second.reshape(1), first])
        assert int(np.asarray(value).view(np.uint32)) == bits[side], state


def test_monoids_and_pair_bodies_have_no_value_picks():
    assert region_value_picks(_value_body("""
      %m = stablehlo.maximum %a, %b : tensor<f32>
      stablehlo.return %m : tensor<f32>""")) is None
    assert region_value_picks(_body(_JAX_ARGMAX)) is None
