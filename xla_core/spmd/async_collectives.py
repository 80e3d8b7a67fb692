"""async-collective-creator and convert-async-to-sync: collectives as start/done pairs.

``async-collective-creator`` splits each all_gather, all_reduce, reduce_scatter, all_to_all
and collective_permute into an ``openhlo.async_start`` wrapping it and an
``openhlo.async_done`` (stablehlo/ir/ops/async_collectives.py), as XLA's
async_collective_creator does. The start stays where the collective was; the done moves
down to just before the first op of the block that reads one of its results (the
terminator, if only the block's results do), so the ops in between, which cannot depend
on the collective, may run while it communicates. Until a latency-hiding scheduler moves
starts earlier, this order is all the overlap there is (e.g. a loss all-reduce against the
gradient work after it). Collectives already wrapped are left alone.

``convert-async-to-sync`` turns a pair with nothing between its start and its done back
into the synchronous collective (XLA's convert_async_collectives_to_sync): a pair that
overlaps nothing only costs a thread hand-off. Run after the creator, it leaves a program
where nothing can overlap exactly as it was. With ``hardware`` (an xla_core.cost
description, shared by ``devices-per-host`` devices; 0: as registered) that leaves no core
for a communication thread beside the computing ones
(``HardwareDescription.communication_beside_compute`` false: e.g. 8 devices on 2 cores),
every pair becomes synchronous: no order hides a collective there, and a pair only adds its
thread hand-off (the cpu pipeline runs it so before fusion, whose legality keeps work inside
windows, and after the latency-hiding scheduler).
"""
from __future__ import annotations

from dataclasses import dataclass

from stablehlo.ir.core import Block, Module, Operation, Region
from stablehlo.ir.ops.async_collectives import (ASYNC_COLLECTIVES, ASYNC_DONE, ASYNC_START,
                                                 start_of, wrapped_collective)
from stablehlo.ir.types import FutureType

from xla_core.ir_utils import blocks_of, replace_uses
from xla_core.passes.base import Pass, PassContext


def _function_blocks(module: Module):
    """(block, function op) for every block of every function body, outer before inner;
    the blocks inside async starts are not among them."""
    for func in module.functions():
        if func.body is None:
            continue
        for block in [func.body] + list(blocks_of(func.op))[1:]:
            owner = block.parent.parent if block.parent is not None else None
            if owner is None or owner.name != ASYNC_START:
                yield block, func.op


def _reads(op: Operation, values: set) -> bool:
    """Whether ``op`` or an op nested in it reads one of ``values``."""
    return any(v in values for inner in op.walk() for v in inner.operands)


@dataclass(frozen=True)
class AsyncCollectiveCreatorPass(Pass):
    name = "async-collective-creator"

    def run(self, module: Module, ctx: PassContext) -> bool:
        changed = False
        for block, root in list(_function_blocks(module)):
            changed |= _split_block(block, root)
        return changed


def _split_block(block: Block, root: Operation) -> bool:
    collectives = [op for op in block.operations if op.name in ASYNC_COLLECTIVES]
    for collective in collectives:
        start, done = _split(collective)
        replace_uses(root, dict(zip(collective.results, done.results)))
        ops = block.operations
        at = ops.index(collective)
        ops[at] = start
        start.parent = block
        results = set(done.results)
        # before the terminator at the latest, even when nothing reads the results
        first_reader = next((i for i in range(at + 1, len(ops) - 1) if _reads(ops[i], results)),
                            len(ops) - 1)
        ops.insert(first_reader, done)
        done.parent = block
    return bool(collectives)


def _split(collective: Operation) -> tuple[Operation, Operation]:
    """The start wrapping ``collective`` (moved into its region) and its done."""
    operands = list(collective.operands)
    body = Block([v.type for v in operands])
    collective.operands = list(body.arguments)
    body.append(collective)
    body.append(Operation("stablehlo.return", list(collective.results),
                          location=collective.location))
    future = FutureType(tuple(collective.result_types))
    start = Operation(ASYNC_START, operands, [future], regions=[Region([body])],
                      location=collective.location)
    done = Operation(ASYNC_DONE, [start.results[0]], collective.result_types,
                     location=collective.location)
    return start, done


@dataclass(frozen=True)
class ConvertAsyncToSyncPass(Pass):
    name = "convert-async-to-sync"
    hardware: str = ""
    devices_per_host: int = 0

    def run(self, module: Module, ctx: PassContext) -> bool:
        every_pair = False
        if self.hardware:
            from xla_core.cost.hardware import hardware
            described = hardware(self.hardware, self.devices_per_host)
            every_pair = not described.communication_beside_compute
        changed = False
        for block, root in list(_function_blocks(module)):
            changed |= _join_block(block, root, every_pair)
        return changed


def _join_block(block: Block, root: Operation, every_pair: bool) -> bool:
    """Join the pairs of ``block`` with nothing between (``every_pair``: all of them), each
    where its start was: the done's readers come after it, and the ops between the two did
    not wait for it."""
    ops = block.operations
    pairs = [(start_of(op), op) for i, op in enumerate(ops) if op.name == ASYNC_DONE
             and (every_pair or (i > 0 and ops[i - 1] is start_of(op)))]
    for start, done in pairs:
        collective = wrapped_collective(start)
        collective.operands = list(start.operands)
        replace_uses(root, dict(zip(done.results, collective.results)))
        ops.remove(done)
        ops[ops.index(start)] = collective
        collective.parent = block
    return bool(pairs)
