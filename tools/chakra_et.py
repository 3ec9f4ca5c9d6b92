#!/usr/bin/env python3
"""Reads and writes Chakra execution traces with the standard library only: meshsim's own check
of the traces it exports, independent of Protobuf and of meshsim's reader (ASTRA-sim and Chakra's
tools cannot be installed here), and the writer of hostile traces for tools/hostile_inputs.py.

    tools/chakra_et.py check DIR      checks every <prefix>.<rank>.et of DIR against Chakra's
                                      schema and the attributes Chakra's feeder reads; prints a
                                      summary; exits 1 on the first violation
    tools/chakra_et.py dump FILE      prints every record of one trace as JSON lines

The schema is mlcommons/chakra schema/protobuf/et_def.proto (a1120ddc, unchanged at Chakra
1.0.0): field numbers and wire types below. The framing is src/third_party/utils/protolib.py's:
each record a base-128 varint length (at most 32 bits) and that many bytes of one message,
GlobalMetadata first, then Nodes. The attribute types are those Chakra's feeder reads
(src/feeder/et_feeder_node.cpp: is_cpu_op bool_val, num_ops int64_val, tensor_size uint64_val,
comm_type int64_val, comm_size int64_val, comm_src / comm_dst / comm_tag int32_val, pg_name
string_val).
"""

from __future__ import annotations

import json
import re
import struct
import sys
from pathlib import Path

VARINT, I64, LEN, I32 = 0, 1, 2, 5

# AttributeProto's oneof `value`: field number -> (name, wire type, kind).
ATTR_VALUES = {
    3: ("double_val", I64, "double"), 4: ("double_list", LEN, "list"),
    5: ("float_val", I32, "float"), 6: ("float_list", LEN, "list"),
    7: ("int32_val", VARINT, "int"), 8: ("int32_list", LEN, "list"),
    9: ("int64_val", VARINT, "int"), 10: ("int64_list", LEN, "ints"),
    11: ("uint32_val", VARINT, "uint"), 12: ("uint32_list", LEN, "list"),
    13: ("uint64_val", VARINT, "uint"), 14: ("uint64_list", LEN, "list"),
    15: ("sint32_val", VARINT, "sint"), 16: ("sint32_list", LEN, "list"),
    17: ("sint64_val", VARINT, "sint"), 18: ("sint64_list", LEN, "list"),
    19: ("fixed32_val", I32, "fixed"), 20: ("fixed32_list", LEN, "list"),
    21: ("fixed64_val", I64, "fixed"), 22: ("fixed64_list", LEN, "list"),
    23: ("sfixed32_val", I32, "fixed"), 24: ("sfixed32_list", LEN, "list"),
    25: ("sfixed64_val", I64, "fixed"), 26: ("sfixed64_list", LEN, "list"),
    27: ("bool_val", VARINT, "bool"), 28: ("bool_list", LEN, "list"),
    29: ("string_val", LEN, "string"), 30: ("string_list", LEN, "list"),
    31: ("bytes_val", LEN, "bytes"), 32: ("bytes_list", LEN, "list"),
}
NODE_FIELDS = {
    1: ("id", VARINT), 2: ("name", LEN), 3: ("type", VARINT), 4: ("ctrl_deps", LEN),
    5: ("data_deps", LEN), 6: ("start_time_micros", VARINT), 7: ("duration_micros", VARINT),
    8: ("inputs", LEN), 9: ("outputs", LEN), 10: ("attr", LEN),
}
NODE_TYPES = {0: "INVALID_NODE", 1: "METADATA_NODE", 2: "MEM_LOAD_NODE", 3: "MEM_STORE_NODE",
              4: "COMP_NODE", 5: "COMM_SEND_NODE", 6: "COMM_RECV_NODE", 7: "COMM_COLL_NODE"}
# What Chakra's feeder reads, and with which member of the oneof.
FEEDER_TYPES = {"is_cpu_op": "bool_val", "num_ops": "int64_val", "tensor_size": "uint64_val",
                "comm_type": "int64_val", "comm_size": "int64_val", "comm_src": "int32_val",
                "comm_dst": "int32_val", "comm_tag": "int32_val", "pg_name": "string_val"}


class Invalid(Exception):
    pass


