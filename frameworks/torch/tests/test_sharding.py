"""PyTorch/XLA-style SPMD sharding (mesh + mark_sharding) under torch.compile(openhlo): sharded
programs on 8 virtual cpu devices give the unsharded eager results, with the collectives the
Megatron and data-parallel layouts call for; bad shardings are refused before anything runs."""
import copy

import numpy as np
import pytest
import torch

from frameworks.torch import sharding as xs
from frameworks.torch.backend import openhlo_backend
from xla_core.spmd.summary import collectives


def _collectives(module) -> list:
    return [kind for kind, _, _ in collectives(module)]


class MLP(torch.nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=16):
        super().__init__()
        self.fc1 = torch.nn.Linear(d_in, hidden)
        self.fc2 = torch.nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def _megatron(model, mesh):
    """Column-parallel fc1 (its weight is [out, in]: rows here are the matmul's columns),
    row-parallel fc2."""
    xs.mark_sharding(model.fc1.weight, mesh, ("model", None))
    xs.mark_sharding(model.fc1.bias, mesh, ("model",))
    xs.mark_sharding(model.fc2.weight, mesh, (None, "model"))


def _new_programs(before: int) -> dict:
    return {name: exe for name, exe in xs.compiled_programs()[before:]}


def _train_like_eager(model, ref, x, target) -> dict:
    """Two compiled SGD steps of ``model`` against two eager ones of its copy ``ref``: losses
    and updated parameters must agree. Returns the programs the compiled steps built."""
    before = len(xs.compiled_programs())
    got = _train(model, x, target, steps=2)
    want = _train(ref, x, target, steps=2, compiled=False)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-5, msg=name)
    return _new_programs(before)


def _train(model, x, target, steps, compiled=True, lr=0.1):
    """SGD steps; the loss is computed inside the compiled function (one forward and one
    backward graph per step)."""
    def loss_fn(x, target):
        return torch.nn.functional.mse_loss(model(x), target)
    run = torch.compile(loss_fn, backend=openhlo_backend) if compiled else loss_fn
    losses = []
    for _ in range(steps):
        loss = run(x, target)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p.sub_(lr * p.grad)  # in place: the parameters keep their storage
        losses.append(loss.item())
    return losses


@pytest.fixture(autouse=True)
def _fresh():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    xs.set_num_devices(None)


def test_megatron_mlp_forward_matches_eager_with_one_all_reduce():
    model, x = MLP(), torch.randn(8, 32)
    with torch.no_grad():
        want = model(x)
    mesh = xs.Mesh(np.arange(8), (1, 8), ("data", "model"))
    _megatron(model, mesh)
    before = len(xs.compiled_programs())
    with torch.no_grad():
        got = torch.compile(model, backend=openhlo_backend)(x)
    assert isinstance(got, torch.Tensor) and got.shape == (8, 16)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    programs = _new_programs(before)
    assert len(programs) == 1
    (exe,) = programs.values()
    assert exe.num_partitions == 8
    assert _collectives(exe.executable.module) == ["all-reduce"]


def test_megatron_mlp_training_step_matches_eager():
    model, x, target = MLP(), torch.randn(8, 32), torch.randn(8, 16)
    ref = copy.deepcopy(model)
    mesh = xs.Mesh(np.arange(8), (1, 8), ("data", "model"))
    _megatron(model, mesh)
    programs = _train_like_eager(model, ref, x, target)
    assert {name.split("_")[0] for name in programs} == {"forward", "backward"}
    for name, exe in programs.items():
        assert exe.num_partitions == 8
        # forward: the row-parallel partial sums; backward: every weight gradient is computed
        # where its shard lives (x needs no gradient), so nothing moves
        want = ["all-reduce"] if name.startswith("forward") else []
        assert _collectives(exe.executable.module) == want, name


