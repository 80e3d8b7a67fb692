"""``python -m tools.jax_exit_soak``: a few runs pass; the stderr check is strict."""
import pytest

from pjrt.c_api.loader import library_path
from tools import jax_exit_soak


def test_stderr_check_is_strict():
    harmless = jax_exit_soak.HARMLESS[0]
    assert jax_exit_soak.check_stderr(f"{harmless}\n\n") == []
    for line in ("Traceback (most recent call last):", "Exception ignored in: <function>",
                 "terminate called after throwing an instance of ''",
                 "Fatal Python error: Aborted", "some new warning"):
        assert jax_exit_soak.check_stderr(f"{harmless}\n{line}\n") == [line]
    assert jax_exit_soak.check_stderr(f"Traceback: {harmless}") != []  # a marker wins
    assert jax_exit_soak.check_stderr(f"{harmless} and more") != []    # whole lines only


@pytest.mark.skipif(library_path() is None, reason="pjrt/c_api/_openhlo_pjrt*.so is not built")
def test_three_runs_exit_cleanly(capsys):
    assert jax_exit_soak.main(["--runs", "3", "--timeout", "120"]) == 0
    out = capsys.readouterr().out
    assert "3/3 runs exited cleanly" in out
    assert "mix" in out and "in_flight" in out and "thread_dispatching" in out


@pytest.mark.skipif(library_path() is None, reason="pjrt/c_api/_openhlo_pjrt*.so is not built")
def test_thread_dispatching_at_exit_ends_promptly():
    # A daemon thread dispatching in a loop once kept the exit hook's drain waiting for ever;
    # run_once kills the child after the timeout, so a regression fails here, never hangs.
    result = jax_exit_soak.run_once("thread_dispatching", timeout=60)
    assert result.problem is None, (result.problem, result.stderr[-2000:])
