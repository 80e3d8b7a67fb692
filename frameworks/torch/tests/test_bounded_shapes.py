"""Bounded dynamic shapes in the torch backend (bounded_shapes.py, data_dependent.py):
dynamic dims padded to buckets compile once per bucket and equal eager at every size; a graph
that padding could change compiles each size exactly and says why; nonzero, boolean masks,
masked_select and unique compile at their upper bound with no eager fallback, equal to eager
for random, all-true and all-false masks."""
import pytest
import torch

import pjrt
import frameworks.torch as oht
from frameworks.torch.bounded_shapes import bucket
from frameworks.torch.tests.torch_support import fresh_compile, records

SIZES = [3, 5, 7, 9, 12, 16, 17, 20, 27, 31]


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.LayerNorm(16), torch.nn.GELU(),
                               torch.nn.Linear(16, 4), torch.nn.LogSoftmax(-1)).eval()


def _run_sizes(fn, sizes, feature_shape=(8,), declared=(2, 32)):
    """Call ``fn`` compiled at each batch size in ``sizes`` (a dynamic dim, in the range
    ``declared`` if given); every result must equal eager."""
    compiled = fresh_compile(fn)
    oht.reset_metrics()
    with torch.no_grad():
        for n in sizes:
            x = torch.randn(n, *feature_shape)
            if declared:
                torch._dynamo.mark_dynamic(x, 0, min=declared[0], max=declared[1])
            else:
                torch._dynamo.mark_dynamic(x, 0)
            torch.testing.assert_close(compiled(x), fn(x))
    return pjrt.metrics()


def test_ten_batch_sizes_in_a_declared_range_compile_twice():
    with oht.buckets([16, 32]):
        m = _run_sizes(_mlp(), SIZES)
    assert m.compiles == 2 and m.fallbacks == {}
    assert m.recompilations == {"torch: new input shapes and values": 1}
    report = oht.metrics_report()
    assert "bucketed calls: 10" in report and "bucket hits: 8" in report
    # inputs sent: 6 sizes padded to 16 and 4 to 32, against the sizes themselves
    padded, valid = 6 * 16 + 4 * 32, sum(SIZES)
    assert f"padding overhead: {(padded / valid - 1) * 100:.1f}%" in report


def test_power_of_two_buckets_are_the_default():
    m = _run_sizes(_mlp(), SIZES)  # buckets 4, 8, 16, 32
    assert (m.compiles, m.fallbacks) == (4, {})


def test_dynamic_true_without_a_declared_range():
    torch._dynamo.reset()
    model = _mlp()
    compiled = torch.compile(model, backend=oht.openhlo_backend, dynamic=True)
    oht.reset_metrics()
    with torch.no_grad():
        for n in (5, 6, 7, 8, 11):  # buckets 8 and 16
            x = torch.randn(n, 8)
            torch.testing.assert_close(compiled(x), model(x))
    assert pjrt.metrics().compiles == 2


def test_a_convolution_net_with_frozen_batch_norm_is_bucketed():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4),
                              torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 5)).eval()
    with oht.buckets([32]):
        # (Dynamo guards convolutions' batch to at most 15 here, so no declared range)
        m = _run_sizes(net, [2, 6, 9], feature_shape=(3, 4, 4), declared=None)
    assert (m.compiles, m.fallbacks) == (1, {})


def test_reductions_over_the_bucketed_dim_are_masked():
    def batch_statistics(x):  # padded rows must not count in any of these
        return (torch.tanh(x - x.mean(0)), torch.softmax(x, 0), x.amax(0), x.amin(0),
                x.sum(0), torch.log_softmax(x, 0))

    m = _run_sizes(batch_statistics, [3, 5, 7])  # buckets 4 and 8
    assert (m.compiles, m.fallbacks) == (2, {})


