"""The small FileCheck against hand-made outputs whose verdicts are clear."""
from __future__ import annotations

import pytest

from xla_core.testing.filecheck import FileCheckError, check

OUTPUT = """\
func.func @main(%arg0: tensor<2xf32>) {
  %0 = stablehlo.add   %arg0, %arg0 : tensor<2xf32>
  %1 = stablehlo.negate %0 : tensor<2xf32>
  return
}
"""


def passes(checks: str) -> bool:
    try:
        check(OUTPUT, checks, ("CHECK",))
        return True
    except FileCheckError:
        return False


@pytest.mark.parametrize("checks, ok", [
    ("// CHECK: stablehlo.add %arg0", True),  # whitespace runs compare equal
    ("// CHECK: stablehlo.negate\n// CHECK: stablehlo.add", False),  # order matters
    ("// CHECK: @main\n// CHECK-NEXT: stablehlo.add", True),
    ("// CHECK: @main\n// CHECK-NEXT: stablehlo.negate", False),
    ("// CHECK: %[[X:[0-9]+]] = stablehlo.add\n// CHECK-NEXT: stablehlo.negate %[[X]]", True),
    ("// CHECK: %[[X:[0-9]+]] = stablehlo.negate\n// CHECK: stablehlo.add %[[X]]", False),
    ("// CHECK: stablehlo.add\n// CHECK-SAME: tensor<2xf32>", True),
    ("// CHECK: stablehlo.add\n// CHECK-SAME: negate", False),
    ("// CHECK: add\n// CHECK-NOT: multiply\n// CHECK: return", True),
    ("// CHECK: add\n// CHECK-NOT: negate\n// CHECK: return", False),
    ("// CHECK: {{st.*}}negate", True),
    ("// CHECK{LITERAL}: {{st.*}}negate", False),
    ("// CHECK-DAG: negate\n// CHECK-DAG: add\n// CHECK-NEXT: return", True),
    ("// CHECK-DAG: negate\n// CHECK-DAG: multiply", False),
    ("// CHECK-LABEL: @main\n// CHECK: return", True),
])
def test_directives(checks, ok):
    assert passes(checks) is ok


def test_prefixes_select_directives():
    checks = "// OTHER: not in the output\n// CHECK: negate"
    check(OUTPUT, checks, ("CHECK",))
    with pytest.raises(FileCheckError, match="line 1"):
        check(OUTPUT, checks, ("OTHER",))


def test_a_file_without_directives_is_an_error():
    with pytest.raises(FileCheckError, match="no CHECK directives"):
        check(OUTPUT, "nothing here", ("CHECK",))


def test_error_names_directive_line_and_output_line():
    with pytest.raises(FileCheckError) as err:
        check(OUTPUT, "// CHECK: @main\n\n// CHECK-NEXT: return", ("CHECK",))
    assert "CHECK-NEXT at line 3" in str(err.value)
    assert "stablehlo.add" in str(err.value)
