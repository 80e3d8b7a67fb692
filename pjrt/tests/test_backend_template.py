"""The template backend: in process, its hooks run the pipeline, bind the generated program
and refuse ops at compile time; copied and renamed as a vendor would, installed with pip, it
passes the backend conformance suite and runs a JAX program.

The package is copied, renamed (package ``openhlo_acme``, backend ``acme``) and installed
offline into a temporary folder (setuptools builds it: needs the ``wheel`` package with
setuptools < 70.1); a fresh interpreter with that folder on its path finds the backend
through its ``openhlo.backends`` entry point, runs the suite (the contract's checks and the
conformance slice, whose check ops are the oracle), then ``jax.jit`` of a few ops through the
PJRT plugin with ``OPENHLO_JAX_BACKEND=acme``, compared with numpy.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from pjrt.api import UnimplementedError
from pjrt.host import HostClient
from pjrt.plugins.compile_driver import CompileDriverMixin

_REPO = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = _REPO / "examples" / "backend_template"

_SCRIPT = r'''
import json
import pjrt
from pjrt.testing import failures, run_suite
from tools.backend_check import conformance_checks

assert "acme" in pjrt.available_backends()
results = run_suite("acme", extra_areas={"conformance": conformance_checks()})
report = {"failures": failures(results), "statuses": [r.status for r in results],
          "platform": pjrt.make_client("acme").platform_name}

from pjrt.c_api.loader import library_path
if library_path() is not None:
    import numpy as np
    import frameworks.jax.plugin as plugin
    plugin.initialize()
    import jax
    import jax.numpy as jnp
    x = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    w = np.linspace(0, 2, 20, dtype=np.float32).reshape(4, 5)
    f = jax.jit(lambda x, w: jnp.sin(jnp.tanh(x @ w) * 2.0).sum(axis=0))
    np.testing.assert_allclose(np.asarray(f(x, w)), np.sin(np.tanh(x @ w) * 2).sum(axis=0),
                               rtol=1e-5, atol=1e-6)
    report["jax"] = [f"{d.platform}: {d.device_kind}" for d in jax.devices()]
print(json.dumps(report))
'''


SINE_OF_PRODUCT = """
func.func @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %one = stablehlo.constant dense<1.0> : tensor<3xf32>
  %0 = stablehlo.multiply %x, %one : tensor<3xf32>
  %1 = stablehlo.sine %0 : tensor<3xf32>
  func.return %1 : tensor<3xf32>
}"""


@pytest.fixture(scope="module")
def template():
    """The template's plugin module, loaded from its file (as installing it would)."""
    path = TEMPLATE / "src" / "openhlo_backend_template" / "plugin.py"
    spec = importlib.util.spec_from_file_location("_template_plugin", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_pipeline_runs_and_the_generated_program_is_bound(template):
    client = template.create_client(num_devices=2)
    exe = client.compile(SINE_OF_PRODUCT)
    assert isinstance(exe.executable.compiled.payload, template.Program)
    # cpu-opt removed the multiplication by one; the program as compiled keeps it.
    assert [op.name for op in exe.optimized_module.lookup("main").walk()] == [
        "stablehlo.sine", "func.return"]
    assert "stablehlo.multiply" in [op.name for op in exe.module.lookup("main").walk()]
    x = np.array([0.0, 0.5, 2.0], np.float32)
    (out,) = exe(x)
    np.testing.assert_allclose(out, np.sin(x), rtol=1e-6)
    device = client.devices()[1]
    (on_device,) = exe.execute([client.buffer_from_numpy(x, device)], device=device)
    np.testing.assert_allclose(on_device.to_numpy(), np.sin(x), rtol=1e-6)


def test_an_op_without_a_kernel_is_refused_at_compile(template, monkeypatch):
    from stablehlo.interpreter import KERNELS
    monkeypatch.setattr(KERNELS, "_entries", {name: kernel for name, kernel
                                              in KERNELS._entries.items()
                                              if name != "stablehlo.sine"})
    with pytest.raises(UnimplementedError) as error:
        template.create_client().compile(SINE_OF_PRODUCT)
    assert str(error.value) == ("<string>:5:3: 'stablehlo.sine' is not supported by the "
                                "template backend")


def test_a_host_client_needs_compile_program_or_a_generate_hook():
    class Empty(CompileDriverMixin, HostClient):
        platform_name = "empty"
    with pytest.raises(UnimplementedError, match="the empty backend implements neither "
                                                 "compile_program nor a generate hook"):
        Empty().compile(SINE_OF_PRODUCT)


def test_a_client_without_a_compiler_says_which_mixin_gives_one():
    class NoCompiler(HostClient):
        platform_name = "nocompiler"
    with pytest.raises(UnimplementedError, match="the nocompiler backend has no compiler: mix "
                                                 "in pjrt.plugins.compile_driver."
                                                 "CompileDriverMixin"):
        NoCompiler().compile(SINE_OF_PRODUCT)


def _copy_as_acme(target: pathlib.Path) -> None:
    """What a vendor does first: copy the template, rename the package and the backend."""
    shutil.copytree(TEMPLATE, target, ignore=shutil.ignore_patterns("BUILD", "build",
                                                                    "*.egg-info"))
    package = target / "src" / "openhlo_backend_template"
    package.rename(target / "src" / "openhlo_acme")
    for path in [target / "pyproject.toml", *(target / "src" / "openhlo_acme").glob("*.py")]:
        text = path.read_text()
        text = text.replace("openhlo_backend_template", "openhlo_acme")
        text = text.replace("openhlo-backend-template", "openhlo-acme")
        text = text.replace('PLATFORM = "template"', 'PLATFORM = "acme"')
        text = text.replace("\ntemplate = ", "\nacme = ")
        path.write_text(text)


def test_copied_template_passes_the_backend_suite_and_runs_jax(tmp_path):
    source = tmp_path / "acme"
    _copy_as_acme(source)
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-build-isolation", "--no-index", "--no-cache-dir",
                    "--target", str(target), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(target), str(_REPO)]),
               JAX_PLATFORMS="openhlo", OPENHLO_JAX_BACKEND="acme",
               OPENHLO_JAX_NUM_DEVICES="2")
    run = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert report["platform"] == "acme"
    assert report["failures"] == []
    contract_checks = 21  # and the conformance slice's files, when the suites are there
    assert report["statuses"].count("pass") >= contract_checks
    if "jax" in report:
        assert report["jax"] == ["openhlo: openhlo-acme"] * 2  # the acme backend behind JAX