def test_padding_that_would_change_results_compiles_each_size_exactly(caplog):
    def standardized(x):  # no masked form of var: padded rows would count
        return x / x.var(0)

    m = _run_sizes(standardized, [3, 5, 7])
    assert m.compiles == 3
    (line,) = records(caplog, "compiles each size of its dynamic dims exactly")
    assert "aten.var.correction" in line and "reduces over the padded dim" in line
    assert "compiled per size:" in oht.metrics_report()


def test_training_batch_norm_statistics_are_not_padded():
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(8).train()
    compiled = fresh_compile(bn)
    for n in (3, 5):
        x = torch.randn(n, 8)
        torch._dynamo.mark_dynamic(x, 0, min=2, max=32)
        expected = torch.nn.functional.batch_norm(x, None, None, bn.weight, bn.bias, True)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), expected)


def test_bucket_choice():
    assert [bucket(n, "pow2", None) for n in (1, 3, 4, 5, 33)] == [1, 4, 4, 8, 64]
    assert bucket(20, "pow2", 24) == 24  # capped at the declared upper bound
    assert bucket(40, (16, 32), None) == 40  # above every bucket: exact
    assert bucket(40, (16, 32), 64) == 64
    assert bucket(5, (16, 32), 8) == 8


def test_a_bad_bucket_policy_is_an_error(monkeypatch):
    with pytest.raises(oht.BucketError, match="positive sizes"):
        with oht.buckets([0, 4]):
            pass
    monkeypatch.setenv("OPENHLO_TORCH_BUCKETS", "sixteen")
    from frameworks.torch.bounded_shapes import current_policy
    with pytest.raises(oht.BucketError, match="OPENHLO_TORCH_BUCKETS='sixteen'"):
        current_policy()
    monkeypatch.setenv("OPENHLO_TORCH_BUCKETS", "off")
    assert current_policy() is None


# ---- data-dependent sizes ----------------------------------------------------------------
# Dynamo breaks the graph before an op whose result size depends on the data unless
# capture_dynamic_output_shape_ops is set; with it, the op reaches the backend with an
# unbacked size bounded by its input's element count.

def _nonzero(x):
    return torch.nonzero(x > 0) * 2


def _mask_rows(x):
    return x[x > 0] * 3 + 1


def _mask_columns(x):
    return x[:, x.sum(0) > 0].relu()


def _masked_select_sum(x):
    return torch.masked_select(x, x > 0).sum(), x[x > 0].mean()


def _masked_softmax(x):
    kept = x[x > 0]
    return torch.softmax(kept, 0), torch.log_softmax(kept * 2, 0)


def _unique(x):
    return torch.unique(torch.round(x * 2), return_inverse=True, return_counts=True)


MASKS = {"random": lambda x: x, "all_true": lambda x: x.abs() + 0.5,
         "all_false": lambda x: -x.abs() - 0.5}


@pytest.mark.parametrize("fn", [_nonzero, _mask_rows, _mask_columns, _masked_select_sum,
                                _masked_softmax, _unique], ids=lambda f: f.__name__[1:])
@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_data_dependent_ops_compile_once_with_no_fallback(fn):
    compiled = fresh_compile(fn)
    oht.reset_metrics()
    torch.manual_seed(1)
    for name, make in MASKS.items():
        x = make(torch.randn(5, 4))
        torch.testing.assert_close(compiled(x), fn(x), equal_nan=True, msg=name)
    m = pjrt.metrics()
    assert (m.compiles, m.fallbacks) == (1, {})


@torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True)
def test_an_op_padding_could_change_runs_eagerly_on_the_real_size(caplog):
    def sorted_positive(x):
        return torch.sort(x[x > 0] * 2).values + 1

    compiled = fresh_compile(sorted_positive)
    oht.reset_metrics()
    for make in MASKS.values():
        x = make(torch.randn(5, 4))
        torch.testing.assert_close(compiled(x), sorted_positive(x))
    m = pjrt.metrics()
    assert m.compiles == 2 and sum(m.fallbacks.values()) == 3, m.fallbacks
    (line,) = set(records(caplog, "runs in eager"))
    assert "sort" in line and "works along the padded dim" in line
