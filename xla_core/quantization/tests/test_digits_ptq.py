"""Static int8 PTQ of a small CNN trained here on scikit-learn's digits (bundled, no download):
top-1 accuracy within 1 point of f32; the quantized program verifies in upstream MLIR, and its
lowered integer program gives the interpreter's predictions on the cpu backend."""
from __future__ import annotations

import numpy as np
import pytest

from xla_core.quantization import quantize
from xla_core.quantization.tests.helpers import (assert_upstream_verifies, interpret,
                                                 lowered, run_cpu)
from xla_core.quantization.tests.programs import cnn

BATCH = 120


def _digits():
    datasets = pytest.importorskip("sklearn.datasets")
    data = datasets.load_digits()
    images = (data.images / 16.0).astype(np.float32)[..., None]   # N x 8 x 8 x 1, NHWC
    labels = data.target.astype(np.int64)
    order = np.random.default_rng(0).permutation(len(labels))
    train, test = order[:1437], order[1437:1437 + 3 * BATCH]
    return images[train], labels[train], images[test], labels[test]


def _train(images: np.ndarray, labels: np.ndarray):
    """A conv(8)-relu-conv(8)-relu-dense(10) net; weights returned as NHWC/HWIO numpy."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)   # tiny tensors: threads only contend on a shared machine
    try:
        return _fit(torch, images, labels)
    finally:
        torch.set_num_threads(threads)


def _fit(torch, images: np.ndarray, labels: np.ndarray):
    conv1 = torch.nn.Conv2d(1, 8, 3, padding=1)
    conv2 = torch.nn.Conv2d(8, 8, 3, padding=1)
    dense = torch.nn.Linear(8 * 8 * 8, 10)
    params = [*conv1.parameters(), *conv2.parameters(), *dense.parameters()]
    optimizer = torch.optim.Adam(params, lr=3e-3)
    x = torch.from_numpy(images).permute(0, 3, 1, 2)
    y = torch.from_numpy(labels)
    for _ in range(30):
        for start in range(0, len(y), 256):
            xb, yb = x[start:start + 256], y[start:start + 256]
            hidden = torch.relu(conv2(torch.relu(conv1(xb))))
            logits = dense(hidden.permute(0, 2, 3, 1).flatten(1))   # NHWC flatten, as ours
            loss = torch.nn.functional.cross_entropy(logits, yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def kernel(conv):
        return conv.weight.detach().numpy().transpose(2, 3, 1, 0).copy()   # OIHW -> HWIO
    convs = [(kernel(c), c.bias.detach().numpy().copy()) for c in (conv1, conv2)]
    return convs, (dense.weight.detach().numpy().T.copy(), dense.bias.detach().numpy().copy())


def _batches(images):
    return [images[i:i + BATCH] for i in range(0, len(images), BATCH)]


def test_static_int8_ptq_keeps_digits_accuracy():
    train_x, train_y, test_x, test_y = _digits()
    convs, dense = _train(train_x, train_y)
    program = cnn(convs, dense, BATCH, (8, 8, 1))
    calibration = [[batch] for batch in _batches(train_x[:3 * BATCH])]
    quantized, report = quantize(program, "static-int8", calibration=calibration)
    assert report.quantized == ["convolution#0", "convolution#1", "dot_general#0"]
    assert_upstream_verifies(quantized)
    integer = lowered(quantized)
    float_predictions, int_predictions = [], []
    for batch in _batches(test_x):
        float_predictions.append(run_cpu(program, batch).argmax(axis=1))
        int_predictions.append(run_cpu(integer, batch).argmax(axis=1))
    # the integer program on the cpu backend against the interpreter's quantized semantics
    # (f32 sums there, exact integers here; logits are O(10), so 1e-5 relative)
    semantics = interpret(quantized, test_x[:BATCH])
    np.testing.assert_allclose(run_cpu(integer, test_x[:BATCH]), semantics, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_array_equal(semantics.argmax(axis=1), int_predictions[0])
    float_accuracy = np.mean(np.concatenate(float_predictions) == test_y)
    int_accuracy = np.mean(np.concatenate(int_predictions) == test_y)
    assert float_accuracy > 0.93, float_accuracy   # the net did learn
    assert abs(int_accuracy - float_accuracy) <= 0.01, (float_accuracy, int_accuracy)
    print(f"digits top-1: f32 {float_accuracy:.4f}, static int8 {int_accuracy:.4f}")
