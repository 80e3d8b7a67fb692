"""A position in a token stream plus the small helpers every parser piece uses.

The type, attribute, op and format parsers are mixins over ``Cursor``; they share one index
``i`` into the ``Tokens`` lists. Helpers never skip tokens silently: ``expect`` raises a
ParseError that says what was expected, in which context, and what was found.
"""
from __future__ import annotations

import sys

from stablehlo.errors import ParseError
from stablehlo.limits import NESTING_DEPTH_ENV, max_nesting_depth
from stablehlo.text.lexer import EOF, Tokens

# Decimal digits of the longest integer any attribute holds (2**64 - 1 has 20). Longer tokens
# are refused before ``int()`` converts them: they cannot be in range, and Python refuses to
# convert more than 4300 digits with a ValueError of its own.
MAX_INTEGER_DIGITS = 20
# Python frames one level of nesting takes in the recursive descent: a region inside an op
# inside a region measures 6-7 (parse_region, _parse_block_body, parse_operation, the op's
# format, ...); types and attributes take fewer. The printer and verifier take fewer still.
FRAMES_PER_LEVEL = 8
_FRAMES_SLACK = 100


class Cursor:
    def __init__(self, tokens: Tokens):
        self.tokens = tokens
        self.kinds = tokens.kinds
        self.texts = tokens.texts
        self.starts = tokens.starts
        self.i = 0
        # Open nested constructs (types, attributes, regions) and how many may be open: the
        # recursive descent needs a few Python frames per level, so a hostile nest must
        # become a ParseError long before it becomes a RecursionError.
        self.depth = 0
        self.max_depth = max_nesting_depth()
        _ensure_recursion_headroom(self.max_depth * FRAMES_PER_LEVEL + _FRAMES_SLACK)

    # -- looking -------------------------------------------------------------------------
    @property
    def kind(self) -> str:
        return self.kinds[self.i]

    @property
    def text(self) -> str:
        return self.texts[self.i]

    def at(self, text: str) -> bool:
        """Whether the current token is exactly ``text`` (punctuation or keyword)."""
        return self.texts[self.i] == text and self.kinds[self.i] != "string"

    def peek_text(self, ahead: int = 1) -> str:
        index = min(self.i + ahead, len(self.texts) - 1)
        return self.texts[index]

    # -- consuming -----------------------------------------------------------------------
    def advance(self) -> str:
        text = self.texts[self.i]
        if self.kinds[self.i] != EOF:
            self.i += 1
        return text

    def accept(self, text: str) -> bool:
        """Consume the current token if it is ``text``."""
        if self.texts[self.i] == text and self.kinds[self.i] != "string":
            self.i += 1
            return True
        return False

    def expect(self, text: str, context: str = "") -> None:
        if not self.accept(text):
            where = f" {context}" if context else ""
            raise self.error(f"expected '{text}'{where}, found {self.found()}")

    def expect_kind(self, kind: str, what: str, context: str = "") -> str:
        if self.kinds[self.i] != kind:
            where = f" {context}" if context else ""
            raise self.error(f"expected {what}{where}, found {self.found()}")
        return self.advance()

    def keyword(self, word: str, context: str = "") -> None:
        """Consume the identifier ``word``."""
        if self.kinds[self.i] != "ident" or self.texts[self.i] != word:
            where = f" {context}" if context else ""
            raise self.error(f"expected '{word}'{where}, found {self.found()}")
        self.i += 1

    def ident(self, what: str = "identifier", context: str = "") -> str:
        return self.expect_kind("ident", what, context)

    def integer(self, context: str = "", width: int = 64) -> int:
        """An integer literal (decimal or hex) that fits a signed ``width``-bit integer."""
        kind = self.kinds[self.i]
        if kind not in ("int", "hex"):
            where = f" {context}" if context else ""
            raise self.error(f"expected integer{where}, found {self.found()}")
        value = self.integer_value(self.i, -(1 << (width - 1)), (1 << (width - 1)) - 1,
                                   f"i{width}")
        self.i += 1
        return value

    def integer_value(self, index: int, low: int, high: int, what: str) -> int:
        """The value of the int or hex token at ``index``, checked to lie in [low, high]."""
        text = self.texts[index]
        digits = text.lstrip("-")
        if len(digits) > MAX_INTEGER_DIGITS + 2:  # + 2 for a hex literal's "0x"
            value = None
        else:
            value = int(text, 16) if self.kinds[index] == "hex" else int(text)
        if value is None or not low <= value <= high:
            raise self.error_at(index, f"integer {_abbreviate(text)} out of range for {what}")
        return value

    # -- nesting -------------------------------------------------------------------------
    def enter(self, what: str) -> None:
        """Open one level of nesting at the current token; pair with ``leave``."""
        self.depth += 1
        if self.depth > self.max_depth:
            raise self.too_deep(what)

    def too_deep(self, what: str) -> ParseError:
        return self.error(f"{what} nested deeper than {self.max_depth} ({NESTING_DEPTH_ENV})")

    def leave(self) -> None:
        self.depth -= 1

    def comma_list(self, parse_item, close: str, context: str = "") -> list:
        """Items separated by ',' up to and including ``close`` (opening already consumed)."""
        items = []
        if self.accept(close):
            return items
        while True:
            items.append(parse_item())
            if self.accept(close):
                return items
            if not self.accept(","):
                where = f" {context}" if context else ""
                raise self.error(f"expected ',' or '{close}'{where}, found {self.found()}")

    def skip_balanced(self) -> None:
        """Skip one token, or a whole bracketed group if it opens one ( ( [ { < )."""
        pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
        if self.kinds[self.i] == "punct" and self.texts[self.i] in pairs:
            stack = []
            while True:
                kind, text = self.kinds[self.i], self.texts[self.i]
                if kind == EOF:
                    raise self.error("unbalanced brackets: unexpected end of input")
                self.i += 1
                if kind != "punct":
                    continue
                if text in pairs:
                    stack.append(pairs[text])
                elif text in (")", "]", "}", ">"):
                    if not stack or stack.pop() != text:
                        raise self.error_at(self.i - 1, f"unbalanced '{text}'")
                    if not stack:
                        return
        else:
            self.advance()

    def source_since(self, start_index: int) -> str:
        """The raw source text of tokens ``start_index .. i-1`` (used for verbatim attrs)."""
        begin = self.starts[start_index]
        last = self.i - 1
        end = self.starts[last] + len(self.texts[last])
        return self.tokens.text[begin:end]

    # -- errors --------------------------------------------------------------------------
    def found(self) -> str:
        return self.tokens.describe(self.i)

    def error(self, message: str) -> ParseError:
        return self.tokens.error(self.i, message)

    def error_at(self, index: int, message: str) -> ParseError:
        return self.tokens.error(index, message)


def _abbreviate(text: str) -> str:
    """A number token short enough to quote in a message."""
    return text if len(text) <= 30 else f"{text[:12]}...{text[-12:]} ({len(text)} characters)"


def _ensure_recursion_headroom(frames: int) -> None:
    """Raise Python's recursion limit so that ``frames`` more frames fit above the caller.

    See Note [nesting and the recursion limit]: the nesting limit, not Python's, is what
    refuses a deep program, so the parser (and later the printer and verifier, which recurse
    less) must never meet Python's limit first, whatever the caller's own stack depth. The
    limit is only ever raised, and pure-Python frames do not use the C stack (Python 3.11+).
    """
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    if sys.getrecursionlimit() < depth + frames:
        sys.setrecursionlimit(depth + frames)


# Note [nesting and the recursion limit]
# A program nested N deep costs about FRAMES_PER_LEVEL * N Python frames to parse, print or
# verify. The default OPENHLO_MAX_NESTING_DEPTH (128) fits Python's default limit of 1000 only
# when the caller's stack is shallow; a raised OPENHLO_MAX_NESTING_DEPTH would not fit at all.
