"""IR dumps of every compiled program (``OPENHLO_DUMP_TO=DIR``).

Each program compiled while dumping gets a folder ``DIR/<program>/`` (``<program>-2``,
``-3``... when the name is taken, by this process or an earlier one) whose files are numbered
in the order they were written:

    000.input.mlir                  the module as the backend received it
    001.<pipeline>.<pass>.mlir      the module after each pass of every pipeline run
    ...                             during the compile (spmd partitioning, the backend's)
    NNN.fusion.explain.txt          the fusion decisions (fusion pass, xla_core/fusion/explain.py)
    NNN.kernels.cc                  generated kernel sources (the cpu backend's codegen)

``<program>`` is the name the caller gives (the module's ``sym_name``, which JAX sets to
``jit_<function>`` and the torch backend to its graph's name), else ``module-<hash>``.

The variable is read once, at the first ``dump_folder()`` call; ``configure(folder)`` sets or
clears it from code. Compilers call ``current()``: None unless a program is being dumped on
this thread, so the unset case costs one attribute read.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import os
import re
import threading

from stablehlo.text.lexer import EOF, tokenize

ENV_VAR = "OPENHLO_DUMP_TO"

_folder: str | None = None
_resolved = False
_local = threading.local()


def dump_folder() -> str | None:
    """The dump root; reads ``OPENHLO_DUMP_TO`` on the first call."""
    global _folder, _resolved
    if not _resolved:
        _resolved = True
        _folder = os.environ.get(ENV_VAR) or None
    return _folder


def configure(folder: str | None) -> None:
    """Dump into ``folder`` from now on (None: stop dumping)."""
    global _folder, _resolved
    _resolved = True
    _folder = os.fspath(folder) if folder is not None else None


class ProgramDump:
    """The numbered files of one compiled program."""

    def __init__(self, folder: str):
        self.folder = folder
        self._count = 0
        self._lock = threading.Lock()

    def write(self, stage: str, text: str, suffix: str = "mlir") -> str:
        """Write ``text`` as the next file, ``NNN.<stage>.<suffix>``; returns its path."""
        with self._lock:
            number = self._count
            self._count += 1
        path = os.path.join(self.folder, f"{number:03d}.{_safe(stage)}.{suffix}")
        with open(path, "w") as f:
            f.write(text if text.endswith("\n") else text + "\n")
        return path

    def write_module(self, stage: str, module) -> str:
        from stablehlo.text import print_module
        return self.write(stage, print_module(module))


def current() -> ProgramDump | None:
    """The program being dumped on this thread, or None."""
    return getattr(_local, "dump", None)


@contextlib.contextmanager
def program(name: str | None, received):
    """Dump the program compiled inside the block: ``received`` (a Module or its text) is
    written as ``000.input.mlir`` and passes run inside add their files. Yields the
    ProgramDump, or None when not dumping."""
    root = dump_folder()
    if root is None:
        yield None
        return
    text = received if isinstance(received, str) else _printed(received)
    dump = ProgramDump(_new_folder(root, _safe(name) if name else _hash_name(text)))
    dump.write("input", text)
    previous = current()
    _local.dump = dump
    try:
        yield dump
    finally:
        _local.dump = previous


def program_name(received) -> str | None:
    """What a program is called: the ``sym_name`` of a Module or of module text (read
    without parsing), else the name of a Module's only function unless it is ``main``
    (the torch backend names its graphs' functions so), else None."""
    if isinstance(received, str):
        return _module_name_in_text(received)
    if received.name:
        return received.name
    functions = list(received.functions())
    if len(functions) == 1 and functions[0].name != "main":
        return functions[0].name
    return None


def _module_name_in_text(text: str) -> str | None:
    """The ``@name`` of ``module @name ...`` when that is the text's first line of code
    (attribute alias definitions ``#a = ...`` and comments before it are skipped); only the
    lines up to it are tokenized, so a large program costs nothing more."""
    for line in io.StringIO(text):  # line by line, lazily
        tokens = tokenize(line)
        if tokens.kinds[0] in (EOF, "hash"):
            continue
        if tokens.texts[0] == "module" and tokens.kinds[1] == "symbol":
            return tokens.texts[1][1:].strip('"')
        return None
    return None


def _printed(module) -> str:
    from stablehlo.text import print_module
    return print_module(module)


def _hash_name(text: str) -> str:
    return "module-" + hashlib.sha256(text.encode()).hexdigest()[:10]


def _safe(name: str) -> str:
    """A file-name-safe form of a program, pipeline or pass name."""
    return re.sub(r"[^\w.-]+", "_", name).strip("._") or "unnamed"


def _new_folder(root: str, name: str) -> str:
    os.makedirs(root, exist_ok=True)
    for k in range(1, 10_000):
        folder = os.path.join(root, name if k == 1 else f"{name}-{k}")
        try:
            os.mkdir(folder)
            return folder
        except FileExistsError:
            continue
    raise OSError(f"{ENV_VAR}: too many dumps named {name!r} in {root}")
