"""Registers OpenHLO with JAX as the PJRT platform ``openhlo``.

JAX finds this module through the ``jax_plugins`` entry point (pyproject.toml) and calls
``initialize()`` at its first backend access. Options, read from the environment:
``OPENHLO_JAX_BACKEND`` (``cpu``, the default, ``interpreter``, or any backend registered
with pjrt, a vendor's included) and
``OPENHLO_JAX_NUM_DEVICES`` (default 1, per process) and, under ``jax.distributed``,
``OPENHLO_JAX_HOSTNAME`` (where this process's collectives listen; default loopback).
JAX's ``jax_pjrt_client_create_options`` config (``"backend:interpreter;num_devices:2"``)
overrides them per client.
"""
import logging
import os

logger = logging.getLogger(__name__)

PLATFORM = "openhlo"
_registered = False


def decode_program(code: bytes, format: str) -> str:
    """A PJRT program (``format == "mlir"``: a StableHLO portable artifact, or MLIR
    bytecode/text) -> StableHLO text our parser reads."""
    if format != "mlir":
        from pjrt.errors import UnimplementedError
        raise UnimplementedError(f"program format {format!r}: only 'mlir' is supported")
    from jax._src.interpreters import mlir
    from jaxlib.mlir import ir
    from jaxlib.mlir.dialects import stablehlo as jax_stablehlo
    # make_ir_context registers stablehlo, chlo, sdy and func: sdy attributes appear as soon
    # as the client has more than one device.
    with mlir.make_ir_context() as context:
        try:
            module = jax_stablehlo.deserialize_portable_artifact(context, code)
        except Exception:  # noqa: BLE001 - not an artifact: plain bytecode or text
            module = ir.Module.parse(code, context=context)
        return module.operation.get_asm(enable_debug_info=False)


def optimized_text(compiled) -> str:
    """Our optimized program of ``compiled`` (a ``jax.stages.Compiled`` for ``openhlo``) as
    StableHLO text, which ``openhlo run``/``opt`` and ``stablehlo.parse`` read.
    ``compiled.as_text()`` shows the same program converted to HLO text by jaxlib (its
    PJRT_Executable_OptimizedProgram route only prints HLO)."""
    from pjrt.c_api import loader
    from pjrt.c_api.introspection import optimized_text as text_of
    fingerprint = compiled.runtime_executable().fingerprint
    return text_of(loader.compiled_executable(fingerprint.decode()))


def make_client(backend: str, num_devices: int, distributed=None):
    """A client of any registered pjrt backend (ours or a vendor's, found by name in the
    ``openhlo.backends`` registry); ``num_devices`` goes to its factory unless it is 1, so
    backends with a fixed device count need not take the option. ``distributed`` (a
    pjrt.distributed DistributedOptions, under jax.distributed) makes it a multi-process
    client."""
    import pjrt
    options = {} if num_devices == 1 else {"num_devices": num_devices}
    if distributed is not None:
        options["distributed"] = distributed
    return pjrt.make_client(backend, **options)


def _options() -> dict:
    backend = os.environ.get("OPENHLO_JAX_BACKEND", "cpu")
    num_devices = int(os.environ.get("OPENHLO_JAX_NUM_DEVICES", "1"))
    options = {"backend": backend, "num_devices": num_devices}
    # Under jax.distributed: the address this process's collectives listen on (loopback
    # when the option is absent, enough for processes on one machine).
    hostname = os.environ.get("OPENHLO_JAX_HOSTNAME")
    if hostname:
        options["hostname"] = hostname
    return options


def unknown_backend_error(backend: str):
    """A PluginError naming OPENHLO_JAX_BACKEND, its value and the registered backends, or
    None when ``backend`` is registered (listing names imports no backend)."""
    import pjrt
    from pjrt.errors import PluginError
    known = pjrt.available_backends()
    if backend in known:
        return None
    return PluginError(f"OPENHLO_JAX_BACKEND={backend!r} is not an OpenHLO backend; known "
                       f"backends: {', '.join(known)} (vendors register theirs with "
                       f"pjrt.register_plugin or the 'openhlo.backends' entry point)")


def _requested() -> bool:
    """Whether JAX_PLATFORMS (jax_platforms) names our platform."""
    from jax._src import config
    return PLATFORM in (config.jax_platforms.value or "").split(",")


def _checked(options: dict):
    """Client options that JAX reads when it creates our backend (it calls a callable
    ``options`` then): an unknown backend raises there, and JAX reports it as the reason the
    backend failed. Checked then, not earlier: a program may register its backend with pjrt
    after this module initialized."""
    def checked() -> dict:
        error = unknown_backend_error(options["backend"])
        if error is not None:
            raise error
        return options
    return checked


PRIORITY = -1


def _allow_donation() -> None:
    """JAX lowers ``donate_argnums`` only for platforms on its allowlist; the plugin consumes
    donated buffers as PJRT defines (pjrt/c_api/executable.cc ``ReleaseDonated``)."""
    from jax._src.interpreters import mlir
    platforms = getattr(mlir, "_platforms_with_donation", None)
    if isinstance(platforms, list) and PLATFORM not in platforms:
        platforms.append(PLATFORM)


def initialize() -> None:
    """Install our callbacks into the plugin library and register it with JAX.

    Cheap and never raising: when our runtime is unusable, registration is skipped (a
    failing plugin would break every JAX backend when JAX_PLATFORMS is unset). An unknown
    OPENHLO_JAX_BACKEND is reported before any compile: when JAX_PLATFORMS names ``openhlo``,
    JAX's creation of the backend fails with it (RuntimeError "Unable to initialize backend
    'openhlo': ..."); otherwise the plugin is not registered and a warning says why.
    """
    global _registered
    if _registered:
        return  # registering twice is ALREADY_EXISTS in jaxlib
    try:
        from jax._src import xla_bridge

        from pjrt.c_api import loader
        options = _options()
        if not _requested():
            # JAX would start our backend alongside its own: a bad option must not fail them
            bad_backend = unknown_backend_error(options["backend"])
            if bad_backend is not None:
                raise bad_backend
        path = loader.install(decode_program, make_client)
    except Exception as exc:  # noqa: BLE001
        logger.warning("openhlo JAX plugin not registered: %s", exc)
        return
    # Below the cpu backend's priority (0): installing OpenHLO must not change which backend
    # JAX picks by default; users select it with JAX_PLATFORMS=openhlo or jax.devices("openhlo").
    # With JAX_PLATFORMS unset JAX starts every registered backend, and it warns about each
    # one it does not know ("experimental") even when the program never uses it: being
    # installed must not make every JAX program print a warning.
    getattr(xla_bridge, "_nonexperimental_plugins", set()).add(PLATFORM)
    _allow_donation()
    xla_bridge.register_plugin(PLATFORM, priority=PRIORITY, library_path=path,
                               options=_checked(options))
    # jax.ffi.register_ffi_target(..., platform="openhlo"), before or after this point
    from jaxlib import xla_client

    from frameworks.jax.custom_kernels import register_ffi_target
    xla_client.register_custom_call_handler(PLATFORM, register_ffi_target)
    _registered = True
