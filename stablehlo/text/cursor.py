"""A position in a token stream plus the small helpers every parser piece uses.

The type, attribute, op and format parsers are mixins over ``Cursor``; they share one index
``i`` into the ``Tokens`` lists. Helpers never skip tokens silently: ``expect`` raises a
ParseError that says what was expected, in which context, and what was found.
"""
from __future__ import annotations

from stablehlo.errors import ParseError
from stablehlo.text.lexer import EOF, Tokens


class Cursor:
    def __init__(self, tokens: Tokens):
        self.tokens = tokens
        self.kinds = tokens.kinds
        self.texts = tokens.texts
        self.starts = tokens.starts
        self.i = 0

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

    def integer(self, context: str = "") -> int:
        """An integer literal (decimal or hex)."""
        kind = self.kinds[self.i]
        if kind == "int":
            return int(self.advance())
        if kind == "hex":
            return int(self.advance(), 16)
        where = f" {context}" if context else ""
        raise self.error(f"expected integer{where}, found {self.found()}")

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
