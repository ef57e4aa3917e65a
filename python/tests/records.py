"""TFRecord files of tf.train.Example records written in pure Python, for
tests that need records of their own: the protobuf wire format by hand and a
CRC32C table (no TensorFlow in the test venv)."""

from __future__ import annotations

import pathlib
import struct
from collections.abc import Mapping, Sequence


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC32C of ``data``."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    c ^= 0xFFFFFFFF
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1  # a negative int64 as protobuf writes it
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(tag: int, payload: bytes) -> bytes:
    return _varint(tag << 3 | 2) + _varint(len(payload)) + payload


def example(features: Mapping[str, Sequence[bytes] | Sequence[int]]) -> bytes:
    """A serialized tf.train.Example: a list of bytes is a BytesList, a list
    of ints a packed Int64List (an empty list: an empty BytesList)."""
    entries = b""
    for name, values in features.items():
        if all(isinstance(v, int) for v in values) and values:
            packed = b"".join(_varint(int(v)) for v in values)
            feature = _field(3, _field(1, packed))  # Feature.int64_list
        else:
            listed = b"".join(_field(1, bytes(v)) for v in values)
            feature = _field(1, listed)  # Feature.bytes_list
        entries += _field(1, _field(1, name.encode()) + _field(2, feature))
    return _field(1, entries)


def write_tfrecord(path: pathlib.Path, records: Sequence[bytes]) -> list[int]:
    """A TFRecord file of ``records``; gives each record's byte offset."""
    offsets, at = [], 0
    with open(path, "wb") as f:
        for r in records:
            head = struct.pack("<Q", len(r))
            f.write(head + struct.pack("<I", masked_crc(head)) + r)
            f.write(struct.pack("<I", masked_crc(r)))
            offsets.append(at)
            at += len(r) + 16
    return offsets
