"""A structured mutator for MLIR text: mutations that keep a program plausible.

Byte flips rarely get past the lexer; these mutations work on the tokens of the text
(stablehlo/text/lexer.py) and on its lines, so most mutants parse and reach the verifier, the
compiler and the backends with something slightly wrong: an extreme integer, a zero or huge
or dynamic dimension, another element type, a different attribute value, a deleted or
duplicated op or region, swapped operands, a deeper type, a value used in the wrong place,
lines spliced in from another program.

``Mutator(pool).mutate(text, rng)`` applies one to three of them; ``pool`` holds the programs
that splices take lines from. The atheris engine adds libFuzzer's byte mutations some of the
time; everything here is deterministic given the ``random.Random``.
"""
from __future__ import annotations

import random
import re

from stablehlo.text.lexer import tokenize

INTERESTING_INTEGERS = ("0", "-1", "1", "2", "7", "2147483648", "-2147483649",
                        "9223372036854775807", "9223372036854775808", "-9223372036854775809",
                        "18446744073709551616", "1000000000000000000000000000000")
INTERESTING_DIMENSIONS = ("0", "1", "?", "3", "1000000", "2147483648", "9223372036854775807",
                          "18446744073709551616")
ELEMENT_TYPES = ("f32", "f64", "f16", "bf16", "i1", "i3", "i8", "i32", "i64", "ui8", "ui64",
                 "i4", "f8E4M3FN", "f8E5M2", "f4E2M1FN", "complex<f32>", "complex<f64>",
                 "index", "tuple<tensor<f32>>", "!stablehlo.token", "tensor<2xf32>")
ATTRIBUTE_VALUES = ("0", "-1", "2147483648", "true", "false", '""', "array<i64>",
                    "array<i64: 0, 0>", "array<i64: -1>", "array<i64: 9223372036854775807>",
                    "dense<0> : tensor<1xi64>", "dense<[]> : tensor<0xi64>", "[]", "{}",
                    "#stablehlo<comparison_direction LT>", "1.0 : f32", "0 : i1")

_TENSOR_RE = re.compile(r"tensor<((?:(?:\d+|\?)x)*)([^<>]*(?:<[^<>]*>)?)>")
_DIM_RE = re.compile(r"(?:\d+|\?)(?=x)")
# The element type of a tensor type: after its last dimension, or alone (``tensor<f32>``).
_ELEMENT_RE = re.compile(r"(?:(?<=x)|(?<=tensor<))(?:complex<\w+>|[a-z]\w*)(?=>)")
_VALUE_RE = re.compile(r"%[\w#]+")
_OP_LINE_RE = re.compile(r"^\s*(?:%[\w#:, %]+=\s*)?\"?(?:stablehlo|chlo|func|check|sdy)\.\w+")


