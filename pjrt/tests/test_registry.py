"""The backend registry: lookup, plugin registration, and loud, contained failures."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import types

import pytest

from pjrt import api
from pjrt.registry import (BACKENDS, DEFAULT_BACKEND, available_backends, make_client,
                           register_plugin)

_REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def isolated_backends(monkeypatch):
    """BACKENDS with a private copy of its entries, restored after the test."""
    monkeypatch.setattr(BACKENDS, "_entries", dict(BACKENDS._entries))
    return BACKENDS


class _TinyClient(api.Client):
    """A client with devices and no compiler: the least a plugin must define."""

    def __init__(self, **options):
        self.options = options

    @property
    def platform_name(self) -> str:
        return "tiny"

    def devices(self):
        return [api.Device(0, "tiny"), api.Device(1, "tiny")]

    def _compile(self, executable, device_assignment):
        raise api.UnimplementedError("tiny compiles nothing")

    def buffer_from_numpy(self, array, device=None):
        raise api.UnimplementedError("tiny holds no buffers")


def test_builtin_backends_are_registered_and_cpu_is_the_default():
    assert {"cpu", "interpreter"} <= set(available_backends())
    assert DEFAULT_BACKEND == "cpu"


def test_listing_backends_imports_no_plugin():
    code = ("import sys, pjrt; names = pjrt.available_backends(); "
            "print([m for m in sys.modules if m.startswith('pjrt.plugins.')])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=_REPO)
    assert out.stdout.strip() == "[]"


def test_unknown_backend_lists_known_ones():
    with pytest.raises(api.PluginError) as err:
        make_client("no-such-backend")
    assert "no-such-backend" in str(err.value)
    assert "interpreter" in str(err.value)


def test_register_plugin_and_options_reach_the_factory(isolated_backends):
    register_plugin("tiny", _TinyClient)
    client = make_client("tiny", answer=42)
    assert isinstance(client, _TinyClient)
    assert client.options == {"answer": 42}
    assert [d.id for d in client.addressable_devices()] == [0, 1]
    assert "tiny" in available_backends()


def test_registering_a_name_twice_fails_unless_override(isolated_backends):
    register_plugin("tiny", _TinyClient)
    with pytest.raises(KeyError, match="already registered"):
        register_plugin("tiny", _TinyClient)
    register_plugin("tiny", _TinyClient, override=True)


def test_factory_failure_names_backend_and_cause(isolated_backends):
    def broken(**options):
        raise RuntimeError("no device found")

    register_plugin("broken", broken)
    with pytest.raises(api.PluginError) as err:
        make_client("broken")
    assert "'broken'" in str(err.value) and "no device found" in str(err.value)
    # The other backends are unaffected.
    assert make_client("interpreter").platform_name == "interpreter"


def test_unimportable_lazy_plugin_names_itself(isolated_backends):
    register_plugin("ghost", "openhlo_no_such_module.plugin:create_client")
    assert "ghost" in available_backends()  # listing does not import it
    with pytest.raises(api.PluginError) as err:
        make_client("ghost")
    assert "ghost" in str(err.value)
    assert "openhlo_no_such_module" in str(err.value)
    assert make_client("interpreter").platform_name == "interpreter"


def test_factory_must_return_a_client(isolated_backends):
    register_plugin("not-a-client", lambda: object())
    with pytest.raises(api.PluginError, match="not a pjrt.api.Client"):
        make_client("not-a-client")


def test_entry_point_plugins_are_found_and_a_broken_one_is_contained(isolated_backends,
                                                                       monkeypatch):
    import importlib.metadata

    good = types.SimpleNamespace(name="ep-good", value="pjrt.tests.test_registry:_TinyClient")
    bad = types.SimpleNamespace(name="ep-bad", value="openhlo_missing_pkg:factory")

    def fake_entry_points(group=None):
        assert group == "openhlo.backends"
        return [good, bad]

    monkeypatch.setattr(importlib.metadata, "entry_points", fake_entry_points)
    monkeypatch.setattr(BACKENDS, "_scanned", False)
    assert {"ep-good", "ep-bad"} <= set(available_backends())
    assert make_client("ep-good").platform_name == "tiny"
    with pytest.raises(api.PluginError, match="ep-bad"):
        make_client("ep-bad")


def test_broken_plugins_beside_working_ones(isolated_backends):
    def raises(**options):
        raise OSError("driver not loaded")

    register_plugin("bad-import", "openhlo_missing_vendor.plugin:create_client")
    register_plugin("bad-factory", raises)
    register_plugin("bad-result", lambda **options: "not a client")
    causes = {"bad-import": "ModuleNotFoundError", "bad-factory": "driver not loaded",
              "bad-result": "returned str, not a pjrt.api.Client"}
    for name, cause in causes.items():
        with pytest.raises(api.PluginError) as err:
            make_client(name)
        assert f"{name!r}" in str(err.value) and cause in str(err.value)
        assert err.value.code == api.ErrorCode.UNAVAILABLE
    # The working backends are untouched, and a second attempt fails the same way.
    assert make_client("interpreter").compile(_ONE)()[0] == 1
    with pytest.raises(api.PluginError, match="bad-factory"):
        make_client("bad-factory")


def test_bad_options_are_plugin_errors_naming_the_backend():
    with pytest.raises(api.PluginError, match="'interpreter'.*num_devices must be a positive"):
        make_client("interpreter", num_devices=0)
    with pytest.raises(api.PluginError, match="'interpreter'.*TypeError.*colour"):
        make_client("interpreter", colour="red")


_ONE = """
func.func @main() -> tensor<i32> {
  %0 = stablehlo.constant dense<1> : tensor<i32>
  func.return %0 : tensor<i32>
}
"""
