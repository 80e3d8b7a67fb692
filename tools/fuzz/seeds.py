"""The programs a fuzzing run starts from, and the working corpus folder.

By default the seeds are the shared StableHLO conformance suites, read where they lie (next
to the checkout, xla_core/testing/conformance.py) and never copied into the repository: the
``interpret/`` files split at ``// -----`` (stablehlo/text/split.py), ``testdata/`` and
``testdata_chlo_legalized/``; where they are absent, the repository's ``examples/``. The
fuzzer's own regressions (``tools/fuzz/regressions``) are always seeds too: inputs that once
broke something are close to others that do. ``--seeds DIR`` replaces the suites with the
``*.mlir`` files under any folder (the held-out check runs on upstream tests the suites do not
hold). Comment lines are dropped (RUN and CHECK lines mean nothing to the fuzzer) and
programs larger than ``max_bytes`` are left out: large constants slow every execution and
add no new syntax.

The working corpus lives in the cache (``<cache root>/fuzz/<target>``, xla_core/cache_root.py)
or in ``--corpus DIR``, never in the repository.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from stablehlo.text.split import split_input_file
from xla_core.cache_root import cache_root
from xla_core.testing.conformance import conformance_dir

_REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = _REPO_ROOT / "examples"
REGRESSIONS = Path(__file__).resolve().parent / "regressions"
CONFORMANCE_SUITES = ("interpret", "testdata", "testdata_chlo_legalized")
DEFAULT_MAX_SEED_BYTES = 4_000


def seed_programs(dirs: list[str] | None = None, max_bytes: int = DEFAULT_MAX_SEED_BYTES,
                  include_regressions: bool = True) -> list[tuple[str, str]]:
    """(name, text) of every seed program: of ``dirs`` if given, else of the conformance
    suites (else the examples), plus the regressions unless told not to; sorted by name, so
    a run with a fixed seed is reproducible."""
    roots = [Path(d) for d in dirs] if dirs else _conformance_roots() or [EXAMPLES]
    if include_regressions:
        roots.append(REGRESSIONS)
    programs = []
    for root in roots:
        files = [root] if root.is_file() else sorted(root.rglob("*.mlir"))
        for path in files:
            text = path.read_text(encoding="utf-8", errors="replace")
            for index, _line, chunk in split_input_file(text):
                program = _without_comments(chunk)
                if program.strip() and len(program.encode()) <= max_bytes:
                    programs.append((f"{path.name}#{index}", program))
    return sorted(programs)


def _conformance_roots() -> list[Path]:
    roots = [conformance_dir(suite) for suite in CONFORMANCE_SUITES]
    return [root for root in roots if root is not None]


def _without_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines()
                     if not line.lstrip().startswith("//")).strip() + "\n"


def corpus_dir(target: str, given: str | None) -> str:
    """The working corpus folder of ``target`` (created)."""
    path = given or cache_root("fuzz", target)
    os.makedirs(path, exist_ok=True)
    return path


def fill_corpus(path: str, programs: list[tuple[str, str]]) -> int:
    """Write each program into the corpus folder (named by content hash, as libFuzzer
    names its units); returns how many files the folder holds."""
    for _name, text in programs:
        data = text.encode()
        unit = os.path.join(path, hashlib.sha1(data).hexdigest())
        if not os.path.exists(unit):
            with open(unit, "wb") as f:
                f.write(data)
    return len(os.listdir(path))
