"""Builds the pybind11 extensions; everything else is declared in pyproject.toml."""
from pybind11.setup_helpers import Pybind11Extension, build_ext
from setuptools import setup

EXTENSIONS = [
    Pybind11Extension(
        "stablehlo._C._native",
        ["stablehlo/_C/native.cc"],
        cxx_std=17,
        extra_compile_args=["-O3"],
    ),
]

setup(ext_modules=EXTENSIONS, cmdclass={"build_ext": build_ext})
