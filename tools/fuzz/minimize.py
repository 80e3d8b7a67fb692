"""Shrink a failing input while it keeps failing the same way (delta debugging).

``minimize(text, reproduces)`` removes chunks of lines, halving the chunk size down to one
line, then chunks of tokens (stablehlo/text/lexer.py) the same way, keeping every removal
after which ``reproduces(candidate)`` still holds. The caller's ``reproduces`` compares
finding signatures (class, exception type, place), so the minimized input shows the same bug,
not any bug. A time budget bounds the work: inputs that hang cost their time limit per try.
"""
from __future__ import annotations

import time
from typing import Callable

from stablehlo.text.lexer import tokenize

DEFAULT_BUDGET_S = 60.0


def minimize(text: str, reproduces: Callable[[str], bool],
             budget_s: float = DEFAULT_BUDGET_S) -> str:
    deadline = time.monotonic() + budget_s
    lines = [line for line in text.split("\n") if line.strip()]
    lines = _reduce(lines, lambda kept: reproduces("\n".join(kept) + "\n"), deadline)
    text = "\n".join(lines) + "\n"
    tokens = _token_spans(text)
    kept = _reduce(tokens, lambda spans: reproduces(_render(text, spans)), deadline)
    return _render(text, kept)


def _reduce(items: list, reproduces: Callable[[list], bool], deadline: float) -> list:
    """The smallest sublist found by removing chunks of ``items`` while ``reproduces``."""
    chunk = max(1, len(items) // 2)
    while items and time.monotonic() < deadline:
        start = 0
        removed_any = False
        while start < len(items) and time.monotonic() < deadline:
            candidate = items[:start] + items[start + chunk:]
            if candidate and reproduces(candidate):
                items = candidate
                removed_any = True
            else:
                start += chunk
        if chunk == 1 and not removed_any:
            break
        chunk = max(1, chunk // 2)
    return items


def _token_spans(text: str) -> list[tuple[int, int]]:
    tokens = tokenize(text)
    return [(start, start + len(tok)) for start, tok in zip(tokens.starts, tokens.texts) if tok]


def _render(text: str, spans: list[tuple[int, int]]) -> str:
    """The kept tokens, each keeping the line break or space that came before it."""
    out = []
    previous_end = 0
    for start, end in spans:
        gap = text[previous_end:start]
        out.append(("\n" if "\n" in gap else " ") if out else "")
        out.append(text[start:end])
        previous_end = end
    return "".join(out) + "\n"
