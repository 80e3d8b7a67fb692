"""Checks a whole program must pass before any backend compiles it (``check_program``,
run once by the contract's compile path): what would otherwise fail far from its cause, in
a backend's lowering or as a wait until the runtime's timeout.

Every function a program calls must have a body: a private declaration parses and
verifies (it may be linked later), but there is nothing to compile or run for it.

Send/recv pairs: a ``stablehlo.recv`` waits until a ``stablehlo.send`` on the same channel,
in another instance of the program or another program it runs beside, gives it a value. A recv whose channel no op of the program sends on would wait until the runtime's
collective timeout; a send and recv that disagree on the types would fail only when they
meet. Both are visible in the program, so ``check_channels`` rejects them at compile time
(the contract's compile path runs it for every backend), naming the ops' locations.
Host transfers (``is_host_transfer = true``) are checked the same way: OpenHLO's runtimes
have no host side that sends or receives, so they meet another op of the program too (as in
the interpreter suite's ``interpreter.run_parallel`` programs).
"""
from __future__ import annotations

from stablehlo.errors import VerificationError
from stablehlo.ir.attributes import StructAttr
from stablehlo.ir.core import Module, Operation


def check_program(module: Module) -> None:
    """Raise VerificationError for the first problem ``check_callees`` or ``check_channels``
    finds in ``module``."""
    check_callees(module)
    check_channels(module)


def check_callees(module: Module) -> None:
    """Raise VerificationError for a ``func.call`` of a function without a body."""
    bodiless = {f.name for f in module.functions() if f.body is None}
    if not bodiless:
        return
    for func in module.functions():
        if func.body is None:
            continue
        for op in func.body.walk():
            callee = op.attributes.get("callee") if op.name == "func.call" else None
            name = getattr(callee, "name", None)
            if name in bodiless:
                raise VerificationError(
                    f"{op.where()}: calls @{name}, which is a declaration without a body; "
                    f"a program to compile needs the body of every function it calls")


def check_channels(module: Module) -> None:
    """Raise VerificationError for a recv whose channel has no send in
    ``module``, or whose values' types differ from its channel's send."""
    sends: dict[int, Operation] = {}
    recvs: list[tuple[int, Operation]] = []
    for func in module.functions():
        if func.body is None:
            continue
        for op in func.body.walk():
            if op.name not in ("stablehlo.send", "stablehlo.recv"):
                continue
            channel = _channel(op)
            if op.name == "stablehlo.send":
                sends.setdefault(channel, op)
            else:
                recvs.append((channel, op))
    for channel, recv in recvs:
        send = sends.get(channel)
        if send is None:
            raise VerificationError(
                f"{recv.where()}: recv on channel {channel} has no stablehlo.send on that "
                f"channel in the program; it would wait for ever")
        sent = [v.type for v in send.operands[:-1]]  # the last operand is the token
        received = [r.type for r in recv.results[:-1]]
        if sent != received:
            raise VerificationError(
                f"{recv.where()}: recv on channel {channel} expects "
                f"({', '.join(map(str, received))}) but {send.where()} sends "
                f"({', '.join(map(str, sent))})")


def _channel(op: Operation) -> int:
    handle = op.attributes.get("channel_handle")
    return int(handle.get("handle", 0)) if isinstance(handle, StructAttr) else 0

