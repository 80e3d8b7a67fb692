"""Cross-replica and cross-partition communication."""
from stablehlo.ir.ops.base import define, COLLECTIVE

define("stablehlo.replica_id", syntax="nullary", traits=(COLLECTIVE,))
define("stablehlo.partition_id", syntax="nullary", traits=(COLLECTIVE,))
define("stablehlo.all_gather", properties=("all_gather_dim", "replica_groups", "channel_handle",
                                           "use_global_device_ids"), traits=(COLLECTIVE,))
define("stablehlo.all_reduce", properties=("replica_groups", "channel_handle",
                                           "use_global_device_ids"),
       num_regions=1, traits=(COLLECTIVE,))
define("stablehlo.reduce_scatter", properties=("scatter_dimension", "replica_groups",
                                               "channel_handle", "use_global_device_ids"),
       num_regions=1, traits=(COLLECTIVE,))
define("stablehlo.all_to_all", properties=("split_dimension", "concat_dimension", "split_count",
                                           "replica_groups", "channel_handle"),
       traits=(COLLECTIVE,))
define("stablehlo.collective_permute", properties=("source_target_pairs", "channel_handle"),
       traits=(COLLECTIVE,))
define("stablehlo.collective_broadcast", properties=("replica_groups", "channel_handle"),
       traits=(COLLECTIVE,))
define("stablehlo.collective_reduce", properties=("replica_groups", "channel_handle"),
       num_regions=1, traits=(COLLECTIVE,))
