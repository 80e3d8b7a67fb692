"""Cross-replica and cross-partition communication."""
from stablehlo.ir.ops.base import define, Effect, COLLECTIVE
from stablehlo.ir.ops.collectives_rules import rule_for

# Every op here talks to (or asks about) other devices: none may be removed, merged or folded.
_COMMUNICATES = {"traits": (COLLECTIVE,), "effects": Effect.COMMUNICATES}

define("stablehlo.replica_id", syntax="nullary", verify=rule_for("replica_id"), **_COMMUNICATES)
define("stablehlo.partition_id", syntax="nullary", verify=rule_for("partition_id"),
       **_COMMUNICATES)
define("stablehlo.all_gather", properties=("all_gather_dim", "replica_groups", "channel_handle",
                                           "use_global_device_ids"),
       verify=rule_for("all_gather"), **_COMMUNICATES)
define("stablehlo.all_reduce", properties=("replica_groups", "channel_handle",
                                           "use_global_device_ids"),
       num_regions=1, verify=rule_for("all_reduce"), **_COMMUNICATES)
define("stablehlo.reduce_scatter", properties=("scatter_dimension", "replica_groups",
                                               "channel_handle", "use_global_device_ids"),
       num_regions=1, verify=rule_for("reduce_scatter"), **_COMMUNICATES)
define("stablehlo.all_to_all", properties=("split_dimension", "concat_dimension", "split_count",
                                           "replica_groups", "channel_handle"),
       verify=rule_for("all_to_all"), **_COMMUNICATES)
define("stablehlo.collective_permute", properties=("source_target_pairs", "channel_handle"),
       verify=rule_for("collective_permute"), **_COMMUNICATES)
define("stablehlo.collective_broadcast", properties=("replica_groups", "channel_handle"),
       verify=rule_for("collective_broadcast"), **_COMMUNICATES)
define("stablehlo.collective_reduce", properties=("replica_groups", "channel_handle"),
       num_regions=1, verify=rule_for("collective_reduce"), **_COMMUNICATES)
