"""Reading program text and reporting errors the way MLIR tools do.

An error that carries a place (``file:line:col: ...``, as ParseError and
VerificationError messages do) is printed as::

    prog.mlir:3:10: error: unknown op 'stablehlo.frobnicate'
      %0 = stablehlo.frobnicate %arg0 : tensor<f32>
           ^

Errors without a place are printed as ``openhlo: error: ...``.
"""
from __future__ import annotations

import re
import sys

from stablehlo.errors import ParseError


class CliError(Exception):
    """A user-facing error of a command; printed as ``openhlo: error: ...``."""


STDIN_NAME = "<stdin>"

_PLACE = re.compile(r"^(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+): (?:error: )?(?P<rest>.*)$",
                    re.S)


def read_source(path: str, sources: dict | None = None) -> tuple[str, str]:
    """The text of ``path`` (``-`` is stdin) and the file name to report.

    ``sources`` (file name -> text) remembers the text for error snippets.
    """
    if path == "-":
        text, name = sys.stdin.read(), STDIN_NAME
    else:
        try:
            with open(path, encoding="utf-8") as f:
                text, name = f.read(), path
        except OSError as exc:
            raise CliError(f"cannot read {path}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise CliError(f"cannot read {path}: not UTF-8 text ({exc.reason})") from None
    if sources is not None:
        sources[name] = text
    return text, name


def format_error(exc: BaseException, sources: dict[str, str] | None = None) -> str:
    """The message for ``exc``, with the source line and a caret when it has a place."""
    if isinstance(exc, ParseError):
        file, line, col, rest = exc.file, exc.line, exc.col, exc.reason
    else:
        match = _PLACE.match(str(exc))
        if match is None:
            return f"openhlo: error: {exc}"
        file, rest = match["file"], match["rest"]
        line, col = int(match["line"]), int(match["col"])
    head = f"{file}:{line}:{col}: error: {rest}"
    snippet = source_snippet((sources or {}).get(file), line, col)
    return head + ("\n" + snippet if snippet else "")


def source_snippet(text: str | None, line: int, col: int) -> str:
    """The source line ``line`` and a caret under column ``col`` (both 1-based)."""
    if text is None or line < 1:
        return ""
    lines = text.splitlines()
    if line > len(lines):
        return ""
    source = lines[line - 1]
    # Keep tabs in the caret line so the caret lines up under the column.
    prefix = "".join(ch if ch == "\t" else " " for ch in source[:max(col - 1, 0)])
    return f"{source}\n{prefix}^"
