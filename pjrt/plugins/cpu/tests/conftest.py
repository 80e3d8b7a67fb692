"""These tests check generated kernels right after compiling, so compiles wait for the C++
compiler here; test_tiering.py turns background compilation back on where it tests it."""
import pytest


@pytest.fixture(autouse=True)
def _synchronous_codegen(monkeypatch):
    monkeypatch.setenv("OPENHLO_CPU_ASYNC_CODEGEN", "0")
