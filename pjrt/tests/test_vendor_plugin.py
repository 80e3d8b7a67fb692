"""The example vendor plugin, installed with pip as a vendor would, found by name.

The package is copied (pip builds in the source tree) and installed offline
into a temporary folder (setuptools builds it: needs the ``wheel`` package
with setuptools < 70.1); a fresh interpreter with that folder on its path
finds the backend through its ``openhlo.backends`` entry point. Results are
compared with numpy.
"""
from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

_REPO = pathlib.Path(__file__).resolve().parents[2]

_SCRIPT = r'''
import json
import numpy as np
import pjrt

assert "vendor_example" in pjrt.available_backends()
client = pjrt.make_client("vendor_example", num_devices=2)
exe = client.compile("""
func.func @main(%x: tensor<2x3xf32>, %w: tensor<4x3xf32>, %b: tensor<4xf32>)
    -> (tensor<2x4xf32>, tensor<4xf32>) {
  %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [1]
      : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<4xf32>) -> tensor<2x4xf32>
  %2 = stablehlo.add %0, %1 : tensor<2x4xf32>
  %3 = stablehlo.tanh %2 : tensor<2x4xf32>
  %4 = stablehlo.exponential %3 : tensor<2x4xf32>
  %c = stablehlo.constant dense<0.0> : tensor<f32>
  %5 = stablehlo.reduce(%4 init: %c) applies stablehlo.add across dimensions = [0]
      : (tensor<2x4xf32>, tensor<f32>) -> tensor<4xf32>
  %6 = stablehlo.transpose %4, dims = [1, 0] : (tensor<2x4xf32>) -> tensor<4x2xf32>
  %7 = stablehlo.reshape %6 : (tensor<4x2xf32>) -> tensor<2x4xf32>
  %8 = stablehlo.convert %7 : (tensor<2x4xf32>) -> tensor<2x4xf64>
  %9 = stablehlo.convert %8 : (tensor<2x4xf64>) -> tensor<2x4xf32>
  %10 = stablehlo.maximum %9, %4 : tensor<2x4xf32>
  %11 = stablehlo.negate %10 : tensor<2x4xf32>
  %12 = stablehlo.divide %11, %1 : tensor<2x4xf32>
  %13 = stablehlo.subtract %12, %0 : tensor<2x4xf32>
  %14 = stablehlo.multiply %13, %2 : tensor<2x4xf32>
  func.return %14, %5 : tensor<2x4xf32>, tensor<4xf32>
}""")
rng = np.random.default_rng(0)
x = rng.standard_normal((2, 3)).astype(np.float32)
w = rng.standard_normal((4, 3)).astype(np.float32)
b = (rng.uniform(1, 2, 4)).astype(np.float32)
h = x @ w.T
e = np.exp(np.tanh(h + b))
mixed = e.T.reshape(2, 4)
expected = (-np.maximum(mixed, e) / b - h) * (h + b)
out, sums = exe(x, w, b)
np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)
np.testing.assert_allclose(sums, e.sum(axis=0), rtol=1e-5)
device = client.devices()[1]
(on_device,) = exe.execute([client.buffer_from_numpy(a, device) for a in (x, w, b)],
                           device=device)[:1]
assert on_device.device == device

try:
    client.compile("""
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.exponential %x : tensor<4xf32>
  %1 = stablehlo.sine %0 : tensor<4xf32>
  func.return %1 : tensor<4xf32>
}""")
    unsupported = None
except pjrt.UnimplementedError as exc:
    unsupported = str(exc)
print(json.dumps({"platform": client.platform_name, "unsupported": unsupported}))
'''


def test_pip_installed_vendor_plugin_is_found_by_name(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(_REPO / "examples" / "vendor_plugin", source)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--no-cache-dir",
                    "--target", str(target), str(source)],
                   check=True, capture_output=True, text=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(_REPO)]))
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["platform"] == "vendor_example"
    assert report["unsupported"] == ("<string>:4:3: 'stablehlo.sine' is not supported by "
                                     "the vendor_example backend")
