"""tools/quantized_agreement.py on a tiny decoder: its bounds and modes measure what they say."""
import pytest

torch = pytest.importorskip("torch")

from tools.bench_quantized_decode import build_model  # noqa: E402
from tools.quantized_agreement import measure_seed, quantized_copy  # noqa: E402


def test_rows_measure_their_errors():
    torch.manual_seed(0)
    model = build_model("nn", 128, 1, 256)
    ids = torch.randint(0, 256, (2, 32), generator=torch.Generator().manual_seed(1))
    rows = measure_seed(model, ids, ["weight-int8", "weight-int4:int4-head"], seed=0)
    agreement, error, _ = rows["f64"]
    assert agreement == 1.0 and error < 1e-5
    for level in (0.003, 0.01, 0.03):   # the added noise is what the error measures
        assert rows[f"noise {level:g}"][1] == pytest.approx(level, rel=0.1)
    assert rows["weight-int8"][1] < rows["weight-int4:int4-head"][1] / 5
    assert rows["weight-int4:int4-head"][0] < 1.0 and 0 < rows["weight-int8"][2]


def test_mode_options():
    model = build_model("nn", 64, 1, 128)
    layers = quantized_copy(model, "weight-int4:g16:int4-head")
    assert layers.lm_head.bits == 4 and layers.lm_head.scales.shape == (128, 4)
    assert quantized_copy(model, "weight-int4").lm_head.bits == 8
    with pytest.raises(SystemExit, match="unknown option 'x'"):
        quantized_copy(model, "weight-int4:x")
