"""Builds the pybind11 extensions; everything else is declared in pyproject.toml.

The first build compiles 31 C++ files (about 3 minutes on 2 idle cores). Object files are kept
in build/objcache/ under a key of everything that decides their contents (compiler, flags,
the source and the project's headers, the pybind11 and OpenBLAS versions), so a second
`pip install` of an unchanged tree only links (seconds), and after an edit only the files
that can see the edit are compiled again. Each file's progress is printed to the terminal
(pip hides a build's output unless run with -v) and appended to build/openhlo-build.log.
"""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import Extension, setup

# After setuptools: on Python 3.12+ distutils is setuptools' copy, importable only then.
from distutils import ccompiler  # noqa: E402

ROOT = os.path.dirname(os.path.abspath(__file__))
OBJECT_CACHE = os.path.join(ROOT, "build", "objcache")
BUILD_LOG = os.path.join(ROOT, "build", "openhlo-build.log")
KEEP_PER_SOURCE = 2  # cached objects kept per source file (the newest), so the cache stays small


def _openblas():
    """Include dir, lib dir and library name of the scipy-openblas32 wheel (a build requirement).

    The extension links the library by its soname and no rpath: at run time
    pjrt/plugins/cpu/blas.py loads it from the installed wheel before the extension is
    imported, so the build environment's copy may disappear.
    """
    import scipy_openblas32
    return (scipy_openblas32.get_include_dir(), scipy_openblas32.get_lib_dir(),
            scipy_openblas32.get_library())


class _Progress:
    """One line per compiled file, to the terminal when there is one and to the build log."""

    def __init__(self):
        os.makedirs(os.path.dirname(BUILD_LOG), exist_ok=True)
        self.log = open(BUILD_LOG, "a", encoding="utf-8")  # noqa: SIM115 (open for the build)
        try:
            self.tty = open("/dev/tty", "w", encoding="utf-8")  # noqa: SIM115
        except OSError:  # no controlling terminal (CI): the log and pip -v still have it
            self.tty = None
        self.lock = threading.Lock()

    def say(self, line: str) -> None:
        line = f"[openhlo build {time.strftime('%H:%M:%S')}] {line}\n"
        with self.lock:
            for stream in (self.log, self.tty, sys.stderr):
                if stream is not None:
                    stream.write(line)
                    stream.flush()


_PROGRESS = None


def _progress() -> _Progress:
    global _PROGRESS
    if _PROGRESS is None:
        _PROGRESS = _Progress()
    return _PROGRESS


