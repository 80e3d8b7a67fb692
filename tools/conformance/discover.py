"""Turn conformance files into cases: read RUN lines, split chunks, plan each run.

The runner interprets upstream's lit RUN lines instead of executing them:

* a file with ``RUN-DISABLED...`` lines and no enabled interpreting RUN line
  is skipped (upstream disabled its evaluation);
* each enabled RUN pipeline with a ``--interpret`` stage is one *invocation*:
  ``not`` in front means an error is expected; ``-split-input-file`` (on the
  interpret stage or on the ``stablehlo-opt`` stage feeding it) splits the file
  at ``// -----``; ``--args=[...]`` gives @main's arguments;
  ``--probe-output-dir`` asks for a probe folder; a ``FileCheck`` stage names
  the check prefixes the output must match; ``stablehlo-opt`` flags that name
  a registered xla_core pass (``-inline``) run that pass first, other flags
  (lowerings our interpreter does not need) are ignored;
* a file with no interpreting RUN line is judged by round trip.

A case is one chunk (containing a ``func.func``) times one invocation. Its
text is padded with newlines so that diagnostics carry the file's line numbers.
"""
from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from stablehlo.text import split_input_file

_RUN_LINE = re.compile(r"^\s*//\s*(RUN(?:-DISABLED(?:\([^)\n]*\))?)?)(:?)\s?(.*)$")
_FUNC = re.compile(r'(?:^|[\s"])func\.func\b[^@]*@("[^"]*"|[\w.$-]+)')

INTERPRET, ROUNDTRIP, SKIP = "interpret", "roundtrip", "skip"


@dataclass(frozen=True)
class Invocation:
    """What one interpreting RUN line asks for."""
    expect_error: bool = False
    args_text: str | None = None
    check_prefixes: tuple = ()  # FileCheck prefixes; empty = no FileCheck stage
    print_dense: bool = False
    probe: bool = False
    passes: tuple = ()


@dataclass(frozen=True)
class Case:
    """One unit of work for a worker process."""
    file: str
    case: int | None  # chunk index for split files, None for a whole file
    run: int  # index of the invocation among the file's interpreting RUN lines
    line: int  # line of the case's first function in the file
    kind: str  # INTERPRET, ROUNDTRIP or SKIP
    text: str = ""
    function: str | None = None
    invocation: Invocation = field(default_factory=Invocation)
    message: str = ""  # the reason, for SKIP

    @property
    def label(self) -> str:
        name = os.path.basename(self.file)
        if self.case is not None:
            name += f"#{self.case}"
        if self.run:
            name += f" (run {self.run + 1})"
        return name


def find_files(paths: list[str]) -> list[str]:
    """Every ``.mlir`` file under ``paths`` (files are taken as given), sorted."""
    found = []
    for path in paths:
        if os.path.isdir(path):
            under = [os.path.join(root, f) for root, _, files in os.walk(path)
                     for f in files if f.endswith(".mlir")]
            found.extend(sorted(under))
        elif os.path.exists(path):
            found.append(path)
        else:
            raise FileNotFoundError(path)
    seen = set()
    return [f for f in found if not (f in seen or seen.add(f))]


def plan_file(path: str, text: str, known_passes=()) -> list[Case]:
    """The cases of one file."""
    enabled, disabled = run_commands(text)
    invocations = [inv for inv in (_invocation(cmd, enabled, known_passes) for cmd in enabled)
                   if inv is not None]
    if disabled and not invocations:  # interpretation is what upstream disabled
        return [Case(path, None, 0, 1, SKIP, message=disabled[0])]
    if not invocations:
        function, offset = _first_function(text)
        return [Case(path, None, 0, 1 + offset, ROUNDTRIP, text=text, function=function)]
    split = any(_splits(cmd) for cmd in enabled if _is_interpreting(cmd) or "stablehlo-opt" in cmd)
    chunks = split_input_file(text) if split else [(0, 1, text)]
    cases = []
    for index, line, chunk in chunks:
        function, offset = _first_function(chunk)
        if function is None:
            continue  # a chunk without functions evaluates to nothing
        padded = "\n" * (line - 1) + chunk
        for run, inv in enumerate(invocations):
            cases.append(Case(path, index if split else None, run, line + offset, INTERPRET,
                              padded, function, inv))
    return cases


