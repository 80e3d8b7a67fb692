"""All generated kernels of one program as one library, compiled once.

``FusionLibrary.build(module, func)`` finds every ``openhlo.fusion`` composite and every
``while`` loop the lowering of ``func`` will meet (nested while/if/case regions and inlined
callees included), generates a kernel for each fusion and each loop the
while template takes (the shared templates of xla_core/codegen, for ``CPU_TARGET``), drops
duplicates (identical kernels share one symbol,
named by a hash of their text), splits the kernels into a few translation units, as many as
the compiler processes that may run at once (``build.jobs()``) and no smaller than
``MIN_UNIT_BYTES``, and compiles them once into one library (build.py, cached by content).
``lookup(op)`` then gives a fusion's (library, symbol, in-place pairs) or the reason it runs
op by op instead; ``loop(op)`` a loop's (library, symbol, GeneratedLoop).
"""
from __future__ import annotations

import hashlib
import logging

from stablehlo.ir.core import Func, Module, Operation

from stablehlo.instrument import dump
from xla_core.buffers import inplace_pairs
from xla_core.codegen import SYMBOL, NotGeneratable, fusion_kernel, loop_source
from xla_core.codegen.cpp_mathlib import source as mathlib_source

from pjrt.plugins.cpu.codegen import abi, build
from pjrt.plugins.cpu.codegen.target import CPU_TARGET

LOG = logging.getLogger("openhlo.cpu")

# Kernel text below which a unit of its own costs more than it saves: a compiler process
# starts in ~10 ms, the prelude parses in a few, a small kernel compiles in 20-40 ms.
MIN_UNIT_BYTES = 4096


def is_fusion(op: Operation) -> bool:
    name = op.attributes.get("name")
    return op.name == "stablehlo.composite" and name is not None and name.value == "openhlo.fusion"


def _fusions(module: Module, func: Func) -> tuple[list[Operation], list[Operation]]:
    """(fusions, while loops) the lowering of ``func`` meets."""
    found, loops, seen = [], [], set()

    def walk(block):
        for op in block.operations:
            if is_fusion(op):
                found.append(op)
            elif op.name == "stablehlo.while":
                loops.append(op)
            elif op.name == "func.call":
                callee = module.lookup(op.attributes["callee"].name)
                if callee is not None and callee.name not in seen:
                    seen.add(callee.name)
                    walk(callee.body)
            for region in op.regions:
                for inner in region.blocks:
                    walk(inner)

    walk(func.body)
    return found, loops


