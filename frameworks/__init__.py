"""Adapters that bring JAX and PyTorch programs to OpenHLO (see frameworks/README.md).

Nothing is exported yet; ``jax`` and ``torch`` will be imported lazily by the
submodules that need them, never at package import.
"""
