"""Macros that keep BUILD files glob-driven: new .py and tests/test_*.py files need no edit.

- py_module(name, deps): the py_library of one module directory (every .py file below it
  that is not under a tests/ folder, plus its data files) and one py_test per test file.
- py_tests_from_glob(deps): one py_test per `**/tests/test_*.py`, run through pytest by
  //third_party:pytest_runner.py. The target is the file's path without `.py`, e.g.
  `bazel test //stablehlo:text/tests/test_literals`.
- pybind11_extension(name, srcs): `<name>.so`, importable as `<package>.<name>` from runfiles.
- py_console_script(name, entry_point, deps): a py_binary for `module:function`.
"""

# Files that are never data of a library: code, tests, build files and build outputs.
_NOT_DATA = [
    "**/*.py",
    "**/*.pyc",
    "**/__pycache__/**",
    "**/tests/**",
    "**/*.so",
    "**/BUILD",
    "**/*.bzl",
]

# Read by pytest itself: markers, options, shared fixtures.
_PYTEST_CONFIG = "//:pytest_config"

_RUNNER = "//third_party:pytest_runner"

def py_module(name, deps = [], data = [], test_deps = [], test_data = [],
              visibility = ["//visibility:public"]):
    """The library of this module directory plus a py_test for each of its test files.

    `data` adds build outputs (e.g. a pybind11_extension's `.so`) to the library;
    `test_deps` and `test_data` are what the tests need beyond the library. A test that imports
    another module's test support (`pjrt.custom_kernels.tests.rms_norm`) names that module's
    `:test_support` in `test_data`; tools/tests/test_build_files.py checks that it does."""
    native.py_library(
        name = name,
        srcs = native.glob(["**/*.py"], exclude = ["**/tests/**"]),
        data = native.glob(["**/*"], exclude = _NOT_DATA) + data,
        deps = deps,
        visibility = visibility,
    )
    py_tests_from_glob(deps = [":" + name] + test_deps, test_data = test_data)

def py_tests_from_glob(deps, size = "medium", tags = [], test_data = []):
    """One py_test per `**/tests/test_*.py`; other files under tests/ are their data, and
    `:test_support` for the tests of other modules."""
    test_files = native.glob(["**/tests/test_*.py"])
    support = native.glob(
        ["**/tests/**", "**/conftest.py"],
        exclude = test_files + ["**/__pycache__/**", "**/*.pyc"],
    )
    native.filegroup(
        name = "test_support",
        srcs = support,
        visibility = ["//visibility:public"],
    )
    for src in test_files:
        name = src[:-len(".py")]
        main = name + "_pytest_main.py"
        native.genrule(
            name = name + "_pytest_main",
            srcs = ["//third_party:pytest_runner.py"],
            outs = [main],
            cmd = "cp $< $@",
        )
        native.py_test(
            name = name,
            srcs = [main, src],
            main = main,
            args = ["$(rootpath %s)" % src],
            data = support + [_PYTEST_CONFIG] + test_data,
            deps = deps,
            size = size,
            tags = tags,
        )

def pybind11_extension(name, srcs, deps = [], copts = [], visibility = ["//visibility:public"]):
    """A pybind11 extension module `<name>.so` (C++17, -O3), usable as data of a py_library."""
    native.cc_binary(
        name = name + ".so",
        srcs = srcs,
        copts = ["-std=c++17", "-O3", "-fvisibility=hidden"] + copts,
        linkshared = True,
        linkstatic = True,
        deps = deps + ["@local_python//:pybind11"],
        visibility = visibility,
    )

def py_console_script(name, entry_point, deps, visibility = ["//visibility:public"]):
    """A py_binary that calls `module:function`, like a pip console script."""
    module, function = entry_point.split(":")
    main = name + "_main.py"
    lines = ["import sys", "from %s import %s" % (module, function), "sys.exit(%s())" % function]
    native.genrule(
        name = name + "_main",
        outs = [main],
        cmd = " && ".join(["echo '%s' >> $@" % line for line in lines]),
    )
    native.py_binary(
        name = name,
        srcs = [main],
        main = main,
        deps = deps,
        visibility = visibility,
    )
