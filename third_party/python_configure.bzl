"""A repository rule that finds the local Python and pybind11 by asking the interpreter.

`python_configure(name = "local_python")` runs `python3` (or $OPENHLO_PYTHON) once and creates
@local_python with:
  :python_headers    cc_library over sysconfig.get_paths()["include"]
  :pybind11          cc_library over pybind11.get_include() (plus the Python headers)
  :openblas          cc_library over the scipy-openblas32 wheel (cblas.h + libscipy_openblas.so)
  :python_toolchain  a Python toolchain whose interpreter is that python3's sys.executable,
                     so tests see the packages installed for it (jax, jaxlib, pytest, ...)
No path is written by hand; the rule re-runs when PATH or OPENHLO_PYTHON changes.
"""

# One "key=value" line per fact; a missing package prints an empty value. Keyed lines, not
# positions: a blank trailing value must not shift or drop the others.
_QUERY = """
import sys, sysconfig
print("executable=" + sys.executable)
print("python_include=" + sysconfig.get_paths()["include"])
try:
    import pybind11
    print("pybind11_include=" + pybind11.get_include())
except ImportError:
    print("pybind11_include=")
try:
    import scipy_openblas32
    print("openblas_include=" + scipy_openblas32.get_include_dir())
    print("openblas_lib=" + scipy_openblas32.get_lib_dir())
except ImportError:
    print("openblas_include=")
    print("openblas_lib=")
"""

_BUILD = """\
load("@bazel_tools//tools/python:toolchain.bzl", "py_runtime_pair")

package(default_visibility = ["//visibility:public"])

cc_library(
    name = "python_headers",
    hdrs = glob(["python_include/**/*.h"]),
    includes = ["python_include"],
)

cc_library(
    name = "pybind11",
    hdrs = glob(["pybind11_include/**/*.h"]),
    includes = ["pybind11_include"],
    deps = [":python_headers"],
)

# OpenBLAS from the scipy-openblas32 wheel: cblas.h and the library the cpu backend links.
cc_library(
    name = "openblas",
    hdrs = glob(["openblas_include/*.h"]),
    includes = ["openblas_include"],
    srcs = glob(["openblas_lib/libscipy_openblas*.so"]),
)

py_runtime(
    name = "py3_runtime",
    interpreter_path = "{python}",
    python_version = "PY3",
    stub_shebang = "#!{python}",
)

py_runtime_pair(
    name = "runtime_pair",
    py3_runtime = ":py3_runtime",
)

toolchain(
    name = "python_toolchain",
    toolchain = ":runtime_pair",
    toolchain_type = "@bazel_tools//tools/python:toolchain_type",
)
"""

def _python_configure_impl(ctx):
    python = ctx.os.environ.get("OPENHLO_PYTHON") or ctx.which("python3")
    if not python:
        fail("python3 is not on PATH (or set OPENHLO_PYTHON to an interpreter)")
    result = ctx.execute([python, "-c", _QUERY])
    if result.return_code != 0:
        fail("could not query %s: %s" % (python, result.stderr))
    facts = {}
    for line in result.stdout.split("\n"):
        key, sep, value = line.partition("=")
        if sep:
            facts[key] = value.strip()
    executable = facts.get("executable", python)
    python_include = facts.get("python_include", "")
    pybind11_include = facts.get("pybind11_include", "")
    openblas_include = facts.get("openblas_include", "")
    openblas_lib = facts.get("openblas_lib", "")
    if not pybind11_include:
        fail("pybind11 is not installed for %s: run `%s -m pip install -e \".[test]\"` " %
             (executable, executable) + "(the test extra brings pybind11 for Bazel builds)")
    if not openblas_include:
        fail("scipy-openblas32 is not installed for %s: run `%s -m pip install scipy-openblas32`" %
             (executable, executable))
    ctx.symlink(python_include, "python_include")
    ctx.symlink(pybind11_include, "pybind11_include")
    ctx.symlink(openblas_include, "openblas_include")
    ctx.symlink(openblas_lib, "openblas_lib")
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)
    ctx.file("BUILD", _BUILD.format(python = executable))

python_configure = repository_rule(
    implementation = _python_configure_impl,
    environ = ["OPENHLO_PYTHON", "PATH"],
    local = True,
)
