"""The hand-written protobuf codec against jaxlib's own CompileOptions/DeviceAssignment."""
import numpy as np
import pytest

from pjrt.c_api.protos import (decode_compile_options, decode_device_assignment,
                               encode_device_assignment)

xc = pytest.importorskip("jax._src.lib").xla_client


def test_compile_options_from_jaxlib():
    options = xc.CompileOptions()
    build = options.executable_build_options
    build.num_replicas, build.num_partitions = 2, 3
    build.use_spmd_partitioning = True
    build.device_assignment = xc.DeviceAssignment.create(np.array([[5, 4, 3], [2, 1, 0]]))
    decoded = decode_compile_options(options.SerializeAsString())
    assert (decoded.num_replicas, decoded.num_partitions) == (2, 3)
    assert decoded.use_spmd_partitioning
    assert decoded.device_assignment == [[5, 4, 3], [2, 1, 0]]


def test_default_compile_options():
    decoded = decode_compile_options(xc.CompileOptions().SerializeAsString())
    assert (decoded.num_replicas, decoded.num_partitions, decoded.device_assignment) == (1, 1, None)
    assert decoded.env_option_overrides == {}


def test_env_option_overrides_from_jaxlib_sorted_by_name():
    # what jax.jit(f).lower(x).compile(compiler_options={...}) sends
    options = xc.CompileOptions()
    options.env_option_overrides = [("opt_level", 0), ("autocast", "bf16"),
                                    ("autocast_force", True), ("scale", -2.5)]
    decoded = decode_compile_options(options.SerializeAsString())
    assert list(decoded.env_option_overrides.items()) == [
        ("autocast", "bf16"), ("autocast_force", True), ("opt_level", 0), ("scale", -2.5)]


def test_device_assignment_round_trip_through_jaxlib():
    ids = [[0, 1], [2, 3], [4, 5]]
    ours = encode_device_assignment(ids)
    theirs = xc.DeviceAssignment.create(np.array(ids)).serialize()
    assert decode_device_assignment(theirs) == ids
    assert decode_device_assignment(ours) == ids
    assert ours == theirs
