"""A process-wide Chrome trace recorder (``OPENHLO_TRACE=FILE``).

Events are Chrome trace-event "X" (complete) events: ``name``, ``cat``, ``ph``, ``pid``,
``tid``, ``ts`` and ``dur`` in microseconds since the recorder started, and ``args``. The file
is ``{"traceEvents": [...]}``, which Perfetto (ui.perfetto.dev) and chrome://tracing open.

The variable is read once, at the first ``recorder()`` call (the first compile reads it);
when it is unset nothing is recorded and ``span`` returns one shared do-nothing object, so
instrumented code costs a function call. The file is written at interpreter exit and by
``flush()``; ``start(path)`` / ``stop()`` trace a part of a program from code.

Writers: xla_core's pipelines (a span per pipeline and per pass), pjrt (compiles,
executions, transfers), the cpu backend (codegen, kernel compiles, profiled instructions)
and the torch backend (eager fallbacks).
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time

ENV_VAR = "OPENHLO_TRACE"


class Recorder:
    """Collects events in memory; ``write`` saves them all (the file is rewritten whole)."""

    def __init__(self, path: str):
        self.path = path
        self.origin_ns = time.perf_counter_ns()
        self.pid = os.getpid()
        self._events: list = []
        self._lock = threading.Lock()

    def add(self, name: str, cat: str, start_ns: int, dur_ns: int, args: dict | None = None,
            tid: int | None = None) -> None:
        """One complete event; ``start_ns`` is a ``time.perf_counter_ns()`` reading."""
        event = {"name": name, "cat": cat, "ph": "X", "pid": self.pid,
                 "tid": threading.get_native_id() if tid is None else tid,
                 "ts": (start_ns - self.origin_ns) / 1e3, "dur": max(dur_ns, 0) / 1e3}
        if args:
            event["args"] = {k: _json_value(v) for k, v in args.items()}
        with self._lock:
            self._events.append(event)

    def events(self) -> list:
        with self._lock:
            return list(self._events)

    def write(self, path: str | None = None) -> str:
        """Save every event so far to ``path`` (default: the recorder's file)."""
        path = path or self.path
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        meta = {"name": "process_name", "ph": "M", "pid": self.pid, "tid": 0,
                "args": {"name": "openhlo"}}
        with open(path, "w") as f:
            json.dump({"traceEvents": [meta, *self.events()], "displayTimeUnit": "ms"}, f)
        return path


def _json_value(value):
    return value if isinstance(value, (int, float, str, bool, type(None))) else str(value)


class Span:
    """Times a ``with`` block as one event; ``set(key=value)`` adds args on the way."""
    __slots__ = ("_recorder", "_name", "_cat", "_args", "_start")

    def __init__(self, recorder: Recorder, name: str, cat: str, args: dict):
        self._recorder, self._name, self._cat, self._args = recorder, name, cat, args

    def set(self, **args) -> None:
        self._args.update(args)

    def __enter__(self) -> "Span":
        self._start = time.perf_counter_ns()
        return self

    def __exit__(self, *exc) -> None:
        end = time.perf_counter_ns()
        self._recorder.add(self._name, self._cat, self._start, end - self._start, self._args)


class _NoSpan:
    """What ``span`` returns when nothing is traced."""
    __slots__ = ()

    def set(self, **args) -> None:
        pass

    def __enter__(self) -> "_NoSpan":
        return self

    def __exit__(self, *exc) -> None:
        pass


NO_SPAN = _NoSpan()
# The active recorder, or None. Hot paths read this attribute directly (no call); it is
# valid once ``recorder()`` ran, which every compile does before anything executes.
RECORDER: Recorder | None = None
_resolved = False
_exit_hook = False


def recorder() -> Recorder | None:
    """The active recorder; reads ``OPENHLO_TRACE`` on the first call."""
    global _resolved
    if not _resolved:
        _resolved = True
        path = os.environ.get(ENV_VAR)
        if path:
            start(path)
    return RECORDER


def start(path: str) -> Recorder:
    """Trace from now on into ``path`` (replacing any active recorder, unsaved)."""
    global RECORDER, _resolved, _exit_hook
    _resolved = True
    RECORDER = Recorder(path)
    if not _exit_hook:
        _exit_hook = True
        atexit.register(_write_at_exit)
    return RECORDER


def stop() -> str | None:
    """Save the active recorder's events and stop tracing; returns the file written."""
    global RECORDER
    active, RECORDER = RECORDER, None
    return active.write() if active is not None else None


def flush(path: str | None = None) -> str | None:
    """Save the events so far (to ``path``, default the traced file); None when not tracing."""
    active = recorder()
    return active.write(path) if active is not None else None


def _write_at_exit() -> None:
    if RECORDER is not None:
        RECORDER.write()


def span(name: str, cat: str, **args):
    """A ``with`` block traced as one event (a shared no-op when not tracing)."""
    active = RECORDER if _resolved else recorder()
    return NO_SPAN if active is None else Span(active, name, cat, args)


def event(name: str, cat: str, start_ns: int, dur_ns: int, **args) -> None:
    """An event whose times are known already (e.g. measured in native code)."""
    active = RECORDER if _resolved else recorder()
    if active is not None:
        active.add(name, cat, start_ns, dur_ns, args)