def _file_digest(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _project_headers_digest() -> str:
    """One digest over every C/C++ header in the tree: an edited header recompiles all files
    (simple and safe; the headers change rarely)."""
    h = hashlib.sha256()
    for top in ("stablehlo", "pjrt"):
        for path in sorted(glob.glob(os.path.join(ROOT, top, "**", "*.h"), recursive=True)):
            h.update(os.path.relpath(path, ROOT).encode())
            h.update(_file_digest(path).encode())
    return h.hexdigest()


@lru_cache(maxsize=None)
def _toolchain_digest(compiler_command: tuple) -> str:
    """The compiler's identity and the versions of the header-only build requirements.

    pip's isolated build environment lives in a new temporary folder each time; its path is
    in the include flags, so the flags are keyed without it and the packages by version.
    """
    import pybind11
    import scipy_openblas32
    try:
        version = subprocess.run([compiler_command[0], "--version"], capture_output=True,
                                 text=True, check=False).stdout
    except OSError:
        version = ""
    return hashlib.sha256("\n".join([
        " ".join(compiler_command), version, pybind11.__version__,
        getattr(scipy_openblas32, "__version__", ""), sys.version,
    ]).encode()).hexdigest()


_TEMP_ENV = re.compile(r"/[^\s]*?pip-build-env-[^/\s]+")


def _object_key(compiler, src: str, args: list, headers: str) -> str:
    flags = _TEMP_ENV.sub("<build-env>", " ".join(map(str, args)))
    return hashlib.sha256("\n".join([
        _toolchain_digest(tuple(compiler.compiler_so)), flags, headers,
        os.path.relpath(os.path.abspath(src), ROOT), _file_digest(src),
    ]).encode()).hexdigest()[:32]


def _cache_path(src: str, key: str) -> str:
    stem = os.path.relpath(os.path.abspath(src), ROOT).replace(os.sep, "__")
    return os.path.join(OBJECT_CACHE, f"{stem}.{key}.o")


def _prune(src: str) -> None:
    stem = os.path.relpath(os.path.abspath(src), ROOT).replace(os.sep, "__")
    entries = sorted(glob.glob(os.path.join(OBJECT_CACHE, glob.escape(stem) + ".*.o")),
                     key=os.path.getmtime, reverse=True)
    for stale in entries[KEEP_PER_SOURCE:]:
        os.remove(stale)


def _cached_parallel_compile(self, sources, output_dir=None, macros=None, include_dirs=None,
                             debug=0, extra_preargs=None, extra_postargs=None, depends=None):
    """CCompiler.compile with the object cache, one job per core (NPY_NUM_BUILD_JOBS overrides)."""
    macros, objects, extra_postargs, pp_opts, build = self._setup_compile(
        output_dir, macros, include_dirs, sources, depends, extra_postargs)
    cc_args = self._get_cc_args(pp_opts, debug, extra_preargs)
    headers = _project_headers_digest()
    progress = _progress()
    os.makedirs(OBJECT_CACHE, exist_ok=True)
    done = [0]

    def key_of(obj):
        src = build[obj][0]
        key = _object_key(self, src, list(cc_args) + list(extra_postargs or []), headers)
        return _cache_path(src, key)

    cache_of = {obj: key_of(obj) for obj in objects}

    def one(obj):
        src, ext = build[obj]
        cached = cache_of[obj]
        start = time.perf_counter()
        if os.path.exists(cached):
            shutil.copyfile(cached, obj)
            os.utime(cached)  # most recently used: kept by _prune
            how = "cached"
        else:
            self._compile(obj, src, ext, cc_args, extra_postargs, pp_opts)
            tmp = f"{cached}.{os.getpid()}.{threading.get_ident()}.tmp"
            shutil.copyfile(obj, tmp)
            os.replace(tmp, cached)  # atomic: a killed build never leaves half an object
            how = f"compiled in {time.perf_counter() - start:.0f} s"
        _prune(src)
        with progress.lock:
            done[0] += 1
            count = done[0]
        progress.say(f"[{count}/{len(objects)}] {os.path.relpath(src, ROOT)} ({how})")

    jobs = int(os.environ.get("NPY_NUM_BUILD_JOBS") or os.cpu_count() or 1)
    todo = sum(not os.path.exists(path) for path in cache_of.values())
    where = os.path.commonpath([os.path.relpath(os.path.abspath(build[o][0]), ROOT)
                                for o in objects]) if objects else ""
    progress.say(f"{where}: {len(objects)} C++ files, {todo} to compile ({jobs} at a time; "
                 "about 15 s each on one core), the rest from build/objcache")
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for _ in pool.map(one, objects):
            pass
    return objects


ccompiler.CCompiler.compile = _cached_parallel_compile

_BLAS_INCLUDE, _BLAS_LIB, _BLAS_NAME = _openblas()

# gloo (Debian's libgloo-dev) carries the cpu backend's collectives between processes. Without
# its headers the extension builds without it, and a multi-process client raises
# UnimplementedError naming the package (pjrt/plugins/cpu/plugin.py).
_GLOO = os.path.exists("/usr/include/gloo/rendezvous/context.h")

EXTENSIONS = [
    Pybind11Extension(
        "stablehlo._C._native",
        ["stablehlo/_C/native.cc"],
        cxx_std=17,
        extra_compile_args=["-O3"],
    ),
    Pybind11Extension(
        "pjrt.plugins.cpu._native",
        sorted(glob.glob("pjrt/plugins/cpu/native/*.cc")),
        include_dirs=["pjrt/plugins/cpu/native", ".", _BLAS_INCLUDE],  # .: pjrt/native
        library_dirs=[_BLAS_LIB],
        libraries=[_BLAS_NAME] + (["gloo"] if _GLOO else []),
        define_macros=[("OPENHLO_HAVE_GLOO", "1")] if _GLOO else [],
        cxx_std=17,
        # -march=native: the extension is built on the machine that runs it (pip install
        # from source); a wheel for distribution would pin a baseline ISA instead.
        # -ffp-contract=off: the kernels round where the generated ones do (codegen/build.py),
        # so a program gives the same bits on both tiers (and no a*b+c becomes one FMA).
        extra_compile_args=["-O3", "-march=native", "-fno-math-errno", "-ffp-contract=off"],
        extra_link_args=["-pthread"],
    ),
    # The cuda backend's runtime: no CUDA header or library at build time; the driver and
    # cuBLAS are dlopened when a client is made (pjrt/plugins/cuda/native/driver_api.h).
    Pybind11Extension(
        "pjrt.plugins.cuda._cuda_runtime",
        sorted(glob.glob("pjrt/plugins/cuda/native/*.cc")),
        include_dirs=["pjrt/plugins/cuda/native"],
        libraries=["dl"],
        cxx_std=17,
        extra_compile_args=["-O2"],
    ),
    # The PJRT C-API plugin: a plain C++ shared library (no Python symbols; Python installs
    # its callbacks through an exported C function), dlopened by jaxlib.
    Extension(
        "pjrt.c_api._openhlo_pjrt",
        sorted(glob.glob("pjrt/c_api/*.cc")),
        include_dirs=["."],  # pjrt/native
        language="c++",
        extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", "-pthread"],
        extra_link_args=["-Wl,--no-undefined", "-pthread"],
    ),
]

setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": build_ext})
