"""``openhlo jax-suite``: JAX's test files on a platform, compared with a baseline."""
from __future__ import annotations

import argparse
import os
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tools.diagnostics import CliError
from tools.jax_suite.outcomes import PASSED
from tools.jax_suite.selection import key_hash
from tools.jax_suite.report import FileResult, read_baseline, table, totals, write_json
from tools.jax_suite.runner import Job, probe_platform, run_job

DEFAULT_FILES = ("lax_test.py", "lax_numpy_test.py", "lax_control_flow_test.py",
                 "random_test.py", "api_test.py")
SRC_ENV = "OPENHLO_JAX_SRC"
DEFAULT_GENERATED_CASES = 5  # JAX: 10; 5 keeps both runs of the 5 files near 25 min (README)
DEFAULT_TIMEOUT = 300.0
DEFAULT_MIN_RATIO = 0.9


def default_src() -> Path:
    """``$OPENHLO_JAX_SRC``, else ``~/.cache/openhlo/jax-src/<installed jax version>``."""
    if os.environ.get(SRC_ENV):
        return Path(os.environ[SRC_ENV])
    import jax

    from xla_core.cache_root import openhlo_cache_home
    return Path(openhlo_cache_home()) / "jax-src" / jax.__version__


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "jax-suite", help="run JAX's own test files on a JAX platform against a baseline",
        description="Run JAX test files with pytest twice, JAX_PLATFORMS=BASELINE then "
                    "JAX_PLATFORMS=PLATFORM (on the tests that passed in the baseline), and "
                    "report per file how many baseline-passed tests pass on the platform and "
                    "the main causes of the others. Exit status 1 if the platform cannot "
                    "start or the total ratio is below --min-ratio.")
    p.add_argument("--jax-src", metavar="DIR",
                   help=f"a jax source folder holding tests/ (default: ${SRC_ENV}, else "
                        "~/.cache/openhlo/jax-src/<jax version>; see tools/README.md)")
    p.add_argument("--files", metavar="A.py,B.py",
                   help="test files in DIR/tests (default: " + ",".join(DEFAULT_FILES) + ")")
    p.add_argument("--platform", default="openhlo", help="platform under test (default openhlo)")
    p.add_argument("--baseline", default="cpu", help="baseline platform (default cpu)")
    p.add_argument("--jobs", "-j", type=int, default=os.cpu_count() or 1,
                   help="pytest processes at once; each file is split into this many shards "
                        "(default: the number of CPUs)")
    p.add_argument("--json", metavar="OUT", help="write figures, causes and every outcome")
    p.add_argument("--sample", "--limit", type=int, metavar="K",
                   help="run a fixed sample of K tests of each file (the same in every run)")
    p.add_argument("--generated-cases", type=int, default=DEFAULT_GENERATED_CASES,
                   metavar="N", help="JAX_NUM_GENERATED_CASES: cases drawn per parameterized "
                                     f"test (default {DEFAULT_GENERATED_CASES})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                   help=f"seconds allowed per test (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--baseline-json", metavar="FILE",
                   help="reuse the baseline outcomes of an earlier --json instead of running "
                        "the baseline (same files, --generated-cases and --sample)")
    p.add_argument("--test-dut", default="cpu", metavar="KIND",
                   help="the device kind JAX's tests are told they run on (its jax_test_dut "
                        "flag; default cpu: OpenHLO's backends run on the host CPU, so the "
                        "tests JAX gates to cpu run and use cpu tolerances; '' for the "
                        "platform's own name)")
    p.add_argument("--min-ratio", type=float, default=DEFAULT_MIN_RATIO, metavar="R",
                   help=f"exit status 1 below this total ratio (default {DEFAULT_MIN_RATIO})")
    p.set_defaults(handler=jax_suite_command)


def jax_suite_command(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise CliError("--jobs must be 1 or more")
    if args.timeout <= 0:
        raise CliError("--timeout must be positive")
    if args.sample is not None and args.sample < 1:
        raise CliError("--sample must be 1 or more")
    src = Path(args.jax_src) if args.jax_src else default_src()
    files = _test_files(src, args.files)
    reused = _reused_baseline(args.baseline_json, files)
    start = time.monotonic()
    platform_error = probe_platform(args.platform)
    if platform_error:
        sys.stderr.write(f"openhlo jax-suite: platform '{args.platform}' does not start: "
                         f"{platform_error}\n")
    results = {f: FileResult(f) for f in files}
    lock = threading.Lock()

    def shard(file: str, index: int) -> None:
        job = Job(src, f"tests/{file}", args.baseline, args.generated_cases, args.timeout,
                  args.sample, (index, args.jobs), test_dut=args.test_dut or None)
        if reused is None:
            base = run_job(job)
            _merge(results[file], "baseline", base, lock, index, args.jobs)
            baseline = base.outcomes
        else:
            baseline = {k: o for k, o in reused[file].items()
                        if key_hash(k) % args.jobs == index}
            with lock:
                results[file].baseline.update(baseline)
        if platform_error:
            with lock:
                results[file].platform_error = platform_error
            return
        passed = sorted(k for k, o in baseline.items() if o.status == PASSED)
        if passed:
            job.platform, job.select = args.platform, passed
            _merge(results[file], "platform", run_job(job), lock, index, args.jobs)

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(shard, f, i) for f in files for i in range(args.jobs)]
        for future in futures:
            future.result()
    ordered = [results[f] for f in files]
    figures = [r.figures() for r in ordered]
    total = totals(figures)
    total["wall_seconds"] = round(time.monotonic() - start, 1)
    sys.stdout.write(table(figures, total, args.baseline, args.platform))
    sys.stdout.write(f"\nwall time {total['wall_seconds']:.0f} s with {args.jobs} jobs, "
                     f"JAX_NUM_GENERATED_CASES={args.generated_cases}"
                     + (f", sample {args.sample} per file" if args.sample else "") + "\n")
    if args.json:
        import jax
        settings = {"jax_version": jax.__version__, "jax_src": str(src),
                    "baseline_name": args.baseline, "platform_name": args.platform,
                    "generated_cases": args.generated_cases, "sample": args.sample,
                    "jobs": args.jobs, "timeout": args.timeout}
        try:
            write_json(args.json, ordered, figures, total, settings)
        except OSError as exc:
            raise CliError(f"cannot write {args.json}: {exc.strerror or exc}") from None
    ratio = total["ratio"]
    return 1 if platform_error or ratio is None or ratio < args.min_ratio else 0


def _merge(result: FileResult, side: str, run, lock: threading.Lock, index: int,
           count: int) -> None:
    """Add one shard's run to the file's result and say so on stderr."""
    with lock:
        getattr(result, side).update(run.outcomes)
        result.seconds[side] = result.seconds.get(side, 0.0) + run.seconds
        result.restarts[side] = result.restarts.get(side, 0) + run.restarts
        if run.error:
            previous = getattr(result, f"{side}_error")
            setattr(result, f"{side}_error", run.error if previous is None else previous)
        passed = sum(o.status == PASSED for o in run.outcomes.values())
        shard = f" shard {index + 1}/{count}" if count > 1 else ""
        note = " (could not run: see the report)" if run.error else ""
        sys.stderr.write(f"{result.file} [{side}]{shard}: {passed}/{len(run.outcomes)} "
                         f"passed in {run.seconds:.0f} s{note}\n")


def _test_files(src: Path, names: str | None) -> list[str]:
    tests = src / "tests"
    if not tests.is_dir():
        raise CliError(f"no jax test sources in {src} (no tests/ folder): give --jax-src or "
                       f"set ${SRC_ENV}; tools/README.md says how to get them")
    _check_version(src)
    files = [n.strip() for n in names.split(",") if n.strip()] if names else list(DEFAULT_FILES)
    if not files:
        raise CliError("--files names no file")
    for name in files:
        if "/" in name or not (tests / name).is_file():
            raise CliError(f"no test file {name} in {tests}")
    return files


def _check_version(src: Path) -> None:
    """A checkout that holds jax/version.py must be the installed jax's version: tests of
    another version test features this jax may not have."""
    version_file = src / "jax" / "version.py"
    if not version_file.is_file():
        return
    import jax
    match = re.search(r'^_version\s*=\s*"([^"]+)"', version_file.read_text(), re.MULTILINE)
    if match and match.group(1) != jax.__version__:
        raise CliError(f"{src} holds jax {match.group(1)}'s tests but jax "
                       f"{jax.__version__} is installed")


def _reused_baseline(path: str | None, files: list[str]):
    if path is None:
        return None
    try:
        reused = read_baseline(path)
    except (OSError, ValueError, KeyError) as exc:
        raise CliError(f"cannot read the baseline from {path}: {exc}") from None
    missing = [f for f in files if f not in reused]
    if missing:
        raise CliError(f"{path} has no baseline for {', '.join(missing)}")
    return reused
