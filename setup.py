"""Builds the pybind11 extensions; everything else is declared in pyproject.toml."""
import glob

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import Extension, setup

# Compile the C++ files in parallel (one job per core; NPY_NUM_BUILD_JOBS overrides).
ParallelCompile("NPY_NUM_BUILD_JOBS").install()


def _openblas():
    """Include dir, lib dir and library name of the scipy-openblas32 wheel (a build requirement).

    The extension links the library by its soname and no rpath: at run time
    pjrt/plugins/cpu/blas.py loads it from the installed wheel before the extension is
    imported, so the build environment's copy may disappear.
    """
    import scipy_openblas32
    return (scipy_openblas32.get_include_dir(), scipy_openblas32.get_lib_dir(),
            scipy_openblas32.get_library())


_BLAS_INCLUDE, _BLAS_LIB, _BLAS_NAME = _openblas()

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
        include_dirs=["pjrt/plugins/cpu/native", _BLAS_INCLUDE],
        library_dirs=[_BLAS_LIB],
        libraries=[_BLAS_NAME],
        cxx_std=17,
        # -march=native: the extension is built on the machine that runs it (pip install
        # from source); a wheel for distribution would pin a baseline ISA instead.
        extra_compile_args=["-O3", "-march=native", "-fno-math-errno"],
        extra_link_args=["-pthread"],
    ),
    # The PJRT C-API plugin: a plain C++ shared library (no Python symbols; Python installs
    # its callbacks through an exported C function), dlopened by jaxlib.
    Extension(
        "pjrt.c_api._openhlo_pjrt",
        sorted(glob.glob("pjrt/c_api/*.cc")),
        language="c++",
        extra_compile_args=["-std=c++17", "-O2", "-fvisibility=hidden", "-pthread"],
        extra_link_args=["-Wl,--no-undefined", "-pthread"],
    ),
]

setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": build_ext})
