"""Auto-sharding: choose the shardings of an unannotated (or partly annotated) program on a
mesh so that its estimated step time is lowest under a per-device memory limit, and write
them as the annotations sharding-propagation and spmd-partition turn into the per-device
program (pass ``auto-sharding``).

    plan = auto_shard(module, "x=4,y=2", memory_limit="2GiB", hardware="generic-cpu")
    print("\\n".join(plan.explain()))
    apply_plan(module, plan)

``layouts`` (the shardings of a value), ``strategies`` (the ways each op runs over the
mesh), ``costs`` (their seconds from the per-hardware cost model), ``graph`` (the cost graph:
followers merged, scalar broadcasts copied per user, edges, liveness), ``prune`` (choices
never better than another dropped), ``solver`` (the integer program, HiGHS through scipy:
its LP relaxation first, with a time limit and a greedy fallback), ``plan`` (the result and
its explanation), ``auto_shard`` (the entry point and the pass).
"""
from xla_core.spmd.auto_sharding.auto_shard import (DEFAULT_TIME_LIMIT_S, AutoShardingPass,
                                                    apply_plan, auto_shard)
from xla_core.spmd.auto_sharding.layouts import AutoShardingError, parse_bytes, parse_mesh
from xla_core.spmd.auto_sharding.plan import OpChoice, Plan

__all__ = ["DEFAULT_TIME_LIMIT_S", "AutoShardingError", "AutoShardingPass", "OpChoice", "Plan",
           "apply_plan", "auto_shard", "parse_bytes", "parse_mesh"]
