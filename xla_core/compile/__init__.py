"""The compile driver and what the runtime needs from the compiler (see driver.py).

``compile_module`` takes a verified Module through the whole-program checks, SPMD
partitioning, the backend's pipeline and its code generation; ``load_compiled`` finds text
compiled before without parsing it; ``cache_key`` (fingerprint.py) is the one key of every
persistent compilation cache. ``entry_shardings`` gives the tile assignments of a compiled
entry's arguments and results. Partitioning raises ``ShardingError`` (a bad sharding) and
``SpmdUnsupportedError`` (machinery not built yet), re-exported here for backends to map.
"""
from xla_core.compile.driver import (Backend, Compiled, CompileRequest, compile_module,
                                     load_compiled, partition)
from xla_core.compile.fingerprint import cache_key, module_fingerprint
from xla_core.spmd.sharding import ShardingError, SpmdUnsupportedError, entry_shardings

__all__ = ["Backend", "CompileRequest", "Compiled", "ShardingError", "SpmdUnsupportedError",
           "cache_key", "compile_module", "entry_shardings", "load_compiled",
           "module_fingerprint", "partition"]
