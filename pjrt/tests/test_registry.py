"""The backend registry: lookup, plugin registration, and loud, contained failures."""
from __future__ import annotations

import types

import pytest

from pjrt import api
from pjrt.registry import BACKENDS, available_backends, make_client, register_plugin


@pytest.fixture
def isolated_backends(monkeypatch):
    """BACKENDS with a private copy of its entries, restored after the test."""
    monkeypatch.setattr(BACKENDS, "_entries", dict(BACKENDS._entries))
    return BACKENDS


class _TinyClient(api.Client):
    def __init__(self, **options):
        self.options = options

    @property
    def platform_name(self) -> str:
        return "tiny"

    def devices(self):
        return [api.Device(0, "tiny"), api.Device(1, "tiny")]

    def compile(self, module, entry=None):
        raise NotImplementedError


def test_interpreter_is_registered():
    assert "interpreter" in available_backends()


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