def varint(data: bytes, pos: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        if pos >= len(data):
            raise Invalid("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise Invalid("varint longer than 10 bytes")


def fields(data: bytes):
    """(field number, wire type, value) of one message; LEN values as bytes."""
    pos = 0
    while pos < len(data):
        key, pos = varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, pos = varint(data, pos)
        elif wire == I64:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == I32:
            value, pos = data[pos:pos + 4], pos + 4
        elif wire == LEN:
            n, pos = varint(data, pos)
            value, pos = data[pos:pos + n], pos + n
        else:
            raise Invalid(f"wire type {wire} of field {number}")
        if pos > len(data):
            raise Invalid(f"field {number} runs past the message")
        yield number, wire, value


def packed_varints(data: bytes) -> list[int]:
    out, pos = [], 0
    while pos < len(data):
        v, pos = varint(data, pos)
        out.append(v)
    return out


def signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def attribute(data: bytes) -> dict:
    a = {}
    for number, wire, value in fields(data):
        if number == 1:
            a["name"] = value.decode()
        elif number in ATTR_VALUES:
            name, want, kind = ATTR_VALUES[number]
            if wire != want:
                raise Invalid(f"attribute member {name}: wire type {wire}, schema {want}")
            if kind == "int":
                value = signed(value)
            elif kind == "sint":
                value = (value >> 1) ^ -(value & 1)
            elif kind == "bool":
                value = bool(value)
            elif kind == "double":
                value = struct.unpack("<d", value)[0]
            elif kind == "float":
                value = struct.unpack("<f", value)[0]
            elif kind == "string":
                value = value.decode()
            elif kind == "ints":
                value = [signed(v) for number2, _, packed in fields(value) if number2 == 1
                         for v in packed_varints(packed)]
            a["member"], a["value"] = name, value
    return a


def node(data: bytes) -> dict:
    n = {"id": 0, "name": "", "type": 0, "data_deps": [], "ctrl_deps": [], "attr": {},
         "duration_micros": 0}
    for number, wire, value in fields(data):
        if number not in NODE_FIELDS:
            continue
        name, want = NODE_FIELDS[number]
        if name in ("data_deps", "ctrl_deps"):
            n[name] += packed_varints(value) if wire == LEN else [value]
            continue
        if wire != want:
            raise Invalid(f"Node.{name}: wire type {wire}, schema {want}")
        if name == "attr":
            a = attribute(value)
            n["attr"][a["name"]] = a
        elif name == "name":
            n["name"] = value.decode()
        elif name in ("inputs", "outputs"):
            continue
        else:
            n[name] = value
    return n


def records(data: bytes):
    pos = 0
    while pos < len(data):
        size, pos = varint(data, pos)
        if size > 0xFFFFFFFF or pos + size > len(data):
            raise Invalid("a record runs past the end of the file")
        yield data[pos:pos + size]
        pos += size


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    recs = list(records(path.read_bytes()))
    if not recs:
        raise Invalid(f"{path}: empty")
    meta = {"version": "", "attr": {}}
    for number, _, value in fields(recs[0]):
        if number == 1:
            meta["version"] = value.decode()
        elif number == 2:
            a = attribute(value)
            meta["attr"][a["name"]] = a
    return meta, [node(r) for r in recs[1:]]


def check(directory: Path) -> str:
    traces = sorted(directory.glob("*.et"), key=lambda p: int(p.stem.rsplit(".", 1)[1]))
    if not traces:
        raise Invalid(f"{directory}: no .et files")
    groups = json.loads((directory / "comm_group.json").read_text())
    counts: dict[str, int] = {}
    for rank, path in enumerate(traces):
        if path.name != f"{path.stem.rsplit('.', 1)[0]}.{rank}.et":
            raise Invalid(f"{path}: expected rank {rank}")
        _, nodes = read_trace(path)
        ids = {n["id"] for n in nodes}
        if len(ids) != len(nodes):
            raise Invalid(f"{path}: duplicate node ids")
        for n in nodes:
            kind = NODE_TYPES.get(n["type"], "?")
            counts[kind] = counts.get(kind, 0) + 1
            for d in n["data_deps"]:
                if d not in ids or d >= n["id"]:
                    raise Invalid(f"{path}: node {n['id']} depends on {d}")
            for name, member in FEEDER_TYPES.items():
                a = n["attr"].get(name)
                if a is not None and a.get("member") != member:
                    raise Invalid(f"{path}: node {n['id']}: {name} is {a.get('member')}, the "
                                  f"feeder reads {member}")
            if kind == "COMM_COLL_NODE":
                for need in ("comm_type", "comm_size", "pg_name"):
                    if need not in n["attr"]:
                        raise Invalid(f"{path}: node {n['id']}: collective without {need}")
                if rank not in groups[n["attr"]["pg_name"]["value"]]:
                    raise Invalid(f"{path}: node {n['id']}: rank not in its group")
            if kind in ("COMM_SEND_NODE", "COMM_RECV_NODE"):
                for need in ("comm_src", "comm_dst", "comm_size"):
                    if need not in n["attr"]:
                        raise Invalid(f"{path}: node {n['id']}: {kind} without {need}")
    return f"{len(traces)} traces, " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))


# Writing (hostile_inputs.py): messages built field by field.
def enc_varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def enc_field(number: int, wire: int, payload) -> bytes:
    key = enc_varint(number << 3 | wire)
    if wire == VARINT:
        return key + enc_varint(payload)
    return key + enc_varint(len(payload)) + payload


def enc_attr(name: str, member: str, value) -> bytes:
    number = next(k for k, (n, _, _) in ATTR_VALUES.items() if n == member)
    body = enc_field(1, LEN, name.encode())
    if member == "string_val":
        body += enc_field(number, LEN, value.encode())
    else:
        body += enc_field(number, VARINT, int(value))
    return body


def enc_node(node_id: int, name: str, node_type: int, deps=(), duration=0, attrs=()) -> bytes:
    body = enc_field(1, VARINT, node_id) + enc_field(2, LEN, name.encode())
    body += enc_field(3, VARINT, node_type)
    if deps:
        body += enc_field(5, LEN, b"".join(enc_varint(d) for d in deps))
    if duration:
        body += enc_field(7, VARINT, duration)
    for a in attrs:
        body += enc_field(10, LEN, enc_attr(*a))
    return body


def enc_record(message: bytes) -> bytes:
    return enc_varint(len(message)) + message


def enc_metadata(version: str = "1.0.0") -> bytes:
    return enc_record(enc_field(1, LEN, version.encode()))


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[1] not in ("check", "dump"):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        if argv[1] == "check":
            print(check(Path(argv[2])))
        else:
            meta, nodes = read_trace(Path(argv[2]))
            print(json.dumps(meta))
            for n in nodes:
                print(json.dumps(n, default=str))
    except (Invalid, OSError, ValueError, KeyError) as e:
        print(f"chakra_et.py: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
