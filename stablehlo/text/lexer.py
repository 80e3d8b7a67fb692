"""Tokenizer for MLIR text: one compiled master regex, no per-character Python loop.

``tokenize(text)`` returns a ``Tokens`` object holding three parallel lists (kinds, texts,
start offsets) plus an ``EOF`` sentinel. Whitespace and ``//`` comments are dropped.

Token kinds (the names of the master regex's groups):

* ``string``  ``"..."`` with escapes, kept with its quotes;
* ``tensor``  a whole simple ranked tensor type such as ``tensor<3x?xf32>`` (a fast path: most
  types in real programs look like this; anything else is lexed piecewise);
* ``value``   ``%name`` or ``%name#3``; ``symbol`` ``@name`` / ``@"quoted"``;
  ``caret`` ``^bb0``; ``hash`` ``#alias`` / ``#dialect.attr``; ``bang`` ``!dialect.type``;
* ``hex``, ``float``, ``int`` numbers (a leading ``-`` belongs to the number);
* ``ident``   bare identifiers (``stablehlo.add``, ``f32``, ``x4xf32`` inside shapes);
* ``arrow``   ``->``; ``punct`` one of ``:: ( ) [ ] { } < > , : = ? * + |``;
* ``error``   any other character (the parser reports it).

Note [shape lexing]
MLIR lexes ``3x4xf32`` as the integer ``3`` followed by the identifier ``x4xf32``; we do the same
and let the type parser split such identifiers (see parse_types.py). The ``tensor`` token kind
covers the common case in one regex match.
"""
from __future__ import annotations

import bisect
import re

from stablehlo.errors import ParseError

# Leading whitespace and comments are part of each match (half as many matches as a separate
# whitespace token would need); ``end`` matches trailing whitespace at the end of the text.
_TOKEN_RE = re.compile(r"""
(?:\s+|//[^\n]*)*
(?:
  (?P<string>"[^"\\]*(?:\\.[^"\\]*)*")
| (?P<tensor>tensor<(?:(?:\d+|\?)x)*(?:complex<[a-zA-Z][a-zA-Z0-9]*>|[a-zA-Z][a-zA-Z0-9]*)>)
| (?P<value>%[\w$.\-]+(?:\#\d+)?)
| (?P<symbol>@(?:[\w$.\-]+|"[^"\\]*(?:\\.[^"\\]*)*"))
| (?P<caret>\^[\w$.\-]+)
| (?P<hash>\#[\w$.\-]+)
| (?P<bang>![\w$.]+)
| (?P<arrow>->)
| (?P<hex>0x[0-9a-fA-F]+)
| (?P<float>-?\d+\.\d*(?:[eE][-+]?\d+)?)
| (?P<int>-?\d+)
| (?P<ident>[A-Za-z_][\w$.]*)
| (?P<punct>::|[()\[\]{}<>,:=?*+|])
| (?P<error>.)
| (?P<end>\Z)
)""", re.VERBOSE | re.DOTALL)

EOF = "eof"


class Tokens:
    """The token stream of one text, with offset -> line:col mapping for messages."""

    __slots__ = ("_line_starts", "filename", "kinds", "starts", "text", "texts")

    def __init__(self, text: str, filename: str):
        self.text = text
        self.filename = filename
        kinds: list[str] = []
        texts: list[str] = []
        starts: list[int] = []
        for match in _TOKEN_RE.finditer(text):
            kind = match.lastgroup
            if kind == "end":
                break
            kinds.append(kind)
            texts.append(match.group(kind))
            starts.append(match.start(kind))
        kinds.append(EOF)
        texts.append("")
        starts.append(len(text))
        self.kinds, self.texts, self.starts = kinds, texts, starts
        self._line_starts: list[int] | None = None

    def line_col(self, offset: int) -> tuple[int, int]:
        """1-based line and column of a character offset."""
        if self._line_starts is None:
            self._line_starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        line = bisect.bisect_right(self._line_starts, offset)
        return line, offset - self._line_starts[line - 1] + 1

    def error(self, index: int, message: str) -> ParseError:
        """A ParseError located at token ``index``."""
        line, col = self.line_col(self.starts[index])
        return ParseError(message, self.filename, line, col)

    def describe(self, index: int) -> str:
        """How a token is named in 'found ...' messages."""
        if self.kinds[index] == EOF:
            return "end of input"
        if self.kinds[index] == "error" and self.texts[index] == '"':
            return "an unterminated string"
        text = self.texts[index]
        if len(text) > 40:
            text = text[:37] + "..."
        return f"'{text}'"


def tokenize(text: str, filename: str = "<string>") -> Tokens:
    return Tokens(text, filename)
