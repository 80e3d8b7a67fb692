"""One coverage-guided fuzzing process (atheris + libFuzzer), started by the driver.

    python -m tools.fuzz.engine --target text|run --raw DIR [--time-limit S] [--seeds DIR]
                                -- CORPUS_DIR -max_total_time=T ...   (libFuzzer's flags)

The IR layer is imported under atheris' instrumentation, so libFuzzer sees which branches of
the parser, verifier and printer an input reaches (the ``cov:`` of its status lines) and keeps
inputs that reach new ones. Each input is held to the text contract here (contract.py); for
the ``run`` target an input that parses is then compiled and executed on both backends in a
worker process (run_target.py), whose coverage libFuzzer does not see.

A finding does not stop the process: the first input of each signature is written to the
``--raw`` folder (``N.mlir`` and ``N.json``), the driver minimizes and reports them. Only a
crash of this process itself ends it; libFuzzer then writes the input as ``crash-*`` there
and the driver starts a new process.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import pkgutil
import random
import sys

from tools.fuzz.contract import DEFAULT_TIME_LIMIT, Finding, text_contract

# Share of mutations left to libFuzzer's byte-level mutator (atheris.Mutate).
BYTE_MUTATION_SHARE = 0.2


def parse_arguments(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(our options, libFuzzer's arguments after ``--``)."""
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python -m tools.fuzz.engine")
    parser.add_argument("--target", choices=("text", "run"), required=True)
    parser.add_argument("--raw", required=True, help="folder for the raw findings")
    parser.add_argument("--time-limit", type=float, default=DEFAULT_TIME_LIMIT)
    parser.add_argument("--seeds", action="append", default=None)
    parser.add_argument("--max-seed-bytes", type=int, default=None)
    return parser.parse_args(argv[:split]), argv[split + 1:]


class FindingRecorder:
    """Writes the first input of each finding signature to the raw folder."""

    def __init__(self, folder: str, target: str):
        self.folder, self.target = folder, target
        self.seen = set()
        for name in os.listdir(folder):  # what an earlier process of this run recorded
            if name.endswith(".json"):
                with open(os.path.join(folder, name), encoding="utf-8") as f:
                    self.seen.add(tuple(json.load(f)["signature"]))

    def record(self, finding: Finding, text: str) -> None:
        if finding.signature in self.seen:
            return
        self.seen.add(finding.signature)
        stem = os.path.join(self.folder, hashlib.sha1(text.encode()).hexdigest()[:16])
        with open(stem + ".mlir", "w", encoding="utf-8") as f:
            f.write(text)
        with open(stem + ".json", "w", encoding="utf-8") as f:
            json.dump({"target": self.target, "signature": finding.signature,
                       "finding": finding.to_json()}, f)
        sys.stderr.write(f"FINDING {finding.describe()}\n")


def _import_instrumented(atheris) -> None:
    """Import the IR layer (every module but the tests) with coverage instrumentation; the
    public functions import their implementation lazily, so it is imported here first."""
    with atheris.instrument_imports(include=["stablehlo"]):
        import stablehlo
        for info in pkgutil.walk_packages(stablehlo.__path__, "stablehlo."):
            if ".tests" not in info.name and not info.name.endswith(".tests"):
                __import__(info.name)


def main(argv: list[str]) -> None:
    args, libfuzzer_args = parse_arguments(argv)
    import atheris
    _import_instrumented(atheris)
    from tools.fuzz.mutator import Mutator
    from tools.fuzz.seeds import DEFAULT_MAX_SEED_BYTES, seed_programs
    pool = [text for _, text in seed_programs(args.seeds,
                                              args.max_seed_bytes or DEFAULT_MAX_SEED_BYTES)]
    mutator = Mutator(pool)
    recorder = FindingRecorder(args.raw, args.target)
    runner = None
    if args.target == "run":
        from tools.fuzz.run_target import check_run, make_runner
        runner = make_runner(2 * args.time_limit)

    def test_one_input(data: bytes) -> None:
        text = data.decode("utf-8", errors="replace")
        finding, parsed = text_contract(text, args.time_limit)
        if finding is None and parsed and runner is not None:
            finding = check_run(runner, text)
        if finding is not None:
            recorder.record(finding, text)

    def custom_mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if rng.random() < BYTE_MUTATION_SHARE:
            return atheris.Mutate(data, max_size)
        text = mutator.mutate(data.decode("utf-8", errors="replace"), rng)
        return text.encode()[:max_size]

    atheris.Setup([sys.argv[0]] + libfuzzer_args, test_one_input,
                  custom_mutator=custom_mutator)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv[1:])