def test_data_parallel_training_step_matches_eager():
    model, x, target = MLP(), torch.randn(16, 32), torch.randn(16, 16)
    ref = copy.deepcopy(model)
    mesh = xs.Mesh(np.arange(8), (8,), ("data",))
    xs.mark_sharding(x, mesh, ("data", None))
    xs.mark_sharding(target, mesh, ("data", None))
    programs = _train_like_eager(model, ref, x, target)
    assert {name.split("_")[0] for name in programs} == {"forward", "backward"}
    for name, exe in programs.items():
        assert exe.num_partitions == 8
        # forward: the mean loss over the split batch; backward: each of the 4 parameter
        # gradients is a sum over the split batch, the 4 combined into one all-reduce
        want = ["all-reduce"]
        assert _collectives(exe.executable.module) == want, name


def test_2d_mesh_megatron_with_data_parallel_batch():
    model, x = MLP(), torch.randn(8, 32)
    with torch.no_grad():
        want = model(x)
    mesh = xs.Mesh(np.arange(8), (2, 4), ("data", "model"))
    _megatron(model, mesh)
    xs.mark_sharding(x, mesh, (0, None))  # an axis index names "data"
    before = len(xs.compiled_programs())
    with torch.no_grad():
        got = torch.compile(model, backend=openhlo_backend)(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    (exe,) = _new_programs(before).values()
    assert exe.num_partitions == 8
    assert _collectives(exe.executable.module) == ["all-reduce"]  # over "model" only


def test_2d_mesh_training_step_matches_eager():
    model, x, target = MLP(), torch.randn(16, 32), torch.randn(16, 16)
    ref = copy.deepcopy(model)
    mesh = xs.Mesh(np.arange(8), (2, 4), ("data", "model"))
    _megatron(model, mesh)
    xs.mark_sharding(x, mesh, ("data", None))
    xs.mark_sharding(target, mesh, ("data", None))
    programs = _train_like_eager(model, ref, x, target)
    for name, exe in programs.items():
        # forward: fc2's partial sums over "model", the loss over "data" (other groups: not
        # combined); backward: the 4 gradients summed over "data", combined into one
        want = ["all-reduce"] * (2 if name.startswith("forward") else 1)
        assert _collectives(exe.executable.module) == want, name


def test_clear_sharding_goes_back_to_one_device():
    model, x = MLP(), torch.randn(8, 32)
    mesh = xs.Mesh(np.arange(8), (1, 8), ("data", "model"))
    _megatron(model, mesh)
    assert xs.get_sharding(model.fc1.weight).dims == (("model",), ())
    for p in (model.fc1.weight, model.fc1.bias, model.fc2.weight):
        xs.clear_sharding(p)
    assert xs.get_sharding(model.fc1.weight) is None
    before = len(xs.compiled_programs())
    with torch.no_grad():
        torch.testing.assert_close(torch.compile(model, backend=openhlo_backend)(x), model(x))
    assert not _new_programs(before)


def test_mesh_and_spec_forms():
    mesh = xs.Mesh(np.arange(8).reshape(2, 4), (2, 4), ("a", "b"))
    assert mesh.size() == 8 and list(mesh.shape().items()) == [("a", 2), ("b", 4)]
    assert mesh.get_logical_mesh().tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert mesh.get_axis_name_idx("b") == 1
    t = torch.zeros(8, 4)
    assert xs.mark_sharding(t, mesh, (("a", "b"), None)) is t
    assert xs.get_sharding(t).dims == (("a", "b"), ())
    xs.mark_sharding(t, mesh, (1, 0))
    assert xs.get_sharding(t).dims == (("b",), ("a",))
    assert xs.Mesh([3, 1, 0, 2], (4,)).axis_names == ("axis_0",)


@pytest.mark.parametrize("spec, message", [
    (("model", None), "3 pieces"),  # 8 rows over the 3 devices of "model"
    (("nope", None), "unknown mesh axis 'nope'"),
    ((5, None), "index 5 is out of range"),
    (("model",), "rank 2"),
    (("model", "model"), "more than once"),
])
def test_bad_shardings_raise_at_mark_sharding(spec, message):
    mesh = xs.Mesh(np.arange(6), (2, 3), ("data", "model"))
    t = torch.zeros(8, 6)
    with pytest.raises(xs.ShardingError, match=message):
        xs.mark_sharding(t, mesh, spec)
    assert xs.get_sharding(t) is None


def test_bad_meshes_raise():
    with pytest.raises(xs.ShardingError, match="holds 8 device"):
        xs.Mesh(np.arange(6), (2, 4), ("a", "b"))
    with pytest.raises(xs.ShardingError, match="not unique"):
        xs.Mesh(np.arange(4), (2, 2), ("a", "a"))
    with pytest.raises(xs.ShardingError, match="0..3"):
        xs.Mesh([0, 1, 2, 5], (4,))
    xs.set_num_devices(4)
    with pytest.raises(xs.ShardingError, match="8 device.*there are 4"):
        xs.Mesh(np.arange(8), (8,), ("x",))
    xs.Mesh(np.arange(4), (4,), ("x",))


def test_env_sets_the_device_count(monkeypatch):
    monkeypatch.setenv("OPENHLO_TORCH_NUM_DEVICES", "2")
    with pytest.raises(xs.ShardingError, match="there are 2"):
        xs.Mesh(np.arange(8), (8,), ("x",))
    assert xs.get_1d_mesh("x").size() == 2


def test_marking_after_compiling_makes_a_new_plan(caplog):
    model, x = MLP(), torch.randn(8, 32)
    compiled = torch.compile(model, backend=openhlo_backend)
    with torch.no_grad():
        want = compiled(x)  # one device
        mesh = xs.Mesh(np.arange(8), (8,), ("model",))
        xs.mark_sharding(model.fc2.weight, mesh, (None, "model"))
        before = len(xs.compiled_programs())
        with caplog.at_level("INFO", logger="openhlo.torch"):
            got = compiled(x)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert len(_new_programs(before)) == 1
    assert 'sharding replicated -> [{}, {"model"}]' in caplog.text


def test_propagated_result_shardings_are_recorded():
    """A sharded program's results keep their propagated layout (the backward graph finds the
    activations it saved): here the batch-split input gives a batch-split output."""
    x = torch.randn(16, 8)
    mesh = xs.Mesh(np.arange(8), (8,), ("data",))
    xs.mark_sharding(x, mesh, ("data", None))
    y = torch.compile(lambda a: torch.sin(a) * 2, backend=openhlo_backend)(x)
    torch.testing.assert_close(y, torch.sin(x) * 2)
    assert xs.get_sharding(y).dims == (("data",), ())


def test_two_meshes_in_one_graph_are_refused_before_running():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    xs.mark_sharding(a, xs.Mesh(np.arange(8), (8,), ("x",)), ("x", None))
    xs.mark_sharding(b, xs.Mesh(np.arange(8), (2, 4), ("p", "q")), ("p", None))
    with pytest.raises(xs.ShardingError, match="different meshes"):
        torch.compile(lambda a, b: a + b, backend=openhlo_backend)(a, b)


def test_device_count_changed_after_marking_is_refused_before_running():
    x = torch.randn(16, 8)
    xs.mark_sharding(x, xs.Mesh(np.arange(8), (8,), ("data",)), ("data", None))
    xs.set_num_devices(4)
    with pytest.raises(xs.ShardingError, match="mesh of 8 device.*there are 4"):
        torch.compile(lambda a: a * 3, backend=openhlo_backend)(x)


def test_mark_sharding_inside_the_compiled_function_splits_the_graph():
    """Dynamo breaks the graph at mark_sharding and runs it on the real intermediate tensor:
    the graph after the break takes that tensor sharded."""
    mesh = xs.Mesh(np.arange(8), (8,), ("data",))

    def f(x):
        y = torch.sin(x)
        xs.mark_sharding(y, mesh, ("data", None))
        return y * 2
    x = torch.randn(16, 4)
    before = len(xs.compiled_programs())
    torch.testing.assert_close(torch.compile(f, backend=openhlo_backend)(x), f(x))
    (exe,) = _new_programs(before).values()
    assert exe.num_partitions == 8
