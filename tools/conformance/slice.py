"""Representative slices of the StableHLO conformance suites, chosen by rule, not by hand.

``choose_testdata``: the testdata op families (file name up to its first dtype word) are
sorted and ``count`` are taken at even spacing, each with its smallest enabled file.
``choose_interpret``: ``count`` files at even spacing over the sorted single-process files
of the interpreter suite (less those containing given texts). Used by the conformance slice
test (tools/tests) and by ``openhlo backend-check``.
"""
from __future__ import annotations

import re
from pathlib import Path

_FAMILY = re.compile(r"^(.*?)_(?:bool|u?int\d+|float\d+|bfloat16|complex\d+|f8\w*)(?:_|$)")


def evenly(items: list, count: int) -> list:
    """``count`` of ``items`` at even spacing (all of them when there are no more)."""
    if len(items) <= count:
        return items
    return [items[(i * len(items)) // count] for i in range(count)]


def choose_testdata(folder: Path, count: int = 40) -> list:
    families: dict = {}
    for path in sorted(folder.glob("*.mlir")):
        m = _FAMILY.match(path.stem)
        if m is None or "RUN-DISABLED" in path.read_text():
            continue
        families.setdefault(m.group(1), []).append(path)
    return [min(families[f], key=lambda p: (p.stat().st_size, p.name))
            for f in evenly(sorted(families), count)]


def choose_interpret(folder: Path, count: int = 15, *, exclude: tuple = ()) -> list:
    """Files that contain none of ``exclude`` (texts, e.g. an op name) are chosen from."""
    leave_out = ("interpreter.run_parallel",) + tuple(exclude)
    files = [p for p in sorted(folder.glob("*.mlir"))
             if not any(text in p.read_text() for text in leave_out)]
    return evenly(files, count)
