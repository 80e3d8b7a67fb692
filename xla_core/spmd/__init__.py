"""SPMD: sharding annotations and the lowering of sharded programs to per-device programs.

``sharding`` reads and writes the two spellings JAX emits (Shardy ``#sdy`` attributes and
``mhlo.sharding`` strings) into one model: a ``Mesh`` of named axes and a ``TensorSharding``
saying which mesh axes split each dimension. ``manual`` is the pass for programs whose work is
all inside fully manual ``sdy.manual_computation``s (``shard_map``, ``pmap``): they need no
propagation, only their bodies made the entry function. The other sharded programs go through
``propagation`` (pass ``sharding-propagation``: a sharding for every value, with its origin) and
``partitioner`` (pass ``spmd-partition``: local shapes and collectives; ``reshard`` plans the
collectives between layouts).
"""
from xla_core.spmd.sharding import (Mesh, ShardingError, SpmdUnsupportedError, TensorSharding,
                                    entry_shardings, module_meshes, parse_mhlo_sharding,
                                    parse_sdy_mesh, parse_sdy_sharding)

__all__ = ["Mesh", "ShardingError", "SpmdUnsupportedError", "TensorSharding", "entry_shardings",
           "module_meshes", "parse_mhlo_sharding", "parse_sdy_mesh", "parse_sdy_sharding"]
