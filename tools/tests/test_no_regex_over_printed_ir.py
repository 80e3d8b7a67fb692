"""No regular expression reads text our printer produced: a compiler that holds a Module
reads its attributes and types, never their printed form (issue 15). Checked on the source
of stablehlo/, xla_core/, pjrt/ and frameworks/ (tests left out: they may match printed
output, as FileCheck does) two ways:

* only the modules listed below use ``re``, each for a stated reason that is not printed IR
  (the lexer and type-token parsing read IR text for the parser; the others read names,
  user-written specs or foreign text), and every listed module still does;
* no ``re`` call anywhere takes printer output as an argument (``str(...)``, ``repr(...)``,
  ``print_*(...)``), whether through the ``re`` module or a pattern compiled at module level.
(Here in tools/, which may read every module's source.)"""
import ast
import pathlib

from tools.tests.helpers import REPO_ROOT as ROOT

FOLDERS = ("stablehlo", "xla_core", "pjrt", "frameworks")

MAY_USE_RE = {
    "stablehlo/text/lexer.py": "the lexer: one master pattern tokenizes IR text for the parser",
    "stablehlo/text/parse_types.py": "splits type tokens the lexer keeps whole (3x4xf32)",
    "stablehlo/text/formats_elementwise.py": "reads a reduce_precision format token (e5m10)",
    "stablehlo/text/parse_attributes.py": "decodes the escapes of a string literal",
    "stablehlo/text/print_attributes.py": "decides whether a name must be quoted to print",
    "stablehlo/text/split.py": "cuts an input file at its '// -----' markers, before parsing",
    "stablehlo/builder_ops.py": "reads a user's convolution spec ('[b, 0, f]x[0, i, o]->...')",
    "stablehlo/instrument/dump.py": "makes a program name safe as a file name",
    "xla_core/cost/calibrate.py": "makes a host key safe as a file name",
    "pjrt/plugins/cuda/nvcc.py": "reads ptxas's verbose report (registers, spills per kernel)",
    "xla_core/testing/filecheck.py": "FileCheck: matching patterns against output is its job",
    "xla_core/ir_utils.py": "symbol uses inside foreign opaque attributes, a grammar we do not "
                            "know (Note [symbols in foreign attributes])",
}

REGEX_CALLS = {"compile", "search", "match", "fullmatch", "findall", "finditer", "sub", "subn",
               "split"}


def _sources() -> list:
    return [p for folder in FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))
            if "tests" not in p.relative_to(ROOT).parts]


def _uses_re(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "re" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "re":
            return True
    return False


def _compiled_patterns(tree: ast.Module) -> set:
    """Names bound at module level to ``re.compile(...)``."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_regex_call(node.value, {"re"}):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def _is_regex_call(node: ast.AST, owners: set) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in REGEX_CALLS and isinstance(node.func.value, ast.Name)
            and node.func.value.id in owners)


def _is_printed(node: ast.AST) -> bool:
    """Whether ``node`` is printer output: ``str(x)``, ``repr(x)``, ``print_module(m)``..."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    return name in ("str", "repr") or name.startswith("print_")


def _regex_over_printed(path: pathlib.Path, root: pathlib.Path = ROOT) -> list:
    tree = ast.parse(path.read_text(), str(path))
    owners = {"re"} | _compiled_patterns(tree)
    found = []
    for node in ast.walk(tree):
        if _is_regex_call(node, owners):
            arguments = [*node.args, *(k.value for k in node.keywords)]
            if any(_is_printed(a) for a in arguments):
                found.append(f"{path.relative_to(root)}:{node.lineno}: a regex over "
                             f"{ast.unparse(next(a for a in arguments if _is_printed(a)))}")
    return found


def test_only_the_listed_modules_use_regular_expressions():
    users = {str(p.relative_to(ROOT)) for p in _sources()
             if _uses_re(ast.parse(p.read_text(), str(p)))}
    assert sorted(users - set(MAY_USE_RE)) == []       # new: read the Module instead
    assert sorted(set(MAY_USE_RE) - users) == []       # gone: drop it from the list


def test_no_regex_reads_printer_output():
    paths = _sources()
    assert any(p.name == "export.py" for p in paths)
    assert [hit for p in paths for hit in _regex_over_printed(p)] == []


def test_the_rules_see_a_regex_over_printed_text(tmp_path):
    (tmp_path / "m.py").write_text(
        "import re\n"
        "_HEADER = re.compile(r'func.func @(\\w+)')\n"
        "def f(module, op):\n"
        "    a = _HEADER.search(str(module))\n"
        "    b = re.findall(r'%\\w+', print_module(module))\n"
        "    c = re.sub('x', 'y', string=repr(op))\n"
        "    d = re.match('[a-z]+', op.name)\n"
        "    return a, b, c, d\n")
    path = tmp_path / "m.py"
    assert _uses_re(ast.parse(path.read_text()))
    hits = _regex_over_printed(path, tmp_path)
    assert [h.split(":")[1] for h in hits] == ["4", "5", "6"]
