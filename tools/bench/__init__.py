"""``openhlo bench``: ML workloads on openhlo, XLA (jax.jit), PyTorch eager and TorchInductor.

Modules: ``workloads`` (each workload in JAX and in PyTorch), ``runners`` (the four
runners and their compilation caches), ``timing`` (timing loops, shared with
``bench-runtime``), ``suite`` (checking, timing, compile times), ``cached`` (the second
process for cached compile times), ``report`` (ratios, summary, table), ``plot`` (the PNG),
``command`` (the CLI).
"""