class FusionLibrary:
    def __init__(self):
        self.entries: dict = {}   # op -> (symbol, pairs)
        self.refused: dict = {}   # op -> reason
        self.library: str | None = None
        self.units: list[str] = []  # the translation units, each compiled on its own
        self.deferred = False  # built with compile_now=False and not in the kernel cache
        self.loops: dict = {}     # while op -> (symbol, GeneratedLoop)
        self._held: tuple = ({}, {})  # (entries, loops) set aside while not compiled

    @classmethod
    def build(cls, module: Module, func: Func, compile_now: bool = True) -> "FusionLibrary":
        """The kernels of ``func``'s fusions. ``compile_now=False``: a library not yet in the
        kernel cache is not compiled; ``deferred`` is then True and the fusions run op by op."""
        lib = cls()
        fusions, loops = _fusions(module, func)
        if not fusions and not loops:
            return lib
        if build.find_compiler() is None:
            for op in fusions:
                lib.refused[op] = "no C++ compiler"
            return lib
        texts = {}  # symbol -> (kernel text, math functions it uses)
        for op in fusions:
            try:
                text, used, defs = fusion_kernel(op, module, CPU_TARGET)
            except NotGeneratable as exc:
                lib.refused[op] = str(exc)
                continue
            except (KeyError, AttributeError, TypeError, ValueError, IndexError) as exc:
                lib.refused[op] = f"{type(exc).__name__}: {exc}"
                continue
            body = "\n".join(defs) + "\n" + text
            symbol = "ohk_" + hashlib.sha256(body.encode()).hexdigest()[:16]
            texts.setdefault(symbol, (body.replace(SYMBOL, symbol), used))
            lib.entries[op] = (symbol, _one_operand_per_result(inplace_pairs(op, module)))
        for op in loops:
            made = loop_source(op, module, CPU_TARGET)
            if made is not None:
                symbol = "ohl_" + hashlib.sha256(made.source.encode()).hexdigest()[:16]
                texts.setdefault(symbol, (made.source.replace(SYMBOL, symbol), made.math))
                lib.loops[op] = (symbol, made)
        if not texts:
            return lib
        lib.units = _units(list(texts.values()), build.jobs())
        program_dump = dump.current()
        if program_dump is not None:
            for unit in lib.units:
                program_dump.write("kernels", unit, "cc")
        try:
            lib.library = build.compile_units(lib.units, now=compile_now)
        except build.Deferred:
            lib._hold(dict(lib.entries), dict(lib.loops),
                      "its kernel is being compiled in the background")
            lib.deferred = True
            return lib
        if lib.library is None:
            lib._hold({}, {}, "the generated C++ did not compile")
        return lib

    def compiled(self) -> "FusionLibrary":
        """This deferred library with its translation unit compiled now (the sources are not
        generated again): what the background compile of tiering.py lowers with."""
        if not self.deferred:
            return self
        lib = FusionLibrary()
        lib.refused = {op: r for op, r in self.refused.items() if op not in self._held[0]}
        lib.units = self.units
        lib.library = build.compile_units(self.units)
        if lib.library is None:
            lib._hold({}, {}, "the generated C++ did not compile")
            for op in self._held[0]:
                lib.refused[op] = "the generated C++ did not compile"
        else:
            lib.entries, lib.loops = self._held
        return lib

    @property
    def source(self) -> str:
        """Every unit's text, one after the other (for reading: not one compilable unit)."""
        return "".join(self.units)

    def _hold(self, entries: dict, loops: dict, reason: str) -> None:
        """Set the kernels aside (``entries``/``loops`` keep them for ``compiled``): until
        then every fusion runs op by op for ``reason``, every loop in the executor."""
        for op in self.entries:
            self.refused[op] = reason
        self._held = (entries, loops)
        self.entries, self.loops = {}, {}

    def loop(self, op: Operation):
        """(library, symbol, its ``GeneratedLoop``: captured values in kernel order, the
        results it computes) of a generated ``while``, or None: the executor runs that loop."""
        if op in self.loops:
            symbol, made = self.loops[op]
            return self.library, symbol, made
        return None

    def lookup(self, op: Operation):
        """(library, symbol, in-place pairs), or None with ``reason(op)`` saying why."""
        if op in self.entries:
            symbol, pairs = self.entries[op]
            return self.library, symbol, pairs
        return None

    def reason(self, op: Operation) -> str:
        return self.refused.get(op, "not a fusion of this program")


def _units(kernels: list[tuple[str, set]], jobs: int) -> list[str]:
    """The translation units of ``kernels`` ((text, math functions used) each, in a fixed
    order): at most ``jobs``, none under MIN_UNIT_BYTES of kernel text unless it is the only
    one, balanced by text size (compile time follows it), largest kernels placed first, each
    unit with the prelude and only the math its kernels use. The same kernels always give the
    same units (the kernel cache keys on them)."""
    total = sum(len(text) for text, _ in kernels)
    count = max(1, min(jobs, len(kernels), total // MIN_UNIT_BYTES))
    groups: list[list] = [[] for _ in range(count)]
    sizes = [0] * count
    for text, used in sorted(kernels, key=lambda kernel: -len(kernel[0])):
        smallest = sizes.index(min(sizes))
        groups[smallest].append((text, used))
        sizes[smallest] += len(text)
    return [abi.PRELUDE + mathlib_source(set().union(*(used for _, used in group))) +
            "".join(text for text, _ in group) for group in groups]


def _one_operand_per_result(pairs: list) -> list:
    """The first legal operand for each result, no operand given to two results (the
    executor hands over at most one storage per result)."""
    chosen, taken, done = [], set(), set()
    for result, operand in pairs:
        if result not in done and operand not in taken:
            chosen.append((result, operand))
            done.add(result)
            taken.add(operand)
    return chosen