class Mutator:
    def __init__(self, pool: list[str]):
        self.pool = pool
        self.strategies = (
            self.integer, self.integer, self.dimension, self.dimension, self.element_type,
            self.element_type, self.attribute, self.delete_line, self.duplicate_line,
            self.region, self.swap_operands, self.replace_value, self.nest_type, self.splice,
        )

    def mutate(self, text: str, rng: random.Random) -> str:
        for _ in range(rng.choice((1, 1, 2, 3))):
            for _attempt in range(4):  # a strategy may not apply to this text
                mutant = rng.choice(self.strategies)(text, rng)
                if mutant is not None and mutant != text:
                    text = mutant
                    break
        return text

    # Token-level mutations -------------------------------------------------------------

    @staticmethod
    def _replace_token(text: str, rng: random.Random, kinds: tuple[str, ...],
                       choices) -> str | None:
        tokens = tokenize(text)
        indices = [i for i, kind in enumerate(tokens.kinds) if kind in kinds]
        if not indices:
            return None
        i = rng.choice(indices)
        start = tokens.starts[i]
        new = rng.choice(choices) if not callable(choices) else choices(tokens.texts[i], rng)
        return text[:start] + new + text[start + len(tokens.texts[i]):]

    def integer(self, text: str, rng: random.Random) -> str | None:
        """An integer literal -> an interesting value (0, -1, 2^31, 2^63, 10^30, ...)."""
        return self._replace_token(text, rng, ("int",), INTERESTING_INTEGERS)

    def attribute(self, text: str, rng: random.Random) -> str | None:
        """The value after some ``name =`` -> another kind of attribute value."""
        tokens = tokenize(text)
        indices = [i + 1 for i, (kind, tok) in enumerate(zip(tokens.kinds, tokens.texts))
                   if kind == "punct" and tok == "=" and tokens.kinds[i - 1] == "ident"
                   and tokens.kinds[i + 1] != "eof"]
        if not indices:
            return None
        i = rng.choice(indices)
        start = tokens.starts[i]
        return text[:start] + rng.choice(ATTRIBUTE_VALUES) + text[start + len(tokens.texts[i]):]

    def swap_operands(self, text: str, rng: random.Random) -> str | None:
        """Two different SSA values on one line trade places."""
        lines = text.split("\n")
        candidates = [n for n, line in enumerate(lines)
                      if len(set(_VALUE_RE.findall(_operand_part(line)[2]))) >= 2]
        if not candidates:
            return None
        n = rng.choice(candidates)
        head, eq, tail = _operand_part(lines[n])
        a, b = rng.sample(sorted(set(_VALUE_RE.findall(tail))), 2)
        swap = {a: b, b: a}
        tail = _VALUE_RE.sub(lambda m: swap.get(m.group(0), m.group(0)), tail)
        lines[n] = head + eq + tail
        return "\n".join(lines)

    def replace_value(self, text: str, rng: random.Random) -> str | None:
        """One use of a value -> another value of the program (wrong type, used before defined)."""
        names = sorted(set(_VALUE_RE.findall(text)))
        if len(names) < 2:
            return None
        return self._replace_token(text, rng, ("value",), lambda old, r: r.choice(names))

    # Type mutations ----------------------------------------------------------------------

    def dimension(self, text: str, rng: random.Random) -> str | None:
        """One dimension of one tensor type -> 0, 1, ?, huge."""
        types = list(_TENSOR_RE.finditer(text))
        types = [m for m in types if m.group(1)]
        if not types:
            return None
        m = rng.choice(types)
        dims = list(_DIM_RE.finditer(m.group(1)))
        d = rng.choice(dims)
        start = m.start(1) + d.start()
        return text[:start] + rng.choice(INTERESTING_DIMENSIONS) + text[m.start(1) + d.end():]

    def element_type(self, text: str, rng: random.Random) -> str | None:
        """The element type of one tensor type, or all tensor types with that element type
        (which keeps elementwise ops consistent) -> another element type."""
        found = list(_ELEMENT_RE.finditer(text))
        if not found:
            return None
        m = rng.choice(found)
        new = rng.choice(ELEMENT_TYPES)
        if rng.random() < 0.5:
            return text[:m.start()] + new + text[m.end():]
        old = re.escape(m.group(0))
        return re.sub(rf"(?<=[x<]){old}(?=>)", new, text)

    def nest_type(self, text: str, rng: random.Random) -> str | None:
        """A tensor type -> a deeper one (a tuple of it, one more dimension, a complex)."""
        types = list(_TENSOR_RE.finditer(text))
        if not types:
            return None
        m = rng.choice(types)
        whole = m.group(0)
        new = rng.choice((f"tuple<{whole}>", f"tuple<{whole}, {whole}>",
                          f"tensor<1x{m.group(1)}{m.group(2)}>",
                          f"tensor<{m.group(1)}complex<{m.group(2)}>>",
                          f"tensor<{m.group(1)}tensor<{m.group(2)}>>"))
        return text[:m.start()] + new + text[m.end():]

    # Line and region mutations -------------------------------------------------------------

    @staticmethod
    def _op_lines(lines: list[str]) -> list[int]:
        return [n for n, line in enumerate(lines) if _OP_LINE_RE.match(line)]

    def delete_line(self, text: str, rng: random.Random) -> str | None:
        lines = text.split("\n")
        ops = self._op_lines(lines)
        if not ops:
            return None
        del lines[rng.choice(ops)]
        return "\n".join(lines)

    def duplicate_line(self, text: str, rng: random.Random) -> str | None:
        """An op line appears twice (its results are then defined twice), or moves up."""
        lines = text.split("\n")
        ops = self._op_lines(lines)
        if not ops:
            return None
        n = rng.choice(ops)
        target = rng.choice(ops)
        line = lines[n] if rng.random() < 0.5 else lines.pop(n)
        lines.insert(min(target, len(lines)), line)
        return "\n".join(lines)

    def region(self, text: str, rng: random.Random) -> str | None:
        """A region (``({ ... })`` or a ``{`` ending a line up to its closing brace) is
        deleted, emptied or duplicated."""
        opens = [m.start() for m in re.finditer(r"\{\s*\n|\(\{", text)]
        if not opens:
            return None
        start = rng.choice(opens)
        end = _matching_brace(text, text.index("{", start))
        if end is None:
            return None
        body = text[start:end + 1]
        choice = rng.randrange(3)
        if choice == 0:
            return text[:start] + text[end + 1:]
        if choice == 1:
            return text[:text.index("{", start) + 1] + "\n" + text[end:]
        return text[:end + 1] + body + text[end + 1:]

    def splice(self, text: str, rng: random.Random) -> str | None:
        """A few lines of another program inserted at an op line of this one."""
        if not self.pool:
            return None
        other = rng.choice(self.pool).split("\n")
        lines = text.split("\n")
        ops = self._op_lines(lines) or [len(lines)]
        start = rng.randrange(len(other))
        piece = other[start:start + rng.choice((1, 1, 2, 3, 5))]
        at = rng.choice(ops)
        return "\n".join(lines[:at] + piece + lines[at:])


def _operand_part(line: str) -> tuple[str, str, str]:
    """(results, "=", the rest) of an op line; ("", "", line) without results."""
    if "=" not in line:
        return "", "", line
    return line.partition("=")


def _matching_brace(text: str, open_at: int) -> int | None:
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    return None
