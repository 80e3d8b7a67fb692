"""The backend registry: a backend is a plugin whose factory creates a Client.

Backends come from code (``register_plugin(name, factory)``) or from installed
packages, through the ``openhlo.backends`` entry-point group whose values are
``"pkg.module:factory"`` strings. Entry points are read on the first lookup
and imported only when their backend is asked for, so one broken plugin fails
loudly, naming itself and its cause, and leaves every other backend usable.
"""
from __future__ import annotations

from typing import Callable

from stablehlo.errors import api_boundary
from stablehlo.registry import Registry, RegistryError


from pjrt.api import Client, PluginError

BACKENDS: Registry[Callable[..., Client]] = Registry(
    "backend", entry_point_group="openhlo.backends")

# Built-in backends are lazy "module:factory" strings: importing pjrt stays cheap.
BACKENDS.register("cpu", "pjrt.plugins.cpu.plugin:create_client")
BACKENDS.register("interpreter", "pjrt.plugins.interpreter.plugin:create_client")
BACKENDS.register("cuda", "pjrt.plugins.cuda.plugin:create_client")

DEFAULT_BACKEND = "cpu"


def register_plugin(name: str, factory: Callable[..., Client] | str, *,
                    override: bool = False) -> None:
    """Register a backend ``factory(**options) -> Client`` (or a lazy "mod:attr")."""
    BACKENDS.register(name, factory, override=override)


def available_backends() -> list[str]:
    """Names of every registered backend; nothing is imported to list them."""
    return [str(name) for name in BACKENDS.names()]


@api_boundary
def make_client(backend: str = DEFAULT_BACKEND, **options) -> Client:
    """Create a client of ``backend``; options go to the plugin's factory.

    Raises PluginError naming the backend when the plugin cannot be loaded,
    its factory fails (bad options included), or it returns something that is
    not a Client; an unknown name lists the known backends.
    """
    try:
        factory = BACKENDS.get(backend)
    except RegistryError as exc:
        raise PluginError(str(exc)) from exc
    try:
        client = factory(**options)
    except Exception as exc:
        raise PluginError(f"backend {backend!r} failed to create a client: "
                          f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(client, Client):
        raise PluginError(f"backend {backend!r}: factory returned "
                          f"{type(client).__name__}, not a pjrt.api.Client")
    return client
