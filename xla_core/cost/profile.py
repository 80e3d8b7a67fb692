"""Measured op times: Chrome trace files of runs, read back as a profile, and compared
against the cost model's estimates.

``openhlo run FILE --trace out.json`` writes a Chrome trace event file (the object form,
``{"traceEvents": [...]}``; chrome://tracing and https://ui.perfetto.dev open it): one
complete event (``"ph": "X"``) per run of an instruction, with

* ``name``: the instruction's key (``profile_keys``): its place and op name,
  ``f.mlir:3:5: 'stablehlo.dot_general'`` (a fusion adds its decomposition and kind), with
  `` #n`` appended when several instructions of the program share a place;
* ``cat``: ``"compute"`` or ``"collective"``; ``ts`` and ``dur`` in microseconds;
* ``pid``: the global device id; ``tid``: the thread that ran it (named by metadata events);
* ``args``: ``op`` (the op name) and, when the op is found in the program, ``results`` (its
  result types) and, for collectives, ``bytes`` (of its operands).

The reader::

    from xla_core.cost.profile import read_profile, compare_with_estimates
    measured = read_profile("out.json")        # MeasuredProfile: median seconds per key
    comparison = compare_with_estimates(module, measured, hardware("cpu"))
    print(comparison.report())                 # which estimates a measured time replaces

A key is stable across runs of one program: places come from the program text, and the
`` #n`` of a shared place counts instructions in the order they first run (which is
program order: a function's ops, control-flow regions after their op, callees inlined).
"""
from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from stablehlo.errors import OpenHLOError
from stablehlo.ir.core import Block, Func, Module, Operation
from stablehlo.ir.ops.async_collectives import ASYNC_DONE, ASYNC_START, wrapped_collective
from stablehlo.ir.ops.base import COLLECTIVE
from xla_core.cost.estimates import op_cost, roofline_seconds, type_bytes
from xla_core.cost.hardware import HardwareDescription

COMPUTE = "compute"
# the suffix of the key of a started collective's run on the communication thread
COMMUNICATION = " [communication thread]"
COLLECTIVE_CATEGORY = "collective"
CATEGORIES = (COMPUTE, COLLECTIVE_CATEGORY)

# Ops whose regions run as instructions of their own (other regions, like a reduce's body,
# belong to their op's kernel).
_CONTROL_FLOW = frozenset({"stablehlo.while", "stablehlo.if", "stablehlo.case"})
_TERMINATORS = frozenset({"func.return", "stablehlo.return"})


class ProfileError(OpenHLOError):
    """A trace file that cannot be read as a profile (the message names the file and entry)."""


# ---- keys -----------------------------------------------------------------------------------

def profile_keys(places: Sequence[str]) -> list[str]:
    """The key of each of ``places`` (instructions in the order they first run): the place
    itself when no other instruction has it, else ``place #n`` (n = 1, 2, ... in order)."""
    total: dict[str, int] = {}
    for place in places:
        total[place] = total.get(place, 0) + 1
    seen: dict[str, int] = {}
    keys = []
    for place in places:
        if total[place] == 1:
            keys.append(place)
        else:
            seen[place] = seen.get(place, 0) + 1
            keys.append(f"{place} #{seen[place]}")
    return keys


def op_place(op: Operation) -> str:
    """The place a backend's instruction for ``op`` carries: ``op.where()``, and for an
    ``openhlo.fusion`` composite its decomposition and kind too."""
    from xla_core.buffers.liveness import is_fusion  # imported here: buffers imports cost
    from xla_core.fusion.kinds import fusion_where
    return fusion_where(op) if is_fusion(op) else op.where()


