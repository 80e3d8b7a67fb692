"""The cpu backend's persistent compilation cache: a second process compiles nothing.

A compiled program is stored under ``$OPENHLO_CACHE_DIR/cpu_programs`` (the root from
``xla_core.cache_root``, default ``~/.cache/openhlo``) as ``<key>.pkl``: the optimized module
and the generated-kernel library of its fusions (whose shared object lives in the kernel cache,
codegen/build.py). On a hit of a program given as text nothing is parsed (the record holds
the module as given, too), and the pipeline and the code generator are skipped: only lowering
to the executor's program runs.

The key is the compile driver's (``xla_core.compile.cache_key``): the program text as given
(or the structural fingerprint of a Module), the compile options as given (entry, replicas,
partitions, overrides) and this backend's ``identity``: the optimization level, the
hardware description ``OPENHLO_HARDWARE`` names when it is set (the pipeline's cost model
reads it instead of this machine's calibration) and a fingerprint of the compiler itself
(the processor, and the size and modification time of every source file of stablehlo,
xla_core and this backend and of the native extension), so an edited or reinstalled
compiler, another machine sharing the folder, or another description never read an older
entry. Entries are written atomically (temporary file, then
rename); an unreadable entry is removed and the program compiled again. Like JAX's cache,
entries are pickles: the cache directory must be as trusted as the code itself.
``OPENHLO_CPU_CACHE=0`` turns the cache off.
"""
from __future__ import annotations

import hashlib
import logging
import os
import pickle
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

from xla_core.cache_root import cache_root

LOG = logging.getLogger("openhlo.cpu")

FORMAT = 2  # bump when the record layout changes
_COMPILER_FINGERPRINT: Optional[str] = None


@dataclass
class CachedProgram:
    source_module: object   # the Module as given (Executable.module), so a hit parses nothing
    module: object          # the optimized Module
    fusions: object         # codegen FusionLibrary of the entry function (or None)
    pass_seconds: list


def enabled() -> bool:
    return os.environ.get("OPENHLO_CPU_CACHE", "1") != "0"


def cache_dir() -> str:
    return cache_root("cpu_programs")


def _compiler_fingerprint() -> str:
    global _COMPILER_FINGERPRINT
    if _COMPILER_FINGERPRINT is None:
        import pjrt.plugins.cpu as backend
        import stablehlo
        import xla_core
        from pjrt.plugins.cpu.codegen.build import host_cpu
        # The processor too: entries name kernel libraries built for it.
        h = hashlib.sha256(f"{FORMAT} {sys.version} {host_cpu()}".encode())
        for package in (stablehlo, xla_core, backend):
            root = os.path.dirname(package.__file__)
            for folder, dirs, files in os.walk(root):
                dirs[:] = sorted(d for d in dirs if d not in ("tests", "__pycache__"))
                for name in sorted(files):
                    if name.endswith((".py", ".so")):
                        st = os.stat(os.path.join(folder, name))
                        h.update(f"{folder}/{name} {st.st_size} {st.st_mtime_ns}\n".encode())
        _COMPILER_FINGERPRINT = h.hexdigest()
    return _COMPILER_FINGERPRINT


def identity(level: int, pipeline: str | None = None, profile: str | None = None,
             host: str = "") -> str:
    """The backend's identity in the compile driver's cache key (``xla_core.compile.cache_key``
    adds the program and the compile options): the compiler's fingerprint, the optimization
    level, the pipeline it runs (``optimize.pipeline_name``), the hardware description
    ``OPENHLO_HARDWARE`` gives its fusion and scheduling passes, if set, the content hash of
    the profile its scheduler uses (``optimize.profile_of``), if any, and ``host``: what
    decides the devices sharing the host the pipeline describes (``CpuClient._compiler``).
    This machine's own calibration is left out: it is measured once per processor, which the
    fingerprint names, and a re-measurement's noise must not make every entry stale."""
    from xla_core.cost.hardware import HARDWARE_ENV, hardware
    described = f" hardware={hardware('cpu').cache_key()}" if os.environ.get(HARDWARE_ENV) \
        else ""
    used = f" profile={profile}" if profile else ""
    return (f"cpu {_compiler_fingerprint()} opt_level={level} pipeline={pipeline}{described}"
            f"{used} {host}")


def load(cache_key: str) -> Optional[CachedProgram]:
    path = os.path.join(cache_dir(), cache_key + ".pkl")
    try:
        with open(path, "rb") as f:
            record = pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a damaged entry: drop it, compile again
        LOG.warning("dropping unreadable compilation cache entry %s: %s", path, exc)
        _remove(path)
        return None
    library = getattr(record.fusions, "library", None)
    if not isinstance(record, CachedProgram) or (library and not os.path.exists(library)):
        _remove(path)  # its kernel library was cleaned away: compile again
        return None
    return record


def store(cache_key: str, record: CachedProgram) -> None:
    folder = cache_dir()
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(record, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, os.path.join(folder, cache_key + ".pkl"))
    except (OSError, pickle.PicklingError, RecursionError, MemoryError) as exc:
        # The cache only saves time: a program that cannot be stored still runs.
        LOG.info("program not cached: %s: %s", type(exc).__name__, exc)
        if tmp is not None:
            _remove(tmp)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
