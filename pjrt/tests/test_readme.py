"""The Python example of pjrt/README.md runs as written."""
from __future__ import annotations

import pathlib
import re


def test_readme_example_runs():
    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    example = re.search(r"## Using it\n\n```python\n(.*?)```", text, re.S).group(1)
    exec(compile(example, "pjrt/README.md", "exec"), {})


def test_readme_metrics_example_runs():
    text = (pathlib.Path(__file__).resolve().parents[1] / "README.md").read_text()
    example = re.search(r"## Debugging and metrics\n.*?```python\n(.*?)```", text, re.S).group(1)
    exec(compile(example, "pjrt/README.md", "exec"), {})
