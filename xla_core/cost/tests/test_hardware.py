"""The hardware registry: built-ins, vendor entries, lazy strings, errors; the matmul curve;
descriptions as JSON files and ``OPENHLO_HARDWARE``."""
import dataclasses
import json
import math

import pytest

from stablehlo.registry import RegistryError
from xla_core.cost import HARDWARE, HardwareDescription, hardware, register_hardware

# the package re-exports the function hardware(), which shadows the submodule's name
from xla_core.cost.hardware import GENERIC_CPU, HARDWARE_ENV, HardwareFileError

VENDOR_CHIP = HardwareDescription("vendor-npu", peak_flops=4e14, memory_bandwidth=2e12,
                                  cores=128, step_overhead=5e-6)


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made in a test vanish afterwards."""
    monkeypatch.setattr(HARDWARE, "_entries", dict(HARDWARE._entries))


def test_generic_cpu_is_fixed():
    hw = hardware("generic-cpu")
    assert hw.name == "generic-cpu" and hw.cores == 4
    assert hw.machine_balance == hw.peak_flops / hw.memory_bandwidth
    assert hw.cache_key() == hardware("generic-cpu").cache_key()


def test_builtins_are_listed():
    assert {"cpu", "generic-cpu"} <= set(HARDWARE.names())


def test_vendor_description_and_factory(scratch_registry):
    register_hardware("vendor-npu", VENDOR_CHIP)
    assert hardware("vendor-npu") is VENDOR_CHIP
    calls = []

    def build():
        calls.append(1)
        return HardwareDescription("vendor-gpu", 1e14, 1e12, 64)

    register_hardware("vendor-gpu", build)
    assert calls == []  # a factory runs only when asked for
    assert hardware("vendor-gpu").peak_flops == 1e14 and calls == [1]


def test_duplicate_name_is_an_error(scratch_registry):
    register_hardware("vendor-npu", VENDOR_CHIP)
    with pytest.raises(RegistryError, match="already registered"):
        register_hardware("vendor-npu", VENDOR_CHIP)
    faster = HardwareDescription("vendor-npu", 8e14, 2e12, 128)
    register_hardware("vendor-npu", faster, override=True)
    assert hardware("vendor-npu") is faster


def test_unknown_name_lists_known():
    with pytest.raises(RegistryError, match=r"unknown hardware description 'tpu-v9'.*"
                                            r"known: .*cpu, generic-cpu"):
        hardware("tpu-v9")


def test_lazy_module_attr_string(scratch_registry):
    register_hardware("lazy-generic", "xla_core.cost.hardware:GENERIC_CPU")
    assert hardware("lazy-generic") is GENERIC_CPU
    register_hardware("lazy-broken", "xla_core.cost.no_such_module:X")
    with pytest.raises(RegistryError, match="lazy-broken.*failed to load"):
        hardware("lazy-broken")


def test_bad_entries_are_refused(scratch_registry):
    with pytest.raises(RegistryError, match="registered as"):
        register_hardware("other-name", VENDOR_CHIP)
    with pytest.raises(RegistryError, match="expected"):
        register_hardware("number", 42)
    register_hardware("bad-factory", lambda: "not a description")
    with pytest.raises(RegistryError, match="returned str"):
        hardware("bad-factory")


def test_description_validates_numbers():
    with pytest.raises(ValueError, match="positive"):
        HardwareDescription("zero", peak_flops=0, memory_bandwidth=1, cores=1)


def test_core_sharing_is_devices_over_cores_when_they_outnumber_them():
    two_cores = HardwareDescription("two", peak_flops=1e9, memory_bandwidth=1e9, cores=2)
    assert two_cores.devices_per_host == 1 and two_cores.core_sharing == 1.0
    assert two_cores.shared_by(2).core_sharing == 1.0   # a core each
    assert two_cores.shared_by(3).core_sharing == 1.5
    assert two_cores.shared_by(8).core_sharing == 4.0
    assert GENERIC_CPU.shared_by(8).core_sharing == 2.0  # 4 cores


def test_shared_by_changes_only_the_device_count():
    shared = GENERIC_CPU.shared_by(8)
    assert shared.devices_per_host == 8
    assert shared.peak_flops == GENERIC_CPU.peak_flops and shared.cores == GENERIC_CPU.cores
    assert shared.cache_key() != GENERIC_CPU.cache_key()
    with pytest.raises(ValueError, match="devices_per_host"):
        GENERIC_CPU.shared_by(0)


def test_a_kernel_gets_its_share_of_the_hosts_flops_and_of_a_core_for_copies():
    from xla_core.cost.estimates import Cost, roofline_seconds
    overhead = GENERIC_CPU.step_overhead     # 50 GFLOP/s for the host, 10 GB/s, 4 cores
    dot = Cost(flops=1e9, bytes_read=0, bytes_written=0, transcendentals=0)
    copy = Cost(flops=0, bytes_read=5e8, bytes_written=5e8, transcendentals=0)
    assert roofline_seconds(dot, GENERIC_CPU) == pytest.approx(0.02 + overhead)
    # 8 devices computing at once split the host's rate: 8x; their copies, 2 per core: 2x
    assert roofline_seconds(dot, GENERIC_CPU.shared_by(8)) == pytest.approx(0.16 + overhead)
    assert roofline_seconds(copy, GENERIC_CPU) == pytest.approx(0.1 + overhead)
    assert roofline_seconds(copy, GENERIC_CPU.shared_by(8)) == pytest.approx(0.2 + overhead)
    assert roofline_seconds(copy, GENERIC_CPU.shared_by(4)) == pytest.approx(0.1 + overhead)


# ---- matmul curve --------------------------------------------------------------------------

# 1e6-flop products reach 1 GFLOP/s, 1e10-flop ones 50 GFLOP/s (GENERIC_CPU's peak).
CURVED = dataclasses.replace(GENERIC_CPU, name="curved", matmul_curve=((1e6, 1e9),
                                                                       (1e10, 50e9)))


def test_matmul_rate_interpolates_in_log_space_and_clamps():
    assert CURVED.matmul_rate(1e6) == pytest.approx(1e9)
    assert CURVED.matmul_rate(1e10) == pytest.approx(50e9)
    # halfway in log(flops) is halfway in log(rate): the geometric mean
    assert CURVED.matmul_rate(1e8) == pytest.approx(math.sqrt(1e9 * 50e9))
    assert CURVED.matmul_rate(10.0) == 1e9 and CURVED.matmul_rate(1e14) == 50e9
    assert GENERIC_CPU.matmul_rate(1e3) == GENERIC_CPU.peak_flops  # no curve: the peak


def test_device_matmul_rate_is_its_size_rate_within_its_share_of_the_peak():
    # 4 cores, 2 devices: a small product keeps its rate, a large one gets half the peak
    two = CURVED.shared_by(2)
    assert two.device_matmul_rate(1e6) == pytest.approx(1e9)
    assert two.device_matmul_rate(1e10) == pytest.approx(25e9)
    # 8 devices on 4 cores: two per core halves the small one's rate
    assert CURVED.shared_by(8).device_matmul_rate(1e6) == pytest.approx(0.5e9)


def test_roofline_costs_products_at_their_size_rate():
    from xla_core.cost.estimates import Cost, roofline_seconds
    small_dot = Cost(flops=1e6, matmul_flops=1e6)
    overhead = GENERIC_CPU.step_overhead
    assert roofline_seconds(small_dot, CURVED) == pytest.approx(1e-3 + overhead)
    assert roofline_seconds(small_dot, GENERIC_CPU) == pytest.approx(1e6 / 50e9 + overhead)
    # a fusion holding the dot and 1e6 elementwise flops: those at the peak
    fused = Cost(flops=2e6, matmul_flops=1e6)
    assert roofline_seconds(fused, CURVED) == pytest.approx(1e-3 + 1e6 / 50e9 + overhead)


def test_dots_and_convolutions_count_their_flops_as_matmul_flops():
    from stablehlo.text import parse_module
    from xla_core.cost.estimates import op_cost
    module = parse_module("""