def run_commands(text: str) -> tuple[list[str], list[str]]:
    """Enabled RUN commands (continuations joined) and the tags of disabled ones."""
    enabled, disabled = [], []
    pending = None
    for raw in text.splitlines():
        m = _RUN_LINE.match(raw)
        if m is None:
            continue
        tag, cmd = m.group(1), m.group(3).strip()
        if tag != "RUN":
            disabled.append(tag)
            continue
        cmd = cmd if pending is None else pending + " " + cmd
        if cmd.endswith("\\"):
            pending = cmd[:-1].rstrip()
            continue
        pending = None
        enabled.append(cmd)
    if pending is not None:
        enabled.append(pending)
    return enabled, disabled


def _first_function(text: str) -> tuple[str | None, int]:
    """Name of the first function in ``text`` and its 0-based line within ``text``."""
    for number, line in enumerate(text.split("\n")):
        code = line.split("//", 1)[0]
        m = _FUNC.search(code)
        if m:
            return m.group(1).strip('"'), number
    return None, 0


def _stages(cmd: str) -> list[list[str]]:
    stages = []
    for part in cmd.split("|"):
        try:
            stages.append(shlex.split(part))
        except ValueError:
            stages.append(part.split())
    return stages


def _is_interpreting(cmd: str) -> bool:
    return any("--interpret" in stage for stage in _stages(cmd))


def _splits(cmd: str) -> bool:
    return any(t in ("-split-input-file", "--split-input-file")
               for stage in _stages(cmd) for t in stage)


def _invocation(cmd: str, commands: list[str], known_passes) -> Invocation | None:
    stages = _stages(cmd)
    interp = next((s for s in stages if "--interpret" in s), None)
    if interp is None:
        return None
    args_text = next((t.split("=", 1)[1] for t in interp if t.startswith("--args=")), None)
    prefixes = ()
    for stage in stages:
        if stage and stage[0] == "FileCheck":
            prefixes = _check_prefixes(stage)
    passes = _opt_passes(cmd, interp, commands, known_passes)
    return Invocation(
        expect_error=bool(stages[0]) and stages[0][0] == "not",
        args_text=args_text, check_prefixes=prefixes,
        print_dense="--interpreter-print-dense" in interp,
        probe=any(t.startswith("--probe-output-dir") for t in interp),
        passes=passes)


def _check_prefixes(stage: list[str]) -> tuple:
    prefixes = []
    for i, tok in enumerate(stage):
        for flag in ("--check-prefix", "--check-prefixes", "-check-prefix", "-check-prefixes"):
            if tok.startswith(flag + "="):
                prefixes.extend(tok.split("=", 1)[1].split(","))
            elif tok == flag and i + 1 < len(stage):
                prefixes.extend(stage[i + 1].split(","))
    return tuple(prefixes) or ("CHECK",)


def _opt_passes(cmd: str, interp: list[str], commands: list[str], known_passes) -> tuple:
    """Registered passes named by the stablehlo-opt stages that feed ``interp``."""
    feeding = [s for s in _stages(cmd) if s and s[0] == "stablehlo-opt"]
    inputs = {t for t in interp if t.startswith("%t")}
    for other in commands:  # `stablehlo-opt ... > %t.mlir` then `--interpret %t.mlir`
        if other is cmd or ">" not in other:
            continue
        producer, target = other.rsplit(">", 1)
        if target.strip() in inputs:
            feeding += [s for s in _stages(producer) if s and s[0] == "stablehlo-opt"]
    names = []
    for stage in feeding:
        for tok in stage[1:]:
            name = tok.lstrip("-")
            if tok.startswith("-") and name in known_passes and name not in names:
                names.append(name)
    return tuple(names)
