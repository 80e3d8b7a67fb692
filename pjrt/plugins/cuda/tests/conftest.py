"""Fixtures of the cuda backend's CPU tests: the fake driver, built once per session."""
import pytest

from pjrt.plugins.cuda.tests.fake_cuda import FakeCuda, build_fake


@pytest.fixture(scope="session")
def fake_cuda_library(tmp_path_factory) -> str:
    return build_fake(tmp_path_factory.mktemp("fake_cuda"))


@pytest.fixture
def fake_cuda(fake_cuda_library, monkeypatch) -> FakeCuda:
    """The fake as this process's CUDA driver and cuBLAS, with an empty log."""
    monkeypatch.setenv("OPENHLO_CUDA_DRIVER", fake_cuda_library)
    monkeypatch.setenv("OPENHLO_CUBLAS", fake_cuda_library)
    fake = FakeCuda(fake_cuda_library)
    fake.reset()
    yield fake
    fake.reset()


@pytest.fixture
def cuda_device(fake_cuda):
    """A runtime device on the fake driver."""
    from pjrt.plugins.cuda import runtime
    driver = runtime.open_driver()
    return runtime.native().Device(driver, 0, runtime.cublas_path())