func.func @main(%a: tensor<4x8xf32>, %b: tensor<8x2xf32>) -> tensor<4x2xf32> {
  %d = stablehlo.dot_general %a, %b, contracting_dims = [1] x [0] : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  %e = stablehlo.exponential %d : tensor<4x2xf32>
  return %e : tensor<4x2xf32>
}""")
    dot, exp = list(module.lookup("main").body.operations)[:2]
    assert op_cost(dot).matmul_flops == op_cost(dot).flops == 2 * 4 * 2 * 8
    assert op_cost(exp).matmul_flops == 0


def test_curve_must_be_positive_and_increasing():
    for curve in (((1e6, 0.0),), ((1e6, 1e9), (1e6, 2e9)), ((1e8, 1e9), (1e6, 2e9))):
        with pytest.raises(ValueError, match="matmul_curve"):
            dataclasses.replace(GENERIC_CPU, matmul_curve=curve)


# ---- descriptions as data ------------------------------------------------------------------

FULL = dataclasses.replace(
    CURVED, name="vendor-box", devices_per_host=2, l3_cache_bytes=None,
    axis_links=(("x", 5e-6, 20e9), ("y", 50e-6, 2e9)), network_latency=1e-4)


def test_json_round_trip_keeps_every_field():
    text = FULL.to_json({"measured_at": "2026-01-01", "by": "test"})
    data = json.loads(text)
    assert set(data) == {f.name for f in dataclasses.fields(HardwareDescription)} | {
        "format_version", "measurement"}
    back = HardwareDescription.from_json(text)
    assert back == FULL and back.cache_key() == FULL.cache_key()
    assert back.collective_link("y") == (50e-6, 2e9)


def test_hardware_reads_a_json_file(tmp_path):
    path = tmp_path / "vendor.json"
    path.write_text(FULL.to_json())
    assert hardware(str(path)) == FULL
    # only the four required fields: the rest take their defaults
    minimal = tmp_path / "minimal.json"
    minimal.write_text(json.dumps({"name": "m", "peak_flops": 1e12, "memory_bandwidth": 1e11,
                                   "cores": 8}))
    assert hardware(str(minimal)) == HardwareDescription("m", 1e12, 1e11, 8)


@pytest.mark.parametrize("content, message", [
    ("{not json", r"not JSON"),
    ("[1, 2]", r"expected a JSON object"),
    ('{"name": "m", "peak_flops": 1, "memory_bandwidth": 1}', r"missing required field\(s\) cores"),
    ('{"name": "m", "peak_flops": 1, "memory_bandwidth": 1, "cores": 1, "peak_flop": 2}',
     r"unknown field\(s\) peak_flop"),
    ('{"name": "m", "peak_flops": "fast", "memory_bandwidth": 1, "cores": 1}',
     r"field 'peak_flops' must be a finite number"),
    ('{"name": "m", "peak_flops": 1, "memory_bandwidth": 1, "cores": 1.5}',
     r"field 'cores' must be an integer"),
    ('{"name": "m", "peak_flops": 1, "memory_bandwidth": 1, "cores": 1, '
     '"axis_links": [["x", 1e-5]]}', r"field 'axis_links' must be a list of \[axis, latency"),
    ('{"name": "m", "peak_flops": 1, "memory_bandwidth": 1, "cores": 1, '
     '"matmul_curve": [[1e6, "x"]]}', r"field 'matmul_curve' must be a finite number"),
    ('{"name": "m", "peak_flops": -1, "memory_bandwidth": 1, "cores": 1}', r"must be positive"),
    ('{"format_version": 9, "name": "m"}', r"format_version 9"),
])
def test_malformed_file_names_the_file_and_field(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(HardwareFileError, match=message) as info:
        hardware(str(path))
    assert str(info.value).startswith(str(path))


def test_missing_file_is_named(tmp_path):
    path = tmp_path / "nowhere.json"
    with pytest.raises(HardwareFileError, match=f"{path}: cannot read"):
        hardware(str(path))


def test_openhlo_hardware_replaces_cpu(tmp_path, monkeypatch):
    path = tmp_path / "vendor.json"
    path.write_text(FULL.to_json())
    monkeypatch.setenv(HARDWARE_ENV, str(path))
    assert hardware("cpu") == FULL
    assert hardware("generic-cpu") is GENERIC_CPU  # other names are left alone
    monkeypatch.setenv(HARDWARE_ENV, "generic-cpu")
    assert hardware("cpu") is GENERIC_CPU
    monkeypatch.setenv(HARDWARE_ENV, "tpu-v9")
    with pytest.raises(RegistryError, match=r"OPENHLO_HARDWARE=tpu-v9: unknown hardware"):
        hardware("cpu")


def test_fusion_and_scheduler_cost_with_what_openhlo_hardware_names(tmp_path, monkeypatch):
    """The passes that default to "cpu" get the file's description (their cost models are
    built from it: recorded as they are constructed)."""
    import stablehlo
    from xla_core.fusion import priority
    from xla_core.passes import PassContext, parse_pass_list
    from xla_core.scheduling import estimator
    seen = []
    for cls in (priority.CostCache, estimator.CostModelEstimator):
        def recording(self, hw, *args, _init=cls.__init__, **kwargs):
            seen.append(hw)
            _init(self, hw, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", recording)
    path = tmp_path / "vendor.json"
    path.write_text(FULL.to_json())
    monkeypatch.setenv(HARDWARE_ENV, str(path))
    t = "tensor<8x8xf32>"
    module = stablehlo.parse(f"""func.func @main(%x: {t}) -> {t} {{
  %a = "stablehlo.all_reduce"(%x) ({{
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }}) {{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}} : ({t}) -> {t}
  %e = stablehlo.exponential %a : {t}
  %n = stablehlo.negate %e : {t}
  return %n : {t}
}}""")
    for p in parse_pass_list("fusion,async-collective-creator,latency-hiding-scheduler"):
        p.run(module, PassContext())
    assert seen == [FULL, FULL]

