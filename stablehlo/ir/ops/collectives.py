"""Cross-replica and cross-partition communication."""
from stablehlo.ir.ops.base import define, COLLECTIVE
from stablehlo.ir.ops.collectives_rules import rule_for

define("stablehlo.replica_id", syntax="nullary", traits=(COLLECTIVE,),
       verify=rule_for("replica_id"))
define("stablehlo.partition_id", syntax="nullary", traits=(COLLECTIVE,),
       verify=rule_for("partition_id"))
define("stablehlo.all_gather", properties=("all_gather_dim", "replica_groups", "channel_handle",
                                           "use_global_device_ids"), traits=(COLLECTIVE,),
       verify=rule_for("all_gather"))
define("stablehlo.all_reduce", properties=("replica_groups", "channel_handle",
                                           "use_global_device_ids"),
       num_regions=1, traits=(COLLECTIVE,), verify=rule_for("all_reduce"))
define("stablehlo.reduce_scatter", properties=("scatter_dimension", "replica_groups",
                                               "channel_handle", "use_global_device_ids"),
       num_regions=1, traits=(COLLECTIVE,), verify=rule_for("reduce_scatter"))
define("stablehlo.all_to_all", properties=("split_dimension", "concat_dimension", "split_count",
                                           "replica_groups", "channel_handle"),
       traits=(COLLECTIVE,), verify=rule_for("all_to_all"))
define("stablehlo.collective_permute", properties=("source_target_pairs", "channel_handle"),
       traits=(COLLECTIVE,), verify=rule_for("collective_permute"))
define("stablehlo.collective_broadcast", properties=("replica_groups", "channel_handle"),
       traits=(COLLECTIVE,), verify=rule_for("collective_broadcast"))
define("stablehlo.collective_reduce", properties=("replica_groups", "channel_handle"),
       num_regions=1, traits=(COLLECTIVE,), verify=rule_for("collective_reduce"))
