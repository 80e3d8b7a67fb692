"""The hardware registry: built-ins, vendor entries, lazy strings, errors."""
import pytest

from stablehlo.registry import RegistryError
from xla_core.cost import HARDWARE, HardwareDescription, hardware, register_hardware

# the package re-exports the function hardware(), which shadows the submodule's name
from xla_core.cost.hardware import GENERIC_CPU

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
