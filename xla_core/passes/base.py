"""The pass interface, the pass context, pipelines, and their registries.

A pass is a frozen dataclass with a class-level ``name``; its fields are its
options (``dce{max-iterations=3}`` on the command line sets ``max_iterations``).
``run(module, ctx)`` rewrites the module in place and returns whether it
changed anything.

A ``Pipeline`` is a named list of passes. It runs them in order, skips the ones
the context disables, times each one, can print the module after each one, and
runs its checkers (the verifier by default) after every pass, so a pass that
breaks the IR is named at once instead of failing somewhere later. Under the process-wide
instruments (stablehlo/instrument) each pipeline and pass is a trace span and, while a
program is being dumped, the module is written after every pass.

``PASSES`` maps a pass name to its class; ``PIPELINES`` maps a pipeline name to
a function returning a fresh ``Pipeline``. Both take lazy ``"module:attr"``
entries and installed plugins from the ``openhlo.passes`` /
``openhlo.pipelines`` entry-point groups.
"""
from __future__ import annotations

import dataclasses
import sys
import time
from dataclasses import dataclass, field
from typing import Callable, ClassVar, TextIO

from stablehlo.errors import OpenHLOError
from stablehlo.ir.core import Module
from stablehlo.registry import Registry, RegistryError
from stablehlo.instrument import dump, trace


class PassError(OpenHLOError):
    """A bad pass spec, an unknown pass, or a pass that left the IR invalid."""


@dataclass(frozen=True)
class Pass:
    """Base of every pass; subclasses set ``name`` and implement ``run``."""
    name: ClassVar[str] = ""

    def run(self, module: Module, ctx: "PassContext") -> bool:
        raise NotImplementedError(f"pass {type(self).__name__} does not implement run()")

    def spec(self) -> str:
        """The pass as CLI text, options included: ``dce{max-iterations=3}``."""
        opts = [f"{f.name.replace('_', '-')}={_option_text(getattr(self, f.name))}"
                for f in dataclasses.fields(self) if getattr(self, f.name) != f.default]
        return self.name + ("{" + " ".join(opts) + "}" if opts else "")


def _option_text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@dataclass
class PassRecord:
    """What one pass did in one pipeline run."""
    name: str
    seconds: float
    changed: bool
    skipped: bool = False


@dataclass
class PassContext:
    """Instruments shared by every pass of a run.

    ``timing`` collects per-pass wall time (always recorded; ``timing`` asks the
    tools to report it); ``print_after_all`` writes the module to ``dump``
    after each pass; ``disabled`` names passes to skip; ``verify`` runs the
    pipeline's checkers after every pass.
    """
    timing: bool = False
    print_after_all: bool = False
    disabled: frozenset = frozenset()
    verify: bool = True
    dump: TextIO | None = None
    records: list = field(default_factory=list)

    def timing_report(self) -> str:
        """A table of pass times, in run order, with a total line."""
        lines = ["===-- Pass execution timing report --===",
                 f"  {'wall (ms)':>10}  {'changed':>7}  pass"]
        total = 0.0
        for rec in self.records:
            total += rec.seconds
            state = "skipped" if rec.skipped else ("yes" if rec.changed else "no")
            lines.append(f"  {rec.seconds * 1e3:10.3f}  {state:>7}  {rec.name}")
        lines.append(f"  {total * 1e3:10.3f}  {'':>7}  total")
        return "\n".join(lines)


def verify_checker(module: Module) -> None:
    from stablehlo.verify import verify_module
    verify_module(module)


