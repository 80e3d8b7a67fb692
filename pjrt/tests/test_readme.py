"""The Python examples of pjrt/README.md run as written."""
from __future__ import annotations

import pathlib
import re

import pytest

_README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("section", ["Using it", "Reading a program (for backends)",
                                     "Debugging and metrics", "Pipeline parallelism"])
def test_readme_example_runs(section, monkeypatch):
    # The examples name files as a user in the repository root would (examples/hello.mlir);
    # under Bazel the test starts in its runfiles, so go where the README lives.
    monkeypatch.chdir(_README.parents[1])
    text = _README.read_text()
    # the first Python block of the section (never one of a later section)
    example = re.search(rf"## {re.escape(section)}\n(?:(?!\n## ).)*?```python\n(.*?)```",
                        text, re.S)
    assert example is not None, f"no Python example in section {section!r}"
    exec(compile(example.group(1), "pjrt/README.md", "exec"), {})
