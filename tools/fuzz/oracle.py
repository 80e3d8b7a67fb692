"""Whether an input breaks the contract of a target, decided in worker processes.

The minimizer and the regression tests ask this about inputs that once crashed, hung or
raised, so the ``Oracle`` runs even the text contract in a worker (runner.py): a crash or a
hang in native code then costs a worker, not the process asking. The ``run`` target adds
compiling and executing on the backends (run_target.py) for inputs that parse.
"""
from __future__ import annotations

from tools.fuzz.contract import CRASH, DEFAULT_TIME_LIMIT, TIMEOUT, Finding
from tools.fuzz.run_target import DEFAULT_RUN_TIME_LIMIT, check_run, make_runner
from tools.fuzz.runner import CRASHED, TIMED_OUT, SubprocessRunner

TARGETS = ("text", "run")
TEXT_WORKER_FUNCTION = "tools.fuzz.contract:text_contract_in_worker"


class Oracle:
    def __init__(self, target: str, time_limit: float = DEFAULT_TIME_LIMIT,
                 run_time_limit: float = DEFAULT_RUN_TIME_LIMIT):
        if target not in TARGETS:
            raise ValueError(f"unknown fuzzing target {target!r} (known: {', '.join(TARGETS)})")
        self.time_limit = time_limit
        # The worker's own alarm reports a slow input; the runner's deadline, later, a hang
        # in native code that the alarm cannot interrupt.
        self.text_runner = SubprocessRunner(TEXT_WORKER_FUNCTION, 2 * time_limit + 5)
        self.run_runner = make_runner(run_time_limit) if target == "run" else None

    def check(self, text: str) -> Finding | None:
        outcome = self.text_runner.call((text, self.time_limit))
        if outcome.status == CRASHED:
            return Finding(CRASH, outcome.detail, "text",
                           f"the worker died ({outcome.detail}) parsing or printing")
        if outcome.status == TIMED_OUT:
            return Finding(TIMEOUT, "InputTimeout", "text",
                           f"no answer within {self.text_runner.timeout:g} s")
        finding, parsed = outcome.value
        if finding is not None or not parsed or self.run_runner is None:
            return finding
        return check_run(self.run_runner, text)

    def close(self) -> None:
        self.text_runner.close()
        if self.run_runner is not None:
            self.run_runner.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
