"""The StableHLO struct and enum attribute kinds the parser and printer know.

``STRUCT_FIELDS[mnemonic]`` lists a ``#stablehlo.<mnemonic><...>`` attribute's fields in
canonical (printing) order with their defaults; the default's Python type also says how a
field's value is written (tuple: ``[1, 2]``; bool; int; float; None: a type; an Attribute).
``ELIDE_DEFAULTS`` names the fields MLIR leaves out when they hold their default;
``REQUIRED_FIELDS`` the fields MLIR's syntax requires (they have no default in the text).
"""
from __future__ import annotations

from stablehlo.ir.attributes import EnumAttr

STRUCT_FIELDS: dict[str, dict] = {
    "gather": {
        "offset_dims": (), "collapsed_slice_dims": (), "operand_batching_dims": (),
        "start_indices_batching_dims": (), "start_index_map": (), "index_vector_dim": 0,
    },
    "scatter": {
        "update_window_dims": (), "inserted_window_dims": (), "input_batching_dims": (),
        "scatter_indices_batching_dims": (), "scatter_dims_to_operand_dims": (),
        "index_vector_dim": 0,
    },
    "dot": {
        "lhs_batching_dimensions": (), "rhs_batching_dimensions": (),
        "lhs_contracting_dimensions": (), "rhs_contracting_dimensions": (),
    },
    "channel_handle": {"handle": 0, "type": 0},
    "ragged_dot": {  # #chlo.ragged_dot
        "lhs_batching_dimensions": (), "rhs_batching_dimensions": (),
        "lhs_contracting_dimensions": (), "rhs_contracting_dimensions": (),
        "lhs_ragged_dimensions": (), "rhs_group_dimensions": (),
    },
    "output_operand_alias": {
        "output_tuple_indices": (), "operand_index": 0, "operand_tuple_indices": (),
    },
    "result_accuracy": {
        "atol": 0.0, "rtol": 0.0, "ulps": 0,
        "mode": EnumAttr("result_accuracy_mode", "DEFAULT"),
    },
    "dot_algorithm": {
        "lhs_precision_type": None, "rhs_precision_type": None, "accumulation_type": None,
        "lhs_component_count": 0, "rhs_component_count": 0, "num_primitive_operations": 0,
        "allow_imprecise_accumulation": False,
    },
}

# Fields printed only when they differ from their default (everything else always prints).
ELIDE_DEFAULTS: dict[str, frozenset] = {
    "gather": frozenset(STRUCT_FIELDS["gather"]),
    "scatter": frozenset(STRUCT_FIELDS["scatter"]),
    "dot": frozenset(STRUCT_FIELDS["dot"]),
    "ragged_dot": frozenset(STRUCT_FIELDS["ragged_dot"]),
    "result_accuracy": frozenset({"atol", "rtol", "ulps"}),
}

REQUIRED_FIELDS: dict[str, frozenset] = {
    "dot_algorithm": frozenset(STRUCT_FIELDS["dot_algorithm"]),
}

# Enum kinds: ``#stablehlo<kind VALUE>`` (or ``#stablehlo.kind<VALUE>`` for DOTTED_ENUMS).
ENUM_KINDS = frozenset({
    "comparison_direction", "comparison_type", "precision", "fft_type", "rng_distribution",
    "rng_algorithm", "transpose", "result_accuracy_mode",
})
DOTTED_ENUMS = frozenset({"result_accuracy_mode"})
