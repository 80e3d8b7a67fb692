"""remat: lower peaks, the same bits, copies that cse keeps, and jax.checkpoint's
recomputation kept by the cleanup pipeline."""
from __future__ import annotations

import logging

import numpy as np
import pytest

import stablehlo
from stablehlo.verify import verify_module
from xla_core.buffers import assign_buffers
from xla_core.buffers.remat import CLONE_ATTR, RematError, remat_summary
from xla_core.buffers.tests.jax_programs import gpt_block_train_step, mlp_train_step
from xla_core.passes import PassContext, Pipeline, make_pipeline, parse_pass_list


def _run(module, passes: str) -> None:
    Pipeline("t", parse_pass_list(passes)).run(module, PassContext())


def _copies(module) -> int:
    return sum(CLONE_ATTR in op.attributes for op in module.lookup("main").walk())


@pytest.mark.parametrize("build", [mlp_train_step, gpt_block_train_step])
def test_remat_lowers_the_peak_and_keeps_every_bit(build):
    text, args = build()
    scheduled = stablehlo.parse(text)
    _run(scheduled, "memory-schedule")
    before = assign_buffers(scheduled.lookup("main"))
    limit = int(before.argument_bytes + 0.8 * before.heap_bytes)
    m = stablehlo.parse(text)
    _run(m, f"memory-schedule,remat{{memory-limit={limit}}}")
    verify_module(m)
    after = assign_buffers(m.lookup("main"))
    summary = remat_summary(m.lookup("main"))
    assert after.peak_bytes < before.peak_bytes
    assert summary == {"limit": limit, "peak_before": before.peak_bytes,
                       "peak_after": after.peak_bytes, "recomputed": _copies(m)}
    expected = stablehlo.evaluate(scheduled, args)
    got = stablehlo.evaluate(m, args)
    for e, g in zip(expected, got):
        assert np.asarray(e).tobytes() == np.asarray(g).tobytes()


def test_cse_after_remat_leaves_the_copies():
    text, _ = gpt_block_train_step()
    m = stablehlo.parse(text)
    _run(m, "cse,memory-schedule")  # duplicates of the program as lowered are merged first
    before = assign_buffers(m.lookup("main"))
    _run(m, f"remat{{memory-limit={int(0.8 * before.peak_bytes)}}}")
    copies, peak = _copies(m), assign_buffers(m.lookup("main")).peak_bytes
    assert copies > 0
    _run(m, "cse")
    assert _copies(m) == copies
    assert assign_buffers(m.lookup("main")).peak_bytes == peak


def test_an_unreachable_limit_warns_with_the_best_found(caplog):
    text, _ = mlp_train_step()
    m = stablehlo.parse(text)
    _run(m, "memory-schedule")
    args = assign_buffers(m.lookup("main")).argument_bytes
    with caplog.at_level(logging.WARNING, logger="openhlo.remat"):
        _run(m, f"remat{{memory-limit={args}}}")
    summary = remat_summary(m.lookup("main"))
    assert summary["peak_after"] < summary["peak_before"]
    assert f"the best found (recomputing {summary['recomputed']} ops) is " \
           f"{summary['peak_after']} bytes" in caplog.text


def test_a_bad_limit_is_a_clear_error():
    text, _ = mlp_train_step()
    with pytest.raises(RematError, match="memory limit 'lots'"):
        _run(stablehlo.parse(text), "remat{memory-limit=lots}")


def _checkpointed_mlp(prevent_cse: bool) -> str:
    jax = pytest.importorskip("jax")
    jnp = jax.numpy

    def layer(h, w):
        return jnp.sin(h @ w)

    def loss(ws, x):
        for w in ws:
            x = jax.checkpoint(layer, prevent_cse=prevent_cse,
                               policy=jax.checkpoint_policies.nothing_saveable)(x, w)
        return jnp.sum(x)
    ws = [np.eye(8, dtype=np.float32)] * 3
    return jax.jit(jax.grad(loss)).lower(ws, np.ones((4, 8), np.float32)).as_text()


def _count(module, name: str) -> int:
    return sum(op.name == name for op in module.lookup("main").walk())


def test_cleanup_keeps_what_jax_checkpoint_recomputes():
    # jax.checkpoint with nothing saveable recomputes each layer's product in the backward
    # pass (sin's derivative needs it); the recomputation reads the outputs of an
    # optimization barrier, so cse has nothing to merge it with.
    m = stablehlo.parse(_checkpointed_mlp(prevent_cse=True))
    dots = _count(m, "stablehlo.dot_general")
    assert _count(m, "stablehlo.optimization_barrier") == 3
    make_pipeline("cpu-opt").run(m, PassContext())
    assert _count(m, "stablehlo.dot_general") == dots
    # Without the barrier (prevent_cse=False, meant for scan bodies) cse merges the
    # recomputation with the forward, as XLA's does.
    m = stablehlo.parse(_checkpointed_mlp(prevent_cse=False))
    assert _count(m, "stablehlo.dot_general") == dots
    make_pipeline("cpu-opt").run(m, PassContext())
    assert _count(m, "stablehlo.dot_general") < dots
