"""use_spmd(auto=True) / OPENHLO_AUTO_SPMD under torch.compile(openhlo): unannotated forward
and backward graphs are auto-sharded on the mesh's 8 virtual cpu devices and give eager
PyTorch's results (an MLP's SGD steps); the per-device programs show what was chosen (the
weights' pieces, the all-reduce a Megatron MLP needs); marks stay constraints; switching off
compiles unsharded programs again; bad settings and a solver out of time are reported."""
import copy
import logging

import numpy as np
import pytest
import torch

import pjrt
from frameworks.torch import sharding as xs
from frameworks.torch.backend import openhlo_backend
from frameworks.torch.tests.torch_support import records
from xla_core.spmd.summary import collectives

HW = "generic-cpu"  # fixed costs: the plan does not depend on this machine


class MLP(torch.nn.Module):
    """Few tokens, wide layers: Megatron (column- then row-parallel) is the cheapest plan."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(256, 1024)
        self.fc2 = torch.nn.Linear(1024, 256)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    xs.use_spmd(None)
    xs.set_num_devices(None)


def _mesh():
    return xs.Mesh(np.arange(8), (8,), ("model",))


def _loss_fn(model):
    return lambda x, t: torch.nn.functional.mse_loss(model(x), t)


def _train(model, x, t, steps, compiled=True, lr=0.1) -> list:
    run = torch.compile(_loss_fn(model), backend=openhlo_backend) if compiled \
        else _loss_fn(model)
    losses = []
    for _ in range(steps):
        loss = run(x, t)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(lr * p.grad)
        losses.append(loss.item())
    return losses


def _new_programs(before: int) -> dict:
    return dict(xs.compiled_programs()[before:])


def _piece_types(exe) -> set:
    """The per-device parameter types of a partitioned program."""
    return {str(t) for t in exe.parameter_types}


def test_mlp_sgd_steps_are_auto_sharded_megatron_style_and_match_eager():
    model, x, t = MLP(), torch.randn(16, 256), torch.randn(16, 256)
    ref = copy.deepcopy(model)
    xs.use_spmd(auto=True, mesh=_mesh(), hardware=HW)
    before = len(xs.compiled_programs())
    got = _train(model, x, t, steps=2)
    want = _train(ref, x, t, steps=2, compiled=False)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=name)
    programs = _new_programs(before)
    # once each: the plan is reused (graph numbers count every graph the process compiled)
    assert sorted(name.split("_")[0] for name in programs) == ["backward", "forward"]
    forward, = (exe for name, exe in programs.items() if name.startswith("forward"))
    backward, = (exe for name, exe in programs.items() if name.startswith("backward"))
    # fc1.weight [1024, 256] split by rows (column-parallel), fc2.weight [256, 1024] by
    # columns (row-parallel), as eighths on each device; x whole
    assert {"tensor<128x256xf32>", "tensor<256x128xf32>", "tensor<16x256xf32>"} <= \
        _piece_types(forward)
    assert [kind for kind, _, _ in collectives(forward.executable.module)] == ["all-reduce"]
    # the backward graph's saved tensors: fc2.weight transposed ([1024, 256]) and the hidden
    # activations ([16, 1024]), split on the hidden dimension as in the forward
    assert {"tensor<128x256xf32>", "tensor<16x128xf32>"} <= _piece_types(backward)


def test_switching_off_compiles_the_unsharded_program_again():
    model, x, t = MLP(), torch.randn(16, 256), torch.randn(16, 256)
    run = torch.compile(_loss_fn(model), backend=openhlo_backend)
    xs.use_spmd(auto=True, mesh=_mesh(), hardware=HW)
    with torch.no_grad():
        sharded = run(x, t)
    before = len(xs.compiled_programs())
    pjrt.reset_metrics()
    xs.use_spmd(auto=False)
    with torch.no_grad():
        plain = run(x, t)
        want = _loss_fn(model)(x, t)
    assert len(xs.compiled_programs()) == before  # nothing partitioned any more
    assert pjrt.metrics().recompilations == {"torch: new input auto-sharding": 1}
    torch.testing.assert_close(sharded, want, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(plain, want, rtol=1e-5, atol=1e-6)


def test_a_marked_input_stays_a_constraint():
    model, x = MLP(), torch.randn(16, 256)
    mesh = _mesh()
    xs.mark_sharding(x, mesh, ("model", None))  # the batch split, which the plan would not
    xs.use_spmd(auto=True, mesh=mesh, hardware=HW)
    before = len(xs.compiled_programs())
    with torch.no_grad():
        got = torch.compile(model, backend=openhlo_backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    (forward,) = _new_programs(before).values()
    assert "tensor<2x256xf32>" in _piece_types(forward)  # x: 16 rows over 8 devices


def test_environment_switch_and_mesh_like_pytorch_xla(monkeypatch):
    monkeypatch.setenv("OPENHLO_AUTO_SPMD", "1")
    monkeypatch.setenv("OPENHLO_AUTO_SPMD_MESH", "4,2")
    auto = xs.auto_spmd()
    assert auto.mesh.mesh_shape == (4, 2) and auto.mesh.axis_names == ("axis_0", "axis_1")
    model, x = MLP(), torch.randn(16, 256)
    before = len(xs.compiled_programs())
    with torch.no_grad():
        got = torch.compile(model, backend=openhlo_backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert len(_new_programs(before)) == 1
    xs.use_spmd(auto=False)  # an explicit switch wins over the environment
    assert xs.auto_spmd() is None
    monkeypatch.setenv("OPENHLO_AUTO_SPMD", "0")
    xs.use_spmd(None)
    assert xs.auto_spmd() is None


@pytest.mark.parametrize("env, value, message", [
    ("OPENHLO_AUTO_SPMD", "yes", "OPENHLO_AUTO_SPMD='yes': expected 1"),
    ("OPENHLO_AUTO_SPMD_MESH", "4,x", "OPENHLO_AUTO_SPMD_MESH='4,x' is not a mesh shape"),
    ("OPENHLO_AUTO_SPMD_MESH", "4,0", "OPENHLO_AUTO_SPMD_MESH='4,0': mesh_shape"),
])
def test_bad_environment_settings_are_named(monkeypatch, env, value, message):
    monkeypatch.setenv("OPENHLO_AUTO_SPMD", "1")
    monkeypatch.setenv(env, value)
    with pytest.raises(xs.ShardingError, match=message.replace("(", r"\(")):
        xs.auto_spmd()


def test_mesh_size_must_match_the_devices_and_the_marks():
    xs.set_num_devices(4)
    with pytest.raises(xs.ShardingError, match=r"has 8 device\(s\) but there are 4"):
        xs.use_spmd(auto=True, mesh=xs.Mesh(np.arange(8), (4, 2), ("x", "y")))
    with pytest.raises(xs.ShardingError, match="expected a frameworks.torch.sharding.Mesh"):
        xs.use_spmd(auto=True, mesh=(4,))
    xs.set_num_devices(None)
    model, x = MLP(), torch.randn(16, 256)
    xs.mark_sharding(x, xs.Mesh(np.arange(8), (2, 4), ("data", "model")), ("data", None))
    xs.use_spmd(auto=True, mesh=_mesh(), hardware=HW)
    with pytest.raises(xs.ShardingError, match="but auto-sharding runs on Mesh"):
        torch.compile(model, backend=openhlo_backend)(x)


def test_bad_and_unmeetable_memory_limits_are_refused():
    with pytest.raises(xs.ShardingError, match="use_spmd: memory limit '2 apples'"):
        xs.use_spmd(auto=True, mesh=_mesh(), memory_limit="2 apples")
    xs.use_spmd(auto=True, mesh=_mesh(), hardware=HW, memory_limit="1KiB")
    with pytest.raises(xs.ShardingError, match=r"auto-sharding inference_\d+: memory limit"):
        with torch.no_grad():
            torch.compile(MLP(), backend=openhlo_backend)(torch.randn(16, 256))


def test_a_solver_out_of_time_is_logged_and_the_greedy_plan_still_computes(caplog):
    model, x = MLP(), torch.randn(16, 256)
    xs.use_spmd(auto=True, mesh=_mesh(), hardware=HW, time_limit_s=1e-6)
    with caplog.at_level(logging.WARNING, logger="openhlo.torch"), torch.no_grad():
        got = torch.compile(model, backend=openhlo_backend)(x)
        want = model(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    (message,) = records(caplog, "time limit: greedy fallback; the plan is the greedy one")
    assert message.startswith("openhlo: auto-sharding inference_")
