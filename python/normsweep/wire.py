"""ExportChunk read straight from its wire bytes into numpy arrays.

Parsing the message with protobuf and then copying each repeated field into
numpy costs about 100 ns a value; here a packed double field is one
np.frombuffer and a packed varint field a few vectorised numpy operations,
so a million rows cost milliseconds. Strings (the trials table's) are read
one by one. The layout is ExportChunk's and ExportColumn's in
proto/normsweep/v1/sweep_service.proto; anything else there is skipped, as
protobuf would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Tuple

import numpy as np


class WireError(ValueError):
    """Bytes that are not a well-formed ExportChunk."""


@dataclass
class RawColumn:
    name: str = ""
    type: int = 0
    doubles: List[np.ndarray] = field(default_factory=list)
    ints: List[np.ndarray] = field(default_factory=list)
    strings: List[str] = field(default_factory=list)
    absent: List[np.ndarray] = field(default_factory=list)


@dataclass
class RawChunk:
    rows: int = 0
    columns: List[RawColumn] = field(default_factory=list)
    cursor: str = ""
    last: bool = False


def _varint(data: memoryview, pos: int) -> Tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise WireError("truncated varint")
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def varints(buf: np.ndarray) -> np.ndarray:
    """A packed run of varints (uint8 array) as int64 (two's complement, as protobuf's int64)."""
    if len(buf) == 0:
        return np.empty(0, dtype=np.int64)
    last = buf < 0x80  # a value's last byte
    count = int(np.count_nonzero(last))
    if count == 0 or not last[-1]:
        raise WireError("truncated packed varints")
    if count == len(buf):  # every value below 128: one byte each
        return buf.astype(np.int64)
    width = len(buf) // count
    if width * count == len(buf) and width <= 10 and bool(last[width - 1::width].all()):
        # Every value takes width bytes (ids of one magnitude): the columns of a
        # (count, width) view, no index arrays.
        by_value = buf.reshape(count, width)
        values = (by_value[:, 0] & 0x7F).astype(np.uint64)
        for k in range(1, width):
            values |= (by_value[:, k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        return values.view(np.int64)
    ends = np.flatnonzero(last)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    longest = int(lengths.max())
    if longest > 10:
        raise WireError("varint longer than 10 bytes")
    # Mixed widths: one pass per byte position (ids and steps take 1-3 bytes), over the
    # values that long.
    values = np.zeros(len(ends), dtype=np.uint64)
    for k in range(longest):
        sel = lengths > k
        values[sel] |= (buf[starts[sel] + k] & 0x7F).astype(np.uint64) << np.uint64(7 * k)
    return values.view(np.int64)


def _skip(data: memoryview, pos: int, wire: int) -> int:
    if wire == 0:
        return _varint(data, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        n, pos = _varint(data, pos)
        return pos + n
    if wire == 5:
        return pos + 4
    raise WireError(f"unsupported wire type {wire}")


def _column(data: memoryview, start: int, end: int) -> RawColumn:
    col = RawColumn()
    pos = start
    while pos < end:
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 2:
            n, pos = _varint(data, pos)
            if pos + n > end:
                raise WireError("a field runs past its column")
            piece = data[pos:pos + n]
            if number == 1:
                col.name = bytes(piece).decode("utf-8")
            elif number == 3:
                if n % 8:
                    raise WireError("packed doubles not a multiple of 8 bytes")
                col.doubles.append(np.frombuffer(piece, dtype="<f8"))
            elif number == 4:
                col.ints.append(varints(np.frombuffer(piece, dtype=np.uint8)))
            elif number == 5:
                col.strings.append(bytes(piece).decode("utf-8"))
            elif number == 6:
                flags = np.frombuffer(piece, dtype=np.uint8)
                if len(flags) and flags.max() > 1:
                    raise WireError("an absent flag is neither 0 nor 1")
                col.absent.append(flags != 0)
            pos += n
        elif number == 2 and wire == 0:
            col.type, pos = _varint(data, pos)
        elif number == 3 and wire == 1:  # an unpacked double
            col.doubles.append(np.frombuffer(data[pos:pos + 8], dtype="<f8"))
            pos += 8
        elif number in (4, 6) and wire == 0:  # an unpacked int or flag
            v, pos = _varint(data, pos)
            arr = np.array([v], dtype=np.uint64).view(np.int64)
            (col.ints if number == 4 else col.absent).append(arr if number == 4 else arr != 0)
        else:
            pos = _skip(data, pos, wire)
    if pos != end:
        raise WireError("a column runs past its length")
    return col


def decode_chunk(payload: bytes) -> RawChunk:
    """An ExportChunk's serialized bytes, its columns as numpy arrays."""
    data = memoryview(payload)
    chunk = RawChunk()
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 1 and wire == 0:
            rows, pos = _varint(data, pos)
            chunk.rows = rows - (1 << 64) if rows >= 1 << 63 else rows
        elif number == 2 and wire == 2:
            n, pos = _varint(data, pos)
            chunk.columns.append(_column(data, pos, pos + n))
            pos += n
        elif number == 3 and wire == 2:
            n, pos = _varint(data, pos)
            chunk.cursor = bytes(data[pos:pos + n]).decode("utf-8")
            pos += n
        elif number == 4 and wire == 0:
            v, pos = _varint(data, pos)
            chunk.last = v != 0
        else:
            pos = _skip(data, pos, wire)
    if pos != len(data):
        raise WireError("the chunk runs past its end")
    return chunk


def concat(parts: List[np.ndarray], dtype) -> Optional[np.ndarray]:
    """The pieces of one repeated field as one array (None when there were none)."""
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else np.concatenate(parts).astype(dtype, copy=False)
