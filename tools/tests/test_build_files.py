"""Every Bazel test sees the test support it imports: a test (or a support module under tests/)
that imports another Bazel package's test support (`pjrt.custom_kernels.tests.rms_norm` from
frameworks/jax) needs that package's `:test_support` in its own BUILD's `test_data`, else
`bazel test` fails to import it while pytest, which sees the whole tree, passes."""
from __future__ import annotations

import re
from pathlib import Path

from tools.tests.helpers import REPO_ROOT

SKIP = ("third_party", "build", "examples")
IMPORT = re.compile(r"^\s*(?:from|import)\s+([A-Za-z_][\w.]*\.tests(?:\.\w+)?)\b", re.M)


def bazel_package(path: Path) -> Path:
    """The nearest folder at or above ``path``'s folder with a BUILD file."""
    folder = path.parent
    while not (folder / "BUILD").is_file():
        folder = folder.parent
    return folder


def module_file(name: str) -> Path | None:
    base = REPO_ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def files_under_tests() -> list[Path]:
    return [p for p in REPO_ROOT.glob("**/tests/**/*.py")
            if p.relative_to(REPO_ROOT).parts[0] not in SKIP]


def support_needed(start: Path) -> set[Path]:
    """The Bazel packages whose test support ``start`` imports, directly or through other
    test support."""
    seen, todo, packages = {start}, [start], set()
    while todo:
        for name in IMPORT.findall(todo.pop().read_text()):
            target = module_file(name)
            if target is None or target in seen:
                continue
            seen.add(target)
            todo.append(target)
            packages.add(bazel_package(target))
    return packages - {bazel_package(start)}


def missing_declarations() -> list[str]:
    missing = []
    for path in files_under_tests():
        package = bazel_package(path)
        build = (package / "BUILD").read_text()
        for other in sorted(support_needed(path)):
            label = f"//{other.relative_to(REPO_ROOT).as_posix()}:test_support"
            if f'"{label}"' not in build:
                missing.append(f"{path.relative_to(REPO_ROOT)} needs {label} in "
                               f"{(package / 'BUILD').relative_to(REPO_ROOT)}'s test_data")
    return missing


def test_cross_package_test_support_is_declared():
    assert missing_declarations() == []


def test_the_check_sees_a_cross_package_import():
    # frameworks/jax's custom-kernel test imports pjrt's rms_norm kernel: the check must find
    # that edge, or an empty list above would say nothing.
    path = REPO_ROOT / "frameworks" / "jax" / "tests" / "test_jax_custom_kernels.py"
    assert support_needed(path) == {REPO_ROOT / "pjrt"}


def test_the_installed_package_carries_the_ffi_header(tmp_path):
    # Custom kernels are compiled against pjrt/native/openhlo_ffi.h at run time, so a non-editable
    # install needs it beside the Python files (setuptools leaves headers out unless told).
    import subprocess
    import sys
    out = tmp_path / "build"
    proc = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(out)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert (out / "pjrt" / "native" / "openhlo_ffi.h").is_file()
    assert not list(out.glob("**/*.cc")), "C++ sources are build inputs, not package data"
