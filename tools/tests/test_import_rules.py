"""The direction of dependency that ARCHITECTURE.md draws, checked on the source: the
runtime contract does no compiler work (no module of pjrt/ outside its plugins imports
``xla_core``: the contract, pjrt/distributed, pjrt/c_api's Python and pjrt/testing use pjrt
and stablehlo only; backends reach the compile driver through pjrt/plugins/compile_driver.py),
and frameworks/ reach the compiler only through pjrt and stablehlo (no ``xla_core`` import at
all). Tests are left out: they may use the compiler's internals as an oracle. (Here in
tools/, which may read every module's source.)"""
import ast
import pathlib

from tools.tests.helpers import REPO_ROOT as ROOT


def _imports(path: pathlib.Path) -> list:
    """``(line, module)`` of every import in ``path``, function-level ones included
    (``from a import b`` counts as ``a.b`` too, so ``from xla_core import spmd`` is seen)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append((node.lineno, node.module))
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def _sources(folder: str, skip=(), root: pathlib.Path = ROOT) -> list:
    return [p for p in sorted((root / folder).rglob("*.py"))
            if "tests" not in p.relative_to(root).parts
            and not any(part in p.relative_to(root).parts for part in skip)]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offending(paths, package: str, root: pathlib.Path = ROOT) -> list:
    return [f"{p.relative_to(root)}:{line}: imports {name}"
            for p in paths for line, name in _imports(p) if _within(name, package)]


def _contract_importing_the_compiler(root: pathlib.Path = ROOT) -> list:
    """Where a module of pjrt/ outside its plugins imports xla_core."""
    return _offending(_sources("pjrt", skip=("plugins",), root=root), "xla_core", root)


def test_the_runtime_contract_does_no_compiler_work():
    folders = {p.parent.relative_to(ROOT).as_posix()
               for p in _sources("pjrt", skip=("plugins",))}
    assert {"pjrt", "pjrt/c_api", "pjrt/distributed", "pjrt/testing"} <= folders
    assert _contract_importing_the_compiler() == []
    # The backends' way to the compiler is where the rule says it is.
    assert _offending([ROOT / "pjrt" / "plugins" / "compile_driver.py"], "xla_core.compile")


def test_the_contract_rule_fails_on_a_contract_module_that_imports_the_compiler(tmp_path):
    for path, source in {"pjrt/api.py": "import numpy\n",
                         "pjrt/plugins/driver.py": "import xla_core.compile\n",
                         "pjrt/tests/test_api.py": "import xla_core.spmd\n",
                         "pjrt/c_api/bridge.py": "def f():\n    from xla_core import cost\n"
                         }.items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(source)
    assert _contract_importing_the_compiler(tmp_path) == [
        "pjrt/c_api/bridge.py:2: imports xla_core", "pjrt/c_api/bridge.py:2: imports xla_core.cost"]


def test_frameworks_do_not_import_the_compiler():
    paths = _sources("frameworks")
    assert any(p.name == "plugin.py" for p in paths)
    assert _offending(paths, "xla_core") == []


def test_the_rule_sees_every_spelling_of_an_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import xla_core.spmd.sharding\n"
                      "def f():\n    from xla_core import spmd\n"
                      "from xla_core.compile import cache_key\n")
    lines = {line for line, name in _imports(source) if _within(name, "xla_core.spmd")}
    assert lines == {1, 3}
