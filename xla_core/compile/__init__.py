"""The compile driver and what the runtime needs from the compiler (see driver.py).

``compile_module`` takes a verified Module through the whole-program checks, SPMD
partitioning, the backend's pipeline and its code generation; ``load_compiled`` finds text
compiled before without parsing it; ``cache_key`` (fingerprint.py) is the one key of every
persistent compilation cache. layout.py holds the shardings of a compiled entry and the
split/assembly of global arrays. Partitioning raises ``ShardingError`` (a bad sharding) and
``SpmdUnsupportedError`` (machinery not built yet), re-exported here for the runtime to map.
"""
from xla_core.compile.driver import (Backend, Compiled, CompileRequest, compile_module,
                                     load_compiled, partition)
from xla_core.compile.fingerprint import cache_key, module_fingerprint
from xla_core.compile.layout import (assemble_global, entry_shardings, global_shape,
                                     split_global)
from xla_core.spmd.sharding import ShardingError, SpmdUnsupportedError

__all__ = ["Backend", "CompileRequest", "Compiled", "ShardingError", "SpmdUnsupportedError",
           "assemble_global", "cache_key", "compile_module", "entry_shardings",
           "global_shape", "load_compiled", "module_fingerprint", "partition", "split_global"]