@dataclass
class Pipeline:
    """A named list of passes with checkers run after every pass."""
    name: str
    passes: list
    checkers: list = field(default_factory=lambda: [verify_checker])

    def run(self, module: Module, ctx: PassContext | None = None) -> bool:
        """Run every enabled pass once; returns whether any changed the module."""
        ctx = ctx if ctx is not None else PassContext()
        changed = False
        program_dump = dump.current()
        with trace.span(f"pipeline {self.name}", "compile"):
            for p in self.passes:
                if p.name in ctx.disabled:
                    ctx.records.append(PassRecord(p.name, 0.0, False, skipped=True))
                    continue
                with trace.span(p.name, "pass", pipeline=self.name) as traced:
                    start = time.perf_counter()
                    did_change = bool(p.run(module, ctx))
                    ctx.records.append(PassRecord(p.name, time.perf_counter() - start,
                                                  did_change))
                    traced.set(changed=did_change)
                changed |= did_change
                if ctx.verify:
                    self._check(module, p)
                if ctx.print_after_all:
                    _dump_after(module, p, ctx.dump or sys.stderr)
                if program_dump is not None:
                    program_dump.write_module(f"{self.name}.{p.name}", module)
        return changed

    def _check(self, module: Module, p: Pass) -> None:
        for checker in self.checkers:
            try:
                checker(module)
            except OpenHLOError as exc:
                raise PassError(f"pass {p.name!r} of pipeline {self.name!r} left an "
                                f"invalid module: {exc}") from exc

    def spec(self) -> str:
        return ",".join(p.spec() for p in self.passes)


def _dump_after(module: Module, p: Pass, out: TextIO) -> None:
    from stablehlo.text import print_module
    out.write(f"// -----// IR Dump After {p.name} //----- //\n")
    out.write(print_module(module))
    out.write("\n\n")


PASSES: Registry[type] = Registry("pass", entry_point_group="openhlo.passes")
PIPELINES: Registry[Callable[[], Pipeline]] = Registry(
    "pipeline", entry_point_group="openhlo.pipelines")


def make_pass(name: str, options: dict | None = None) -> Pass:
    """An instance of the registered pass ``name`` with CLI-style ``options``."""
    try:
        cls = PASSES.get(name)
    except RegistryError as exc:
        raise PassError(str(exc)) from exc
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, text in (options or {}).items():
        attr = key.replace("-", "_")
        if attr not in fields:
            known = ", ".join(sorted(f.replace("_", "-") for f in fields)) or "none"
            raise PassError(f"pass {name!r} has no option {key!r}; options: {known}")
        kwargs[attr] = _convert_option(name, key, text, fields[attr])
    return cls(**kwargs)


def _convert_option(pass_name: str, key: str, text: str, f: dataclasses.Field):
    kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", "str")
    try:
        if kind == "bool":
            if text.lower() not in ("true", "false", "1", "0"):
                raise ValueError(text)
            return text.lower() in ("true", "1")
        if kind == "int":
            return int(text)
        if kind == "float":
            return float(text)
    except ValueError:
        raise PassError(f"pass {pass_name!r}: option {key!r} expects {kind}, "
                        f"got {text!r}") from None
    return text


def parse_pass_list(spec: str) -> list[Pass]:
    """``"inline,dce{max-iterations=3}"`` -> pass instances, in order."""
    passes = []
    for item in _split_top_level(spec):
        name, options = _parse_item(item)
        passes.append(make_pass(name, options))
    return passes


def _split_top_level(spec: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(spec):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth < 0:
                raise PassError(f"unbalanced '}}' in pass list {spec!r}")
        elif ch == "," and depth == 0:
            items.append(spec[start:i])
            start = i + 1
    if depth != 0:
        raise PassError(f"unbalanced '{{' in pass list {spec!r}")
    items.append(spec[start:])
    items = [item.strip() for item in items]
    if any(not item for item in items):
        raise PassError(f"empty pass name in pass list {spec!r}")
    return items


def _parse_item(item: str) -> tuple[str, dict]:
    if "{" not in item:
        return item, {}
    if not item.endswith("}"):
        raise PassError(f"malformed pass options in {item!r}")
    name, body = item[:-1].split("{", 1)
    options = {}
    for pair in body.replace(",", " ").split():
        key, sep, value = pair.partition("=")
        if not sep:
            raise PassError(f"pass option {pair!r} in {item!r} is not key=value")
        options[key] = value
    return name.strip(), options


def make_pipeline(name: str) -> Pipeline:
    """A fresh instance of the registered pipeline ``name``."""
    try:
        factory = PIPELINES.get(name)
    except RegistryError as exc:
        raise PassError(str(exc)) from exc
    return factory()
