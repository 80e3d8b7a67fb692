"""Runs one pytest file as a Bazel py_test (copied next to each test by py_tests_from_glob).

Usage (Bazel passes the file): <runner> path/to/tests/test_x.py [extra pytest args]

- Deselects `slow` tests by default; `bazel test --test_arg=-m --test_arg=slow` overrides it
  (pytest keeps the last -m).
- Sets OPENHLO_SHARED, when the environment does not, to the `shared` directory beside the
  repository root, found by following the test file's runfiles symlink back to the source
  tree (works inside Bazel's sandbox, which leaves absolute paths readable).
- Writes the JUnit XML that Bazel asks for and no cache or bytecode into the runfiles.
"""
import os
import pathlib
import sys


def _default_shared_dir(test_file: str) -> str | None:
    for parent in pathlib.Path(test_file).resolve().parents:
        if (parent / "WORKSPACE").is_file():
            shared = parent.parent / "shared"
            return str(shared) if shared.is_dir() else None
    return None


def main() -> int:
    sys.dont_write_bytecode = True
    test_file, extra = sys.argv[1], sys.argv[2:]
    if "OPENHLO_SHARED" not in os.environ:
        shared = _default_shared_dir(test_file)
        if shared is not None:
            os.environ["OPENHLO_SHARED"] = shared
    import pytest

    args = [test_file, "-p", "no:cacheprovider", "-q", "-rs", "-m", "not slow"]
    if "XML_OUTPUT_FILE" in os.environ:
        args += ["--junitxml", os.environ["XML_OUTPUT_FILE"]]
    code = pytest.main(args + extra)
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:  # e.g. every test in the file is slow
        return 0
    return int(code)


if __name__ == "__main__":
    sys.exit(main())
