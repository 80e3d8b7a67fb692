"""JAX on OpenHLO: the ``openhlo`` PJRT plugin (``JAX_PLATFORMS=openhlo``), see README.md."""
