"""tools/trained_decoder.py and quantized_agreement's ``--trained`` measurement on a tiny
decoder trained for a few steps: the split, that training learns, the cache, the agreement."""
import copy
import io

import pytest

torch = pytest.importorskip("torch")

from tools.bench_quantized_decode import build_model  # noqa: E402
from tools.quantized_agreement import agreement, compiled_agreement, measure_seed  # noqa: E402
from tools.quantized_agreement import quantized_copy  # noqa: E402
from tools.trained_decoder import BYTE_VOCAB, TrainingSettings, next_byte_quality  # noqa: E402
from tools.trained_decoder import stdlib_text, trained_decoder, windows  # noqa: E402

TINY = TrainingSettings(kind="nn", hidden=64, layers=1, steps=12, batch=4, length=32,
                        learning_rate=1e-2)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """``(model, first log, second log, second seconds, retrained model)``, cached in a
    folder of the module's own."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("OPENHLO_CACHE_DIR", str(tmp_path_factory.mktemp("trained")))
        first_log, second_log = io.StringIO(), io.StringIO()
        model, seconds = trained_decoder(TINY, log=first_log)
        assert seconds > 0
        cached, cached_seconds = trained_decoder(TINY, log=second_log)
        retrained, _ = trained_decoder(TINY, retrain=True, log=None)
    return model, cached, first_log.getvalue(), second_log.getvalue(), cached_seconds, retrained


def held_out_windows(seed=0):
    return windows(stdlib_text()[1], 4, TINY.length, torch.Generator().manual_seed(seed))


def test_held_out_text_is_not_in_the_training_text():
    train, held_out = stdlib_text()
    assert 4 * len(held_out) < len(train) < 12 * len(held_out)
    middle = len(held_out) // 2
    assert bytes(train.numpy()).find(bytes(held_out[middle:middle + 2000].numpy())) == -1


def test_training_learns_and_is_cached_and_reproducible(trained):
    model, cached, first_log, second_log, cached_seconds, retrained = trained
    assert f"step {TINY.steps}/{TINY.steps}" in first_log
    assert second_log == "" and cached_seconds == 0.0
    for name, value in model.state_dict().items():
        assert torch.equal(value, cached.state_dict()[name]), name
        assert torch.equal(value, retrained.state_dict()[name]), name
    torch.manual_seed(TINY.seed)
    untrained = build_model(TINY.kind, TINY.hidden, TINY.layers, BYTE_VOCAB).eval()
    ids, targets = held_out_windows()
    untrained_loss, _ = next_byte_quality(untrained, ids, targets)
    loss, accuracy = next_byte_quality(model, ids, targets)
    assert loss < untrained_loss - 0.5 and accuracy > 0.1


def test_agreement_is_full_for_the_model_and_not_for_corrupted_weights(trained):
    model = trained[0]
    ids, _ = held_out_windows(seed=1)
    rows = measure_seed(model, ids, ["weight-int8"], seed=0)
    assert rows["f64"][0] == 1.0 and rows["f64"][1] < 1e-5
    corrupted = copy.deepcopy(model)
    with torch.no_grad():
        weight = corrupted.lm_head.weight
        weight += weight.std() * torch.randn(weight.shape, generator=torch.Generator()
                                             .manual_seed(2))
        wanted = model(ids).argmax(-1)
        assert agreement(corrupted(ids), wanted) < 0.9
    assert rows["weight-int8"][0] > 0.9


def test_compiled_quantized_model_picks_the_eager_argmax(trained):
    ids, _ = held_out_windows(seed=2)
    same, error = compiled_agreement(quantized_copy(trained[0], "weight-int8"), ids[:1, :8])
    assert same == 1.0 and error < 1e-4
