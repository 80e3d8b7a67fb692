"""Pass registry entries: every pass shipped with xla_core, by CLI name.

Entries are lazy ``"module:Class"`` strings so that importing the registry
does not import every pass.
"""
from xla_core.passes.base import (PASSES, PIPELINES, Pass, PassContext, PassError, PassRecord,
                                  Pipeline, make_pass, make_pipeline, parse_pass_list)

PASSES.register("inline", "xla_core.passes.inline:InlinePass")
PASSES.register("dce", "xla_core.passes.dce:DcePass")
PASSES.register("cse", "xla_core.passes.cse:CsePass")
PASSES.register("constant-fold", "xla_core.passes.constant_fold:ConstantFoldPass")
PASSES.register("algebraic-simplifier",
                "xla_core.passes.algebraic_simplifier:AlgebraicSimplifierPass")
PASSES.register("memory-schedule", "xla_core.buffers.scheduler:MemorySchedulePass")
PASSES.register("remat", "xla_core.buffers.remat:RematerializationPass")
PASSES.register("latency-hiding-scheduler",
                "xla_core.scheduling.scheduler:LatencyHidingSchedulerPass")
PASSES.register("canonicalize", "xla_core.passes.canonicalize:CanonicalizePass")
PASSES.register("transpose-folding", "xla_core.passes.transpose_folding:TransposeFoldingPass")
PASSES.register("prune-argreduce-index",
                "xla_core.passes.prune_argreduce_index:PruneArgreduceIndexPass")
PASSES.register("fusion", "xla_core.fusion.fuse:FusionPass")
PASSES.register("fuse-attention", "xla_core.passes.fuse_attention_pass:FuseAttentionPass")
PASSES.register("spmd-manual", "xla_core.spmd.manual:ManualPartitionPass")
PASSES.register("sharding-propagation", "xla_core.spmd.propagation:ShardingPropagationPass")
PASSES.register("spmd-partition", "xla_core.spmd.partitioner:SpmdPartitionPass")
PASSES.register("auto-sharding", "xla_core.spmd.auto_sharding.auto_shard:AutoShardingPass")
PASSES.register("collective-pipeliner",
                "xla_core.spmd.collective_pipeliner:CollectivePipelinerPass")
PASSES.register("all-reduce-combiner", "xla_core.spmd.combiner:AllReduceCombinerPass")
PASSES.register("all-gather-combiner", "xla_core.spmd.combiner:AllGatherCombinerPass")
PASSES.register("reduce-scatter-combiner", "xla_core.spmd.combiner:ReduceScatterCombinerPass")
PASSES.register("async-collective-creator",
                "xla_core.spmd.async_collectives:AsyncCollectiveCreatorPass")
PASSES.register("convert-async-to-sync", "xla_core.spmd.async_collectives:ConvertAsyncToSyncPass")
PASSES.register("quant-lower", "xla_core.quantization.quant_lower:QuantLowerPass")
PASSES.register("autocast", "xla_core.passes.autocast:AutocastPass")
PASSES.register("weight-only-dot", "xla_core.quantization.weight_only_dot:WeightOnlyDotPass")


def _default_pipeline() -> Pipeline:
    """The target-independent cleanup every backend starts from."""
    return Pipeline("default", parse_pass_list(
        "inline,algebraic-simplifier,constant-fold,cse,dce"))


def _cpu_opt_pipeline() -> Pipeline:
    """The target-independent part of the cpu backend's pipeline (fusion and
    scheduling are appended by the backend: its ``cpu`` pipeline, registered by
    pjrt/plugins/cpu/__init__.py from pjrt/plugins/cpu/optimize.py).

    canonicalize runs before the algebraic simplifier so the identities see
    constants on the right, and again after constant folding exposed new
    constants. constant-fold keeps to 1024 elements: larger results (an iota
    mask, a broadcast splat) are cheaper computed inside a fused loop than
    read from a constant buffer, as XLA leaves iota and broadcasts unfolded.
    transpose-folding runs after cse so a transpose shared by two dots is
    seen once; prune-argreduce-index drops the indices of max pooling that nothing
    reads (after constant folding, which may leave their index operand a constant);
    dce then removes the transposes, those index operands and ops left unused.
    """
    return Pipeline("cpu-opt", parse_pass_list(
        "inline,canonicalize,algebraic-simplifier,constant-fold{max-elements=1024},"
        "canonicalize,algebraic-simplifier,cse,transpose-folding,prune-argreduce-index,dce"))


def spmd_pipeline(entry: str = "main", num_devices: int = 0, combine: bool = True,
                  pipeline_collectives: bool = True, overlap_hardware: str = "generic-cpu",
                  reduce_scatter: bool = False) -> Pipeline:
    """Global sharded program -> per-device program: shard_map/pmap programs by spmd-manual;
    the others are inlined (propagation and partitioning see one function), propagated and
    partitioned for ``num_devices`` (0: the module's mhlo.num_partitions; partial sums split
    over the summed axes are reduce-scattered with ``reduce_scatter``, else all-reduced and
    sliced as XLA's cpu pipeline does). Each later pass
    skips a module an earlier one partitioned. In loops over layers, all-gathers then move one
    iteration early and gradient reductions one iteration late (collective-pipeliner, unless
    ``pipeline_collectives`` is false), before the combiners, which keep the moved ones
    apart. Independent all-reduces, all-gathers and
    reduce-scatters are then combined (unless ``combine`` is false), in the order XLA's
    pipeline runs its combiners after partitioning, keeping apart the ones that merged would
    lose the overlap the scheduler can give them, estimated on ``overlap_hardware`` (a
    hardware description; empty: XLA's thresholds alone; see xla_core/spmd/combiner.py). Last, each collective that has
    independent work after it becomes an async start/done pair around that work (the creator
    splits every one, convert-async-to-sync joins those with nothing between). The compile
    driver (xla_core/compile) partitions with this too."""
    keep = f"{{overlap-hardware={overlap_hardware}}}" if overlap_hardware else ""
    combiners = "".join(f",{kind}-combiner{keep}"
                        for kind in ("all-reduce", "all-gather", "reduce-scatter"))
    return Pipeline("spmd", parse_pass_list(
        f"spmd-manual{{entry={entry} leave-automatic=true}},inline,"
        f"sharding-propagation{{entry={entry} num-devices={num_devices}}},"
        f"spmd-partition{{entry={entry} num-devices={num_devices}"
        f"{' reduce-scatter=true' if reduce_scatter else ''}}}"
        + (",collective-pipeliner" if pipeline_collectives else "")
        + (combiners if combine else "")
        + ",async-collective-creator,convert-async-to-sync"))


PIPELINES.register("default", _default_pipeline)
PIPELINES.register("cpu-opt", _cpu_opt_pipeline)
PIPELINES.register("spmd", spmd_pipeline)

__all__ = ["PASSES", "PIPELINES", "Pass", "PassContext", "PassError", "PassRecord", "Pipeline",
           "make_pass", "make_pipeline", "parse_pass_list", "spmd_pipeline"]
