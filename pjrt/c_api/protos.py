"""The protobuf messages of the PJRT C API that the plugin reads or writes, by hand.

Protobuf wire format only (no protobuf dependency): ``CompileOptionsProto`` arrives with
``PJRT_Client_Compile``; ``DeviceAssignmentProto`` is what
``PJRT_LoadedExecutable_GetDeviceAssignment`` returns. Field numbers are XLA's
(shared/design/pjrt-plugin.md section 5).
"""
import struct
from dataclasses import dataclass, field
from typing import Optional

from pjrt.errors import ArgumentError

_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5


def _varint(data: bytes, pos: int) -> tuple:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ArgumentError("CompileOptionsProto: truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def _fields(data: bytes):
    """Yields (field number, wire type, value): ints for varints/fixed, bytes for LEN."""
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == _VARINT:
            value, pos = _varint(data, pos)
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            value, pos = data[pos:pos + size], pos + size
            if pos > len(data):
                raise ArgumentError(f"CompileOptionsProto: field {number} runs past the end")
        elif wire in (_I64, _I32):
            width = 8 if wire == _I64 else 4
            value, pos = int.from_bytes(data[pos:pos + width], "little"), pos + width
        else:
            raise ArgumentError(f"CompileOptionsProto: unsupported wire type {wire} "
                                f"(field {number})")
        yield number, wire, value


def _signed(value: int) -> int:
    """int32/int64 varints are two's complement in 64 bits."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _packed_ints(wire: int, value) -> list:
    if wire == _VARINT:
        return [_signed(value)]
    out, pos = [], 0
    while pos < len(value):
        item, pos = _varint(value, pos)
        out.append(_signed(item))
    return out


@dataclass
class PjrtCompileOptions:
    """The CompileOptionsProto fields the plugin honours."""
    num_replicas: int = 1
    num_partitions: int = 1
    device_assignment: Optional[list] = None  # [replica][partition] device ids
    use_spmd_partitioning: bool = False
    use_shardy_partitioner: bool = False
    compile_portable_executable: bool = False
    # JAX's compiler_options ({"autocast": "bf16"}), sorted by name: protobuf maps arrive
    # in any order, and the fingerprint of these options must not depend on it
    env_option_overrides: dict = field(default_factory=dict)


def decode_device_assignment(data: bytes) -> list:
    """DeviceAssignmentProto -> ``ids[replica][partition]``."""
    replicas = partitions = 0
    columns = []  # one list of replica device ids per partition (computation)
    for number, wire, value in _fields(data):
        if number == 1:
            replicas = _signed(value)
        elif number == 2:
            partitions = _signed(value)
        elif number == 3:
            ids = []
            for inner, inner_wire, inner_value in _fields(value):
                if inner == 1:
                    ids.extend(_packed_ints(inner_wire, inner_value))
            columns.append(ids)
    if len(columns) != partitions or any(len(c) != replicas for c in columns):
        raise ArgumentError(f"DeviceAssignmentProto: {replicas} replica(s) x {partitions} "
                            f"partition(s) but device lists of sizes {[len(c) for c in columns]}")
    return [[columns[p][r] for p in range(partitions)] for r in range(replicas)]


def decode_option_override(data: bytes) -> tuple:
    """One ``env_option_overrides`` map entry (key 1, ``OptionOverrideProto`` value 2, whose
    oneof is string 1, bool 2, int64 3, double 4) -> ``(name, value)``."""
    name, value = "", None
    for number, _, item in _fields(data):
        if number == 1:
            name = item.decode()
        elif number == 2:
            for kind, _, inner in _fields(item):
                value = (inner.decode() if kind == 1 else bool(inner) if kind == 2
                         else _signed(inner) if kind == 3
                         else struct.unpack("<d", inner.to_bytes(8, "little"))[0])
    return name, value


def decode_compile_options(data: bytes) -> PjrtCompileOptions:
    """A serialized ``xla.CompileOptionsProto``; unknown fields are skipped."""
    options = PjrtCompileOptions()
    overrides = []
    for number, _, value in _fields(data):
        if number == 7:
            overrides.append(decode_option_override(value))
        elif number == 4:
            options.compile_portable_executable = bool(value)
        elif number == 3:
            for inner, _, inner_value in _fields(value):
                if inner == 4:
                    options.num_replicas = _signed(inner_value)
                elif inner == 5:
                    options.num_partitions = _signed(inner_value)
                elif inner == 6:
                    options.use_spmd_partitioning = bool(inner_value)
                elif inner == 19:
                    options.use_shardy_partitioner = bool(inner_value)
                elif inner == 9:
                    options.device_assignment = decode_device_assignment(inner_value)
    options.env_option_overrides = dict(sorted(overrides))
    return options


def _encode_varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _encode_len(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LEN) + _encode_varint(len(payload)) + payload


def encode_device_assignment(ids: list) -> bytes:
    """``ids[replica][partition]`` -> DeviceAssignmentProto bytes."""
    replicas, partitions = len(ids), len(ids[0])
    out = _encode_varint(1 << 3) + _encode_varint(replicas)
    out += _encode_varint(2 << 3) + _encode_varint(partitions)
    for p in range(partitions):
        packed = b"".join(_encode_varint(ids[r][p]) for r in range(replicas))
        out += _encode_len(3, _encode_len(1, packed))
    return out


_OP_SHARDING_OTHER = 3  # xla.OpSharding.Type: REPLICATED 0, MAXIMAL 1, TUPLE 2, OTHER 3


def encode_op_sharding(tiles) -> bytes:
    """A tile assignment (``stablehlo.ir.sharding.TileAssignment``) -> ``xla.OpSharding``
    bytes: 1 type, 3 tile_assignment_dimensions, 4 tile_assignment_devices (both packed),
    6 replicate_on_last_tile_dim. Replicated is the empty message (type 0 is the default)."""
    if tiles.replicated:
        return b""
    out = _encode_varint(1 << 3) + _encode_varint(_OP_SHARDING_OTHER)
    out += _encode_len(3, b"".join(_encode_varint(d) for d in tiles.devices.shape))
    out += _encode_len(4, b"".join(_encode_varint(int(d)) for d in tiles.devices.flat))
    if tiles.replicate_on_last_tile_dim:
        out += _encode_varint(6 << 3) + _encode_varint(1)
    return out
