"""A torchvision-style network (ResNet stem with max pooling, a basic residual block, exact
GELU, global average pooling, argmax of the logits) through the backend, forward and a
training step, against eager PyTorch, with no op left to the interpreter or to eager.

It holds every op the torchvision/timm CNNs used to send to the interpreter: the variadic
reduce_window of max_pool2d_with_indices, the argmax reduce, chlo.erf. The program runs at
opt level 0 (op by op on the native kernels, no C++ compile): a fusion only takes ops with
generated code, so an op without a native kernel shows here at any level.
"""
import copy
import logging

import torch
import torch.nn.functional as F

import pjrt
from frameworks.torch.tests.torch_support import fresh_compile


class _BasicBlock(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(channels)
        self.conv2 = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = torch.nn.BatchNorm2d(channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class _TinyResNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False), torch.nn.BatchNorm2d(8),
            torch.nn.ReLU(), torch.nn.MaxPool2d(3, stride=2, padding=1))
        self.block = _BasicBlock(8)
        self.pool = torch.nn.MaxPool2d(2, ceil_mode=True)
        self.fc = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = self.pool(self.block(self.stem(x)))
        logits = self.fc(F.gelu(x.mean((2, 3))))  # exact GELU: erf
        return logits, logits.argmax(1)


def test_resnet_block_with_max_pool_has_no_fallbacks(caplog, monkeypatch):
    monkeypatch.setenv("OPENHLO_CPU_OPT_LEVEL", "0")
    torch.manual_seed(0)
    model = _TinyResNet().train()
    ours = copy.deepcopy(model)
    x = torch.randn(4, 3, 30, 30)
    pjrt.reset_metrics()
    with caplog.at_level(logging.INFO, logger="openhlo.cpu"):
        logits, classes = fresh_compile(ours)(x)
        (logits ** 2).sum().backward()
    want_logits, want_classes = model(x)
    (want_logits ** 2).sum().backward()
    interpreted = [r.getMessage() for r in caplog.records
                   if "falls back to the interpreter" in r.getMessage()]
    assert interpreted == []
    assert pjrt.metrics().fallbacks == {}
    torch.testing.assert_close(logits, want_logits, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(classes, want_classes)
    for (name, got), want in zip(ours.named_parameters(), model.parameters()):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-3, atol=1e-4, msg=name)
