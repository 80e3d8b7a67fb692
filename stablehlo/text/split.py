"""MLIR's ``-split-input-file``: one file holding several independent modules.

Tools run with ``-split-input-file`` (``mlir-opt``, ``stablehlo-opt``, ``stablehlo-translate``)
treat each piece of the file between ``// -----`` markers as a separate input. MLIR looks for
the bare substring ``// -----`` anywhere in the text: whatever follows it on the same line is
part of the marker, and a marker that is itself commented out (``// // -----``) still splits.
The chunks keep their own text only, so line numbers within a chunk restart at 1; callers that
want diagnostics to carry the file's line numbers pad a chunk with ``line - 1`` newlines.
"""
from __future__ import annotations

import re

_MARKER = re.compile(r"// -----[^\n]*")


def split_input_file(text: str) -> list[tuple[int, int, str]]:
    """(index, 1-based line where the chunk starts in ``text``, chunk text) of every chunk.

    A text without markers is one chunk ``(0, 1, text)``; chunks may be empty or hold only
    comments (callers filter them as they need).
    """
    chunks, start, index = [], 0, 0
    for m in _MARKER.finditer(text):
        chunks.append((index, text.count("\n", 0, start) + 1, text[start:m.start()]))
        start, index = m.end(), index + 1
    chunks.append((index, text.count("\n", 0, start) + 1, text[start:]))
    return chunks
