"""``make_dynamic``: a module built at stand-in sizes becomes the ``?`` program, checked on
modules built by hand: every op with a symbolic size takes its dynamic form, no stand-in size
is left in any type or attribute, and XLA (jaxlib, after shape refinement) computes what
numpy does at two sizes; a symbolic size in an attribute with no dynamic form is an error
naming the op."""
import numpy as np
import pytest
import sympy

from frameworks.torch.dynamic_dims import SymbolicSizeError, make_dynamic
from stablehlo.builder import F32, Builder, tensor

N = sympy.Symbol("n")
STAND_IN = 9973
SIZES = {STAND_IN: N, 3 * STAND_IN: 3 * N, 3 * STAND_IN - 1: 3 * N - 1}


def _every_op_form() -> Builder:
    """x: n x 3 -> (reshape(x) + n + iota)[1:], with n a float scalar constant."""
    b = Builder()
    with b.function("main", [tensor((STAND_IN, 3), F32)]) as (_, (x,)):
        flat = b.reshape(x, (3 * STAND_IN,))
        size = b.broadcast_in_dim(b.constant(np.float32(STAND_IN)), (3 * STAND_IN,), [])
        total = b.add(b.add(flat, size), b.iota((3 * STAND_IN,), F32))
        b.return_(b.slice(total, [1], [3 * STAND_IN]))
    return b


def test_every_op_with_a_symbolic_size_takes_its_dynamic_form():
    module = _every_op_form().module
    make_dynamic(module, "main", {N: (0, 0)}, SIZES)
    func = module.lookup("main")
    names = {op.name for op in func.walk()}
    assert {"stablehlo.get_dimension_size", "stablehlo.dynamic_reshape",
            "stablehlo.dynamic_broadcast_in_dim", "stablehlo.dynamic_iota",
            "stablehlo.real_dynamic_slice"} <= names
    # (reshapes remain: they turn the size values into scalars)
    assert not names & {"stablehlo.broadcast_in_dim", "stablehlo.iota", "stablehlo.slice"}
    assert [t.shape for t in func.type.inputs] == [(None, 3)]
    assert [t.shape for t in func.type.results] == [(None,)]
    for op in func.walk():
        for value in op.results:
            assert not set(value.type.shape) & set(SIZES), op.name
        for attr in op.attributes.values():
            array = getattr(attr, "array", None)
            if array is not None:
                assert not np.isin(array, list(SIZES)).any(), op.name


@pytest.mark.parametrize("n", [2, 5])
def test_the_dynamic_program_computes_what_numpy_does_on_xla(n):
    pytest.importorskip("jax")
    from frameworks.torch.models.upstream import run_on_xla, verify
    module = _every_op_form().module
    make_dynamic(module, "main", {N: (0, 0)}, SIZES)
    verify(str(module))
    x = np.random.default_rng(n).standard_normal((n, 3)).astype(np.float32)
    expected = (x.reshape(-1) + n + np.arange(3 * n, dtype=np.float32))[1:]
    (got,) = run_on_xla(module, [x], [expected.shape])
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_a_symbolic_size_with_no_dynamic_form_is_an_error_naming_the_op():
    b = Builder()
    with b.function("main", [tensor((STAND_IN,), F32)]) as (_, (x,)):
        b.return_(b.pad(x, b.constant(np.float32(0)), [0], [STAND_IN]))
    with pytest.raises(SymbolicSizeError, match=r"'stablehlo.pad' attribute "
                                                r"'edge_padding_high' holds the symbolic size n"):
        make_dynamic(b.module, "main", {N: (0, 0)}, {STAND_IN: N, 2 * STAND_IN: 2 * N})
