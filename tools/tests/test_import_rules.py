"""The direction of dependency that ARCHITECTURE.md draws, checked on the source: the
runtime contract does no compiler work (no module of pjrt/ outside its plugins imports
``xla_core.spmd``, and of the contract's own modules, pjrt/*.py, pjrt/compiling.py alone
hands programs to the compile driver ``xla_core.compile``), and frameworks/ reach the
compiler only through pjrt and stablehlo (no ``xla_core`` import at all). Tests are left
out: they may use the compiler's internals as an oracle. (Here in tools/, which may read
every module's source.)"""
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


def _sources(folder: str, skip=()) -> list:
    return [p for p in sorted((ROOT / folder).rglob("*.py"))
            if "tests" not in p.parts and not any(part in p.parts for part in skip)]


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _offending(paths, package: str) -> list:
    return [f"{p.relative_to(ROOT)}:{line}: imports {name}"
            for p in paths for line, name in _imports(p) if _within(name, package)]


def test_the_runtime_contract_does_not_reach_into_spmd():
    paths = _sources("pjrt", skip=("plugins",))
    assert any(p.name == "api.py" for p in paths)
    assert _offending(paths, "xla_core.spmd") == []


def test_one_contract_module_reaches_the_compile_driver():
    paths = sorted((ROOT / "pjrt").glob("*.py"))  # the contract (c_api/ is a front end)
    bridge = [p for p in paths if p.name == "compiling.py"]
    assert bridge and _offending(bridge, "xla_core")  # the bridge is where the rule says
    assert _offending([p for p in paths if p.name != "compiling.py"], "xla_core") == []


def test_frameworks_do_not_import_the_compiler():
    paths = _sources("frameworks")
    assert any(p.name == "plugin.py" for p in paths)
    assert _offending(paths, "xla_core") == []


def test_the_rule_sees_every_spelling_of_an_import(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import xla_core.spmd.layout\n"
                      "def f():\n    from xla_core import spmd\n"
                      "from xla_core.compile import split_global\n")
    lines = {line for line, name in _imports(source) if _within(name, "xla_core.spmd")}
    assert lines == {1, 3}