def op_keys(module: Module, function: str, synchronous: bool = False
            ) -> dict[str, Operation]:
    """Every op of ``function`` that runs as an instruction, by its key: ops of control-flow
    regions after their op, callees' ops in place of the call (as the cpu lowering runs
    them). ``synchronous``: the keys the ops would have if every async pair were its
    synchronous collective (a start keyed as the collective it wraps, dones left out)."""
    ops: list[Operation] = []

    def visit(block: Block) -> None:
        for op in block.operations:
            if op.name in _TERMINATORS or (synchronous and op.name == ASYNC_DONE):
                continue
            if op.name == "func.call":
                visit(module.lookup(op.attributes["callee"].name).body)
                continue
            ops.append(op)
            if op.name in _CONTROL_FLOW:
                for region in op.regions:
                    visit(region.block)

    visit(module.lookup(function).body)

    def place(op: Operation) -> str:
        if synchronous and op.name == ASYNC_START:
            return op_place(wrapped_collective(op))
        return op_place(op)
    return dict(zip(profile_keys([place(op) for op in ops]), ops))


def is_collective(op: Operation) -> bool:
    """An op that moves data between devices. replica_id and partition_id carry the
    collective trait (they depend on the device grid) but exchange nothing: no operands."""
    return op.opdef is not None and op.opdef.has(COLLECTIVE) and bool(op.operands)


# ---- writing --------------------------------------------------------------------------------

@dataclass(frozen=True)
class OpEvent:
    """One run of one instruction on one device, times in nanoseconds of the monotonic clock
    (shared by the processes of one machine)."""
    name: str
    category: str
    device: int
    thread: int
    thread_name: str
    start_ns: int
    duration_ns: int
    args: dict = field(default_factory=dict)


def op_event_args(op: Operation | None, place: str) -> tuple[str, dict]:
    """(category, args) of an event of ``op`` (None: the op is not in the program, and only
    its name is known, from ``place``)."""
    if op is None:
        # a place ends in the op's name in quotes: ``f.mlir:3:3: 'stablehlo.add'``
        start = place.find("'")
        end = place.find("'", start + 1)
        return COMPUTE, {"op": place[start + 1:end] if 0 <= start < end else "?"}
    if op.name == ASYNC_START:  # its events are its collective's: issue and transfer
        op = wrapped_collective(op)
    args = {"op": op.name, "results": [str(r.type) for r in op.results]}
    if is_collective(op):
        args["bytes"] = sum(type_bytes(v.type) for v in op.operands)
        return COLLECTIVE_CATEGORY, args
    return COMPUTE, args


def chrome_trace(events: Iterable[OpEvent], device_names: dict[int, str]) -> dict:
    """The Chrome trace of ``events``; ``ts`` counts from the earliest one, whose clock time
    is kept in ``otherData.origin_ns`` so traces of other processes can be merged."""
    events = sorted(events, key=lambda e: (e.device, e.thread, e.start_ns))
    origin = min((e.start_ns for e in events), default=0)
    out: list[dict] = []
    for device, label in sorted(device_names.items()):
        out.append({"ph": "M", "name": "process_name", "pid": device, "tid": 0,
                    "args": {"name": label}})
        out.append({"ph": "M", "name": "process_sort_index", "pid": device, "tid": 0,
                    "args": {"sort_index": device}})
    threads = {}
    for e in events:
        threads.setdefault((e.device, e.thread), e.thread_name)
    for (device, thread), name in sorted(threads.items()):
        out.append({"ph": "M", "name": "thread_name", "pid": device, "tid": thread,
                    "args": {"name": name}})
    for e in events:
        out.append({"name": e.name, "cat": e.category, "ph": "X",
                    "ts": (e.start_ns - origin) / 1e3, "dur": e.duration_ns / 1e3,
                    "pid": e.device, "tid": e.thread, "args": e.args})
    return {"traceEvents": out, "displayTimeUnit": "ns",
            "otherData": {"producer": "openhlo", "origin_ns": origin}}


def merge_chrome_traces(traces: Sequence[dict]) -> dict:
    """One trace of several (from ``chrome_trace``, one per process): their events on one
    time axis, from the earliest origin."""
    origin = min((t["otherData"]["origin_ns"] for t in traces), default=0)
    merged: list[dict] = []
    for t in traces:
        shift = (t["otherData"]["origin_ns"] - origin) / 1e3
        for e in t["traceEvents"]:
            merged.append(dict(e, ts=e["ts"] + shift) if e.get("ph") == "X" else e)
    return {"traceEvents": merged, "displayTimeUnit": "ns",
            "otherData": {"producer": "openhlo", "origin_ns": origin}}


