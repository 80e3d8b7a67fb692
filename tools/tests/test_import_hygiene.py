"""Nothing at import or start-up needs a test-only or optional package.

The `openhlo` command and every package module are imported in a child Python whose import
system refuses the test extra's packages (pytest, matplotlib, scipy, ...), as on a machine that
ran only `pip install .`. The frameworks' adapters may import their own framework (that is what
they adapt) but nothing else optional. A module that needs an optional package must import it
inside the function that uses it.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tools.tests.helpers import REPO_ROOT

# Installed by the test extra only: nothing outside tests may import these at module level.
TEST_ONLY = ("pytest", "_pytest", "xdist", "expecttest", "absl", "matplotlib", "scipy",
             "transformers", "sentence_transformers", "torchvision", "timm")
FRAMEWORKS = ("jax", "jaxlib", "torch")

# Which frameworks each part of the tree may import at module level. Longest prefix wins.
ALLOWED = {
    "frameworks.jax": ("jax", "jaxlib"),
    "frameworks.torch": ("torch",),
    # Measurement scripts whose whole job is to time or measure PyTorch programs (against Inductor,
    # eager, or our own f32 build of the same model).
    "tools.torch_speed": ("torch",),
    "tools.bench_quantized_decode": ("torch",),
    "tools.quantized_agreement": ("torch",),
    "tools.trained_decoder": ("torch",),
    "tools.bench_generate": ("torch",),
}

# The child: installs a finder that refuses the blocked packages, imports each module, and
# prints what failed as JSON. A refused import raises ModuleNotFoundError naming the package.
_CHILD = r"""
import importlib, importlib.abc, json, sys
blocked = set(sys.argv[1].split(","))
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"optional package {name!r} imported", name=name)
sys.meta_path.insert(0, Refuse())
failures = {}
for module in sys.argv[2:]:
    try:
        if module == "openhlo-cli":
            from tools.cli import build_parser
            parser = build_parser()
            for command in parser._subparsers._group_actions[0].choices.values():
                command.format_help()
            parser.format_help()
        else:
            importlib.import_module(module)
    except BaseException as exc:
        failures[module] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failures))
"""


def _package_modules() -> list[str]:
    modules = []
    for top in ("stablehlo", "xla_core", "pjrt", "frameworks", "tools"):
        for path in sorted((REPO_ROOT / top).rglob("*.py")):
            rel = path.relative_to(REPO_ROOT)
            if ("tests" in rel.parts
                    or rel.name in ("conftest.py", "__main__.py")):  # __main__ runs on import
                continue
            parts = list(rel.with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules.append(".".join(parts))
    return modules


def _allowed(module: str) -> tuple[str, ...]:
    best = ""
    for prefix in ALLOWED:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    return ALLOWED.get(best, ())


def _import_with_blocked(modules: list[str], blocked: tuple[str, ...]) -> dict:
    proc = subprocess.run([sys.executable, "-c", _CHILD, ",".join(blocked), *modules],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_cli_starts_without_optional_packages():
    """`openhlo --help` and every subcommand's help, with the test extra and frameworks gone."""
    failures = _import_with_blocked(["openhlo-cli"], TEST_ONLY + FRAMEWORKS)
    assert not failures, failures


def test_refusing_finder_really_refuses():
    """The check above can fail: a module that imports pytest is reported."""
    failures = _import_with_blocked(["tools.jax_suite.plugin"], ("pytest",))
    assert "tools.jax_suite.plugin" in failures
    assert "optional package 'pytest'" in failures["tools.jax_suite.plugin"]


# tools.jax_suite.plugin is a pytest plugin: pytest is its host, not an optional import.
_PYTEST_HOSTED = {"tools.jax_suite.plugin"}


@pytest.mark.parametrize("allowed", sorted(set(ALLOWED.values()) | {()}), ids=str)
def test_package_modules_import_without_optional_packages(allowed):
    modules = [m for m in _package_modules()
               if _allowed(m) == allowed and m not in _PYTEST_HOSTED]
    assert modules, f"no package module may import {allowed}: drop it from ALLOWED"
    blocked = TEST_ONLY + tuple(f for f in FRAMEWORKS if f not in allowed)
    failures = _import_with_blocked(modules, blocked)
    assert not failures, "\n".join(f"{m}: {e}" for m, e in failures.items())
