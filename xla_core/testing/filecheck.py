"""A small FileCheck: match ``PREFIX:`` directives of a test file against output.

Supported directives (for any prefix): ``P:``, ``P-NEXT:``, ``P-SAME:``,
``P-LABEL:``, ``P-NOT:``, ``P-EMPTY:``, ``P-DAG:`` (a run of DAG directives
matches in any order; the next directive continues after the furthest match)
and the ``{LITERAL}`` modifier. In
patterns ``{{regex}}`` is a regular expression and ``[[NAME:regex]]`` /
``[[NAME]]`` define and use variables. As in FileCheck, runs of horizontal
whitespace in both pattern and output compare equal to a single space, and
leading/trailing whitespace of a pattern is ignored.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

_KINDS = ("NEXT", "SAME", "LABEL", "NOT", "EMPTY", "DAG")


@dataclass(frozen=True)
class Directive:
    kind: str  # "" or one of _KINDS
    prefix: str
    pattern: str
    literal: bool
    line: int  # in the test file


class FileCheckError(Exception):
    """The output does not match; the message names the directive and its line."""


def directives(text: str, prefixes: tuple) -> list[Directive]:
    # Longest first, so CHECK-DENSE is not read as CHECK with a DENSE suffix.
    alternatives = "|".join(re.escape(p) for p in sorted(prefixes, key=len, reverse=True))
    regex = re.compile(rf"(?<![\w-])({alternatives})(?:-([A-Z]+))?(\{{LITERAL\}})?:(.*)$")
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        m = regex.search(line)
        if m is None:
            continue
        kind = m.group(2) or ""
        if kind and kind not in _KINDS:
            continue  # another prefix (CHECK-DENSE for CHECK), or a comment that looks alike
        found.append(Directive(kind, m.group(1), m.group(4).strip(), bool(m.group(3)), number))
    return found


def check(output: str, text: str, prefixes: tuple) -> None:
    """Raise FileCheckError unless ``output`` satisfies the directives in ``text``."""
    todo = directives(text, prefixes)
    if not todo:
        raise FileCheckError(f"no {'/'.join(prefixes)} directives found")
    lines = [re.sub(r"[ \t]+", " ", line) for line in output.splitlines()]
    _Matcher(lines).run(todo)


class _Matcher:
    def __init__(self, lines: list[str]):
        self.lines = lines
        self.row, self.col = 0, 0  # where the previous match ended
        self.prev_row = -1
        self.variables: dict[str, str] = {}
        self.pending_not: list[Directive] = []

    def run(self, todo: list[Directive]) -> None:
        i = 0
        while i < len(todo):
            d = todo[i]
            if d.kind == "NOT":
                self.pending_not.append(d)
                i += 1
                continue
            start = (self.row, self.col)
            if d.kind == "DAG":
                group = todo[i:i + next((k for k, g in enumerate(todo[i:]) if g.kind != "DAG"),
                                        len(todo) - i)]
                found = []
                for g in group:  # each DAG match is searched from the group's start
                    self.row, self.col = start
                    found.append(self._find(g))
                first = min((r, c0) for r, c0, _ in found)
                row, _, col = max(found, key=lambda f: (f[0], f[2]))
                i += len(group)
            else:
                row, c0, col = self._find(d)
                first = (row, c0)
                i += 1
            self._check_nots(start, first)
            self.prev_row, self.row, self.col = row, row, col
        self._check_nots((self.row, self.col), (len(self.lines), 0))

    def _find(self, d: Directive) -> tuple[int, int, int]:
        """(row, start column, end column) of ``d``'s match."""
        if d.kind == "EMPTY":
            row = self.prev_row + 1
            if row < len(self.lines) and self.lines[row].strip() == "":
                return row, 0, 0
            raise self._error(d, "expected an empty line")
        regex = self._compile(d)
        if d.kind in ("NEXT", "SAME"):
            row = self.prev_row + (1 if d.kind == "NEXT" else 0)
            col = self.col if d.kind == "SAME" else 0
            m = regex.search(self.lines[row], col) if 0 <= row < len(self.lines) else None
            if m is None:
                where = "the next line" if d.kind == "NEXT" else "the same line"
                raise self._error(d, f"not found on {where}", row)
            self._bind(regex, m)
            return row, m.start(), m.end()
        for row in range(self.row, len(self.lines)):
            m = regex.search(self.lines[row], self.col if row == self.row else 0)
            if m is not None:
                self._bind(regex, m)
                return row, m.start(), m.end()
        raise self._error(d, "not found in the rest of the output")

    def _check_nots(self, start: tuple, end: tuple) -> None:
        for d in self.pending_not:
            regex = self._compile(d)
            for row in range(start[0], min(end[0] + 1, len(self.lines))):
                text = self.lines[row]
                lo = start[1] if row == start[0] else 0
                hi = end[1] if row == end[0] else len(text)
                if regex.search(text[lo:hi]):
                    raise self._error(d, "excluded pattern found", row)
        self.pending_not = []

    def _compile(self, d: Directive) -> re.Pattern:
        pattern = re.sub(r"[ \t]+", " ", d.pattern)
        if d.literal:
            return re.compile(re.escape(pattern))
        parts, pos = [], 0
        for m in re.finditer(r"\{\{(.*?)\}\}|\[\[(\w+)(?::(.*?))?\]\]", pattern):
            parts.append(re.escape(pattern[pos:m.start()]))
            if m.group(1) is not None:
                parts.append(f"(?:{m.group(1)})")
            elif m.group(3) is not None:
                parts.append(f"(?P<{m.group(2)}>{m.group(3)})")
            else:
                parts.append(re.escape(self.variables.get(m.group(2), "")))
            pos = m.end()
        parts.append(re.escape(pattern[pos:]))
        return re.compile("".join(parts))

    def _bind(self, regex: re.Pattern, m: re.Match) -> None:
        for name in regex.groupindex:
            self.variables[name] = m.group(name)

    def _error(self, d: Directive, what: str, row: int | None = None) -> FileCheckError:
        prefix = d.prefix + (f"-{d.kind}" if d.kind else "")
        got = ""
        if row is not None and 0 <= row < len(self.lines):
            got = f"; output line {row + 1}: {self.lines[row].strip()!r}"
        return FileCheckError(f"{prefix} at line {d.line}: {d.pattern!r} {what}{got}")