# ---- reading --------------------------------------------------------------------------------

@dataclass
class MeasuredProfile:
    """Measured durations in seconds per key (every event of it, all devices), and each
    key's category."""
    source: str
    durations: dict[str, list[float]] = field(default_factory=dict)
    categories: dict[str, str] = field(default_factory=dict)

    def seconds(self, key: str) -> float | None:
        """Median measured time of ``key`` (over devices and repeated runs), or None."""
        found = self.durations.get(key)
        return statistics.median(found) if found else None

    def keys(self) -> list[str]:
        return list(self.durations)


def read_profile(path: str) -> MeasuredProfile:
    """The profile in the Chrome trace file ``path`` (ProfileError when it is not one)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as exc:
        raise ProfileError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"trace {path} is not JSON: {exc}") from None
    return profile_from_trace(data, path)


def profile_from_trace(data, source: str) -> MeasuredProfile:
    """The profile in a Chrome trace (the JSON array or the ``{"traceEvents": [...]}`` form).
    Events other than complete (``X``) compute and collective events are skipped, so traces
    with other events (metadata, Python spans) read too."""
    events = data.get("traceEvents") if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ProfileError(f"trace {source}: expected a JSON array of events or an object "
                           f"with a 'traceEvents' array")
    profile = MeasuredProfile(source)
    for i, event in enumerate(events):
        if not isinstance(event, dict):
            raise ProfileError(f"trace {source}: event {i} is a {type(event).__name__}, "
                               f"not an object")
        if event.get("ph") != "X" or event.get("cat") not in CATEGORIES:
            continue
        name, dur = event.get("name"), event.get("dur")
        if not isinstance(name, str) or not name:
            raise ProfileError(f"trace {source}: event {i} has no name")
        for key in ("ts", "dur"):
            value = event.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value):
                raise ProfileError(f"trace {source}: event {i} ({name}): '{key}' must be a "
                                   f"number of microseconds, got {value!r}")
        if dur < 0:
            raise ProfileError(f"trace {source}: event {i} ({name}): negative duration {dur}")
        category = profile.categories.setdefault(name, event["cat"])
        if category != event["cat"]:
            raise ProfileError(f"trace {source}: event {i} ({name}) is '{event['cat']}', "
                               f"earlier events of it '{category}'")
        profile.durations.setdefault(name, []).append(dur * 1e-6)
    return profile


# ---- matching a profile to a program ---------------------------------------------------------

@dataclass(frozen=True)
class Measurement:
    """The measured time of one op: ``op`` is a compute op or a start (the executing thread's
    time: a start's is its issue), or, with ``communication``, a collective (the time it
    communicated: a start's wrapped collective, or a synchronous one)."""
    key: str
    op: Operation
    seconds: float
    communication: bool = False


@dataclass
class ProfileMatch:
    measured: list[Measurement]  # in program order
    unmeasured: list[str]        # keys of ops with no measured time
    unmatched: list[str]         # measured keys that name no op of the function


# Ops whose events are matched but whose times are not used: a done's (the schedule decides
# its wait) and a constant's (none at run time), Note [matching a profile].
_NO_RUN_TIME = frozenset({ASYNC_DONE, "stablehlo.constant"})


def match_profile(module: Module, profile: MeasuredProfile, function: str | None = None
                  ) -> ProfileMatch:
    """The measured time of each op of ``function`` (default: ``main``, or the only
    function), Note [matching a profile].

    Note [matching a profile]
    An op's key is looked up as the program has it now. A started collective's
    communication time is the ``KEY [communication thread]`` event of its start, else the
    event of the synchronous collective it was when the profile was recorded (its key in
    ``op_keys(..., synchronous=True)``): the scheduler sees every collective as an async
    pair, and the program it schedules becomes, after convert-async-to-sync, the one a trace
    records. A done's events are its wait for the communication, which the schedule
    decides: they are matched, not used. Places shared by several collectives are told
    apart by their order (the `` #n`` of ``profile_keys``), so a place with both a recorded
    synchronous and a recorded asynchronous collective of one kind may leave them unmatched
    (their estimates stay). A constant is no work at run time (the cpu executor puts it in
    its slot when it makes a frame), so a trace need not name it: an event of one is
    matched, none is not missed."""
    function = function or _entry(module)
    own = op_keys(module, function)
    synchronous = {}
    for key, op in op_keys(module, function, synchronous=True).items():
        synchronous.setdefault(op, key)
    measured: list[Measurement] = []
    unmeasured: list[str] = []
    used: set[str] = set()

    def find(keys: Sequence[str]) -> tuple[str, float] | None:
        for key in keys:
            seconds = profile.seconds(key)
            if seconds is not None:
                used.add(key)
                return key, seconds
        return None

    for key, op in own.items():
        if op.name in _NO_RUN_TIME:
            find([key])
            continue
        if op.name == ASYNC_START:
            issue = find([key])
            if issue is not None:
                measured.append(Measurement(issue[0], op, issue[1]))
            found = find([key + COMMUNICATION, synchronous[op]])
            target = wrapped_collective(op)
        else:
            found = find([key])
            target = op
        if found is None:
            unmeasured.append(key)
        else:
            measured.append(Measurement(found[0], target, found[1],
                                        op.name == ASYNC_START or is_collective(op)))
    unmatched = [key for key in profile.keys() if key not in used]
    return ProfileMatch(measured, unmeasured, unmatched)


# ---- comparing with estimates ---------------------------------------------------------------

@dataclass(frozen=True)
class Replacement:
    """A measured time that would replace the cost model's estimate of one op."""
    key: str
    op: str
    estimated_s: float
    measured_s: float

    @property
    def ratio(self) -> float:
        """measured / estimated (inf for an op estimated to take no time)."""
        return self.measured_s / self.estimated_s if self.estimated_s > 0 else math.inf


@dataclass
class EstimateComparison:
    replaced: list[Replacement]  # in program order
    unmeasured: list[str]        # keys of ops with no measured time: estimates stay
    unmatched: list[str]         # measured keys that name no op of the function

    def report(self) -> str:
        lines = [f"{'estimated':>12} {'measured':>12} {'ratio':>8}  op"]
        for r in self.replaced:
            lines.append(f"{r.estimated_s:12.3e} {r.measured_s:12.3e} {r.ratio:8.2f}  {r.key}")
        if self.unmeasured:
            lines.append(f"not measured (estimates kept): {', '.join(self.unmeasured)}")
        if self.unmatched:
            lines.append(f"measured, not in the program: {', '.join(self.unmatched)}")
        return "\n".join(lines)


def compare_with_estimates(module: Module, profile: MeasuredProfile, hw: HardwareDescription,
                           *, function: str | None = None,
                           estimate: Callable[[Operation], float] | None = None
                           ) -> EstimateComparison:
    """Each op of ``function`` (default: ``main``, or the only function) with its estimate
    (``estimate(op)``, default the roofline time of ``op_cost``) and measured median time,
    matched as ``match_profile`` does (a start's communication is its wrapped collective's
    measurement)."""
    if estimate is None:
        def estimate(op: Operation) -> float:
            return roofline_seconds(op_cost(op, module=module), hw)
    match = match_profile(module, profile, function)
    replaced = [Replacement(m.key, m.op.name, estimate(m.op), m.seconds)
                for m in match.measured]
    return EstimateComparison(replaced, match.unmeasured, match.unmatched)


def _entry(module: Module) -> str:
    funcs: list[Func] = list(module.functions())
    if module.has_function("main"):
        return "main"
    if len(funcs) == 1:
        return funcs[0].name
    raise ProfileError(f"name the function to compare; functions: {[f.name for f in funcs]}")
