"""Pipeline parallelism from JAX: GPipe and 1F1B with 4 stages (one openhlo device each) and
8 microbatches give the whole-batch output, loss and every stage's gradients of the same
model run unsplit by jax on its own cpu backend; bad batches are clear errors."""
import json

from frameworks.jax.tests.jax_subprocess import pytestmark, run  # noqa: F401 - skip when unbuilt

SCRIPT = """
import json
from frameworks.jax.pipelining import Pipeline, PipelineError
rng = np.random.default_rng(0)

def stage(p, x):
    return jnp.tanh(x @ p["w"] + p["b"])

def loss_fn(y, t):
    return jnp.mean((y - t) ** 2)

params = [{"w": rng.standard_normal((8, 8)).astype(np.float32) * 0.5,
           "b": rng.standard_normal(8).astype(np.float32)} for _ in range(4)]
x = rng.standard_normal((16, 8)).astype(np.float32)
t = rng.standard_normal((16, 8)).astype(np.float32)

def whole(ps, x, t):
    y = x
    for p in ps:
        y = stage(p, y)
    return loss_fn(y, t), y

cpu = jax.devices("cpu")[0]
(ref_loss, ref_out), ref_grads = jax.value_and_grad(whole, has_aux=True)(
    *jax.device_put((params, x, t), cpu))
assert ref_out.devices() == {cpu}
report = {"reference": {"loss": float(ref_loss), "outputs": np.asarray(ref_out).tolist(),
                        "grads": jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(),
                                                        ref_grads)}}
openhlo = jax.devices("openhlo")
for name in ("gpipe", "1f1b"):
    pipe = Pipeline([stage] * 4, loss_fn, n_microbatches=8, schedule=name)
    result = pipe.step(params, x, t)
    report[name] = {
        "loss": float(result.loss), "outputs": np.asarray(result.outputs).tolist(),
        "grads": jax.tree_util.tree_map(lambda a: np.asarray(a).tolist(), result.grads),
        "output_devices": [d.id for d in result.outputs.devices()],
        "grad_devices": [sorted({d.id for leaf in jax.tree_util.tree_leaves(g)
                                 for d in leaf.devices()}) for g in result.grads],
        "bubble": pipe.bubble_fraction}
    assert all(d.platform == "openhlo" for d in result.outputs.devices())
try:
    pipe.step(params, x[:12], t[:12])
except PipelineError as exc:
    report["error"] = str(exc)
print(json.dumps(report))
"""


def test_pipeline_matches_unsplit_jax():
    import numpy as np
    report = json.loads(run(SCRIPT, platform="openhlo,cpu",
                            OPENHLO_JAX_NUM_DEVICES="4").stdout)
    reference = report["reference"]
    for name in ("gpipe", "1f1b"):
        got = report[name]
        np.testing.assert_allclose(got["loss"], reference["loss"], rtol=1e-5)
        np.testing.assert_allclose(got["outputs"], reference["outputs"], rtol=1e-5, atol=1e-6)
        for stage, (mine, theirs) in enumerate(zip(got["grads"], reference["grads"])):
            for key in ("w", "b"):
                np.testing.assert_allclose(mine[key], theirs[key], rtol=1e-5, atol=1e-6,
                                           err_msg=f"{name} stage {stage} {key}")
        assert got["output_devices"] == [3]
        assert got["grad_devices"] == [[0], [1], [2], [3]]
        assert abs(got["bubble"] - (4 - 1) / (8 + 4 - 1)) < 1e-12
    assert report["error"] == ("x of shape (12, 8) cannot be split into 8 equal microbatches on "
                               "its first dimension")
