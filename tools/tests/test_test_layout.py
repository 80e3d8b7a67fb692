"""Test files import helpers from support modules, never from other test files: Bazel runs
each ``tests/test_*.py`` as its own target with only the support files of its folder
(third_party/py_rules.bzl), so such an import passes under pytest and fails under Bazel."""
import re

from tools.tests.helpers import REPO_ROOT

_TEST_IMPORT = re.compile(
    r"^\s*(?:from\s+[\w.]*\.tests\.test_\w+\s+import|import\s+[\w.]*\.tests\.test_\w+)",
    re.MULTILINE)


def test_no_test_file_imports_another():
    offenders = []
    for module in ("stablehlo", "xla_core", "pjrt", "frameworks", "tools"):
        for path in (REPO_ROOT / module).rglob("tests/*.py"):
            for match in _TEST_IMPORT.finditer(path.read_text(encoding="utf-8")):
                offenders.append(f"{path.relative_to(REPO_ROOT)}: {match.group(0).strip()}")
    assert not offenders, "move the shared helpers into a support module:\n" + "\n".join(offenders)
