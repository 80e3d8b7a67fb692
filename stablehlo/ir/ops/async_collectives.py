"""Asynchronous collectives: ``openhlo.async_start`` and ``openhlo.async_done``.

A start wraps one collective (all_gather, all_reduce, reduce_scatter, all_to_all,
collective_permute) in its single region, whose block takes the start's operands and
returns the collective's results; the start returns a handle of type
``!openhlo.future<R...>`` (R: the collective's result types). The done takes that handle
and returns the results. Between the two, the program may compute anything that does not
read the results: a backend runs the collective meanwhile (the cpu runtime on a
communication thread), and the interpreter runs it at the done.

    %h = "openhlo.async_start"(%x) ({
    ^bb0(%a: tensor<8xf32>):
      %r = "stablehlo.all_reduce"(%a) <{replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
        ...
      }) : (tensor<8xf32>) -> tensor<8xf32>
      stablehlo.return %r : tensor<8xf32>
    }) : (tensor<8xf32>) -> !openhlo.future<tensor<8xf32>>
    %y = "openhlo.async_done"(%h) : (!openhlo.future<tensor<8xf32>>) -> tensor<8xf32>

The wrapped collective is an ordinary op (its own verifier, interpreter kernel and native
kernel apply), so the pair adds ordering, not semantics. Both ops have the
``ASYNC_PAIR`` effect: nothing removes, merges or folds them. The verifier (the rules
file) keeps each pair in one block, one done per start.
"""
from __future__ import annotations

from stablehlo.ir.core import Operation
from stablehlo.ir.ops.async_collectives_rules import ASYNC_COLLECTIVES, rule_for
from stablehlo.ir.ops.base import define, Effect

ASYNC_START = "openhlo.async_start"
ASYNC_DONE = "openhlo.async_done"

define(ASYNC_START, num_regions=1, effects=Effect.ASYNC_PAIR, verify=rule_for(ASYNC_START),
       summary="starts the collective of its region; returns its handle")
define(ASYNC_DONE, effects=Effect.ASYNC_PAIR, verify=rule_for(ASYNC_DONE),
       summary="waits for a started collective; returns its results")


def wrapped_collective(start: Operation) -> Operation:
    """The collective op inside ``start``'s region."""
    return start.regions[0].blocks[0].operations[0]


def start_of(done: Operation) -> Operation:
    """The ``openhlo.async_start`` whose handle ``done`` consumes."""
    return done.operands[0].owner


__all__ = ["ASYNC_COLLECTIVES", "ASYNC_START", "ASYNC_DONE", "wrapped_collective", "start_of"]
