"""ExportSweep's columnar chunks into pandas DataFrames, a column at a time.

Each ExportColumn holds one typed array (doubles, ints or strings) and an
optional ``absent`` mask; they become numpy arrays without a Python loop over
rows, then one DataFrame:

=========  ======================================================
DOUBLE     float64; absent -> NaN
FLOAT      float64 (float32 values); absent -> NaN
INT64      int64; with an absent value, pandas' nullable Int64 (<NA>)
STRING     object (str); absent -> None
BOOL       bool; with an absent value, pandas' nullable boolean
TIMESTAMP  datetime64[us, UTC] (pandas >= 2; pandas 1.x: [ns, UTC]); absent -> NaT
=========  ======================================================

Columns keep the export's names and order (trial_id first, then step, then
the proto's field names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
import pandas as pd

from ._stubs import sweep_service_pb2
from .wire import RawChunk, RawColumn, WireError, concat, decode_chunk

DOUBLE = sweep_service_pb2.EXPORT_COLUMN_DOUBLE
FLOAT = sweep_service_pb2.EXPORT_COLUMN_FLOAT
INT64 = sweep_service_pb2.EXPORT_COLUMN_INT64
STRING = sweep_service_pb2.EXPORT_COLUMN_STRING
BOOL = sweep_service_pb2.EXPORT_COLUMN_BOOL
TIMESTAMP = sweep_service_pb2.EXPORT_COLUMN_TIMESTAMP

# The key of a row in each table: an export that follows a running sweep may
# send a row again with newer values; the last one counts.
TABLE_KEYS: Dict[str, Sequence[str]] = {
    "trials": ("trial_id",),
    "metrics": ("trial_id", "step"),
    "grad_norms": ("trial_id", "step", "layer", "matrix"),
    "diagnostics": ("trial_id", "step", "layer"),
    "attempts": ("trial_id", "attempt"),
}

_PANDAS_2 = int(pd.__version__.split(".")[0]) >= 2
TIMESTAMP_DTYPE = "datetime64[us, UTC]" if _PANDAS_2 else "datetime64[ns, UTC]"


class ChunkError(WireError):
    """A chunk that does not hold what its header says (a broken server or stream)."""


# A column's buffer: small first (a few chunks of a short table), then room for
# 2M rows at once (the first 64K rows copied once more), doubling beyond.
# Pages are only touched as rows arrive; NumPy asks for transparent huge pages
# for buffers of 4 MB and more.
_FIRST_ROWS = 1 << 16
_BIG_ROWS = 1 << 21


class _Growing:
    """A 1-D array that chunks are appended to, copied out of their payloads as they arrive.

    Keeping the payloads (views into them) until the end would hold every
    chunk's bytes, about the frame's size again, in fresh 4 KiB pages, and on
    a VM a page fault costs more than copying the page (10-25 us measured on
    the 2-core dev VM). Copied out, a payload's memory is free for the next
    chunk's (tests/bench/python_frames.py --grpc).
    """

    def __init__(self, dtype) -> None:
        self.buf = np.empty(0, dtype=dtype)
        self.rows = 0
        self.shared = False  # view() handed buf out: later rows go to a new buffer

    def _room(self, n: int) -> None:
        need = self.rows + n
        if need <= len(self.buf) and not self.shared:
            return
        if len(self.buf) == 0:
            cap = max(need, _FIRST_ROWS)
        elif len(self.buf) < _BIG_ROWS:
            cap = max(need, _BIG_ROWS)
        else:
            cap = max(need, 2 * len(self.buf))
        grown = np.empty(cap, dtype=self.buf.dtype)  # untouched pages cost nothing
        grown[:self.rows] = self.buf[:self.rows]
        self.buf, self.shared = grown, False

    def append(self, values: Optional[np.ndarray], n: int) -> None:
        """n more rows: values, or (None) whatever the buffer holds there."""
        self._room(n)
        if values is not None:
            self.buf[self.rows:self.rows + n] = values
        self.rows += n

    def fill(self, value, n: int) -> None:
        self._room(n)
        self.buf[self.rows:self.rows + n] = value
        self.rows += n

    def view(self) -> np.ndarray:
        """The rows so far, sharing memory with the buffer (writable)."""
        self.shared = True
        return self.buf[:self.rows]


@dataclass(eq=False)  # compared by identity
class _Column:
    name: str
    type: int
    values: Optional[_Growing] = None  # every type but STRING
    strings: List[np.ndarray] = field(default_factory=list)  # STRING: a chunk's object array each
    absent: Optional[_Growing] = None  # from the first absent value on (earlier rows False)
    rows: int = 0
    any_absent: bool = False
    all_absent: bool = True  # every value so far absent (the metrics a run never logs)

    def append(self, values: np.ndarray, mask: Optional[np.ndarray], rows: int) -> None:
        every_absent = rows > 0 and mask is not None and bool(mask.all())
        if self.type == STRING:
            self.strings.append(values)
        else:
            if self.values is None:
                self.values = _Growing(np.float64 if self.type in (DOUBLE, FLOAT) else np.int64)
            # Doubles that are all absent are not copied: frame() writes NaN there.
            skip = every_absent and self.type in (DOUBLE, FLOAT)
            self.values.append(None if skip else values, rows)
        if mask is not None and (every_absent or mask.any()):
            if self.absent is None:
                self.absent = _Growing(bool)
                self.absent.fill(False, self.rows)
            self.absent.append(mask, rows)
            self.any_absent = True
        elif self.absent is not None:
            self.absent.fill(False, rows)
        if rows and not every_absent:
            self.all_absent = False
        self.rows += rows

    def array(self) -> np.ndarray:
        """The values so far: the buffer's (shared) or, for strings, a new array."""
        if self.type == STRING:
            return np.concatenate(self.strings) if self.strings else np.empty(0, dtype=object)
        if self.values is None:
            return np.empty(0, dtype=np.float64 if self.type in (DOUBLE, FLOAT) else np.int64)
        return self.values.view()

    def absent_flags(self) -> Optional[np.ndarray]:
        return self.absent.view() if self.any_absent else None


def _values(col: Union[sweep_service_pb2.ExportColumn, RawColumn], rows: int) -> np.ndarray:
    raw = isinstance(col, RawColumn)
    if col.type in (DOUBLE, FLOAT):
        src, dtype = col.doubles, np.float64
    elif col.type in (INT64, BOOL, TIMESTAMP):
        src, dtype = col.ints, np.int64
    elif col.type == STRING:
        src, dtype = col.strings, object
    else:
        raise ChunkError(f"column {col.name!r}: unknown type {col.type}")
    if raw and dtype is not object:
        values = concat(src, dtype)
        values = values if values is not None else np.empty(0, dtype=dtype)
    elif dtype is object:
        values = np.empty(len(src), dtype=object)
        values[:] = list(src)
    else:
        values = np.fromiter(src, dtype=dtype, count=len(src))
    if len(values) != rows:
        raise ChunkError(f"column {col.name!r}: {len(values)} values in a chunk of {rows} rows")
    return values


def _absent(col: Union[sweep_service_pb2.ExportColumn, RawColumn], rows: int) -> Optional[np.ndarray]:
    if isinstance(col, RawColumn):
        mask = concat(col.absent, bool)
    else:
        mask = np.fromiter(col.absent, dtype=bool, count=len(col.absent)) if len(col.absent) else None
    if mask is None or len(mask) == 0:
        return None
    if len(mask) != rows:
        raise ChunkError(f"column {col.name!r}: {len(mask)} absent flags in a chunk of {rows} rows")
    return mask


class FrameBuilder:
    """Collects the chunks of one export and builds one DataFrame of them.

    Each chunk's arrays are copied out as it is added (the payload is not
    kept). A frame may share arrays with the builder (rows in key order are
    not copied again); rows added after frame() go to new buffers.
    """

    def __init__(self) -> None:
        self._columns: List[_Column] = []
        self.rows = 0
        self.cursor = ""

    def add(self, chunk: Union[sweep_service_pb2.ExportChunk, RawChunk, bytes]) -> None:
        """Appends a chunk (a message, or its wire bytes); ChunkError when its columns differ
        from the first chunk's."""
        if isinstance(chunk, (bytes, bytearray, memoryview)):
            chunk = decode_chunk(bytes(chunk))
        if chunk.cursor:
            self.cursor = chunk.cursor
        if chunk.rows == 0 and not chunk.columns:
            return
        if not self._columns:
            self._columns = [_Column(c.name, c.type) for c in chunk.columns]
        names = [(c.name, c.type) for c in chunk.columns]
        if names != [(c.name, c.type) for c in self._columns]:
            raise ChunkError(f"a chunk's columns {names} differ from the first chunk's")
        rows = chunk.rows
        for held, col in zip(self._columns, chunk.columns):
            held.append(_values(col, rows), _absent(col, rows), rows)
        self.rows += rows

    def frame(self, key: Sequence[str] = ()) -> pd.DataFrame:
        """The rows so far as a DataFrame, sorted by key, the last row of each key kept."""
        if not self._columns:
            return pd.DataFrame()
        named = {c.name: c for c in self._columns}
        key_columns = [named[k] for k in key if k in named]
        if any(c.type not in (INT64, STRING) or c.any_absent for c in key_columns):
            # Not seen from the server (keys are present int64s and strings): order the frame instead.
            df = pd.DataFrame({c.name: _column_values(c, None, self.rows) for c in self._columns}, copy=False)
            present = [c.name for c in key_columns]
            return _last_per_key(df, present) if present and len(df) > 1 else df
        # A string key (grad_norms' matrix) is ordered by its rank among the column's values.
        keys = [c.array() if c.type == INT64 else _string_ranks(c.array()) for c in key_columns]
        # Rows are put in order within the builder's buffers through one scratch
        # array, not into a new array per column: fresh pages cost more than the copy.
        scratch = np.empty(self.rows, dtype=np.int64)
        order = _last_per_key_order(keys, scratch) if keys and self.rows > 1 else None
        rows = self.rows if order is None else len(order)
        data = {}
        for col in self._columns:
            if col in key_columns and col.type == INT64:
                values = keys[key_columns.index(col)]
                data[col.name] = values if order is None else _reorder(values, order, scratch)
            else:
                data[col.name] = _column_values(col, order, rows, scratch)
        # copy=False: no copy and no consolidation into 2-D blocks (pandas copies for that).
        return pd.DataFrame(data, copy=False)


def _string_ranks(values: np.ndarray) -> np.ndarray:
    """Each string's rank among the distinct values (int64), in code point order, the
    server's (byte order of UTF-8, PostgreSQL's COLLATE "C")."""
    return np.unique(values, return_inverse=True)[1].astype(np.int64).reshape(-1)


def _reorder(values: np.ndarray, order: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """values[order], written over values' first len(order) elements (values: a buffer of
    the builder's, 8-byte items; scratch: len(order) 8-byte items)."""
    into = scratch[:len(order)].view(values.dtype)
    values.take(order, out=into, mode="clip")  # order is in range; "raise" would buffer
    values[:len(order)] = into
    return values[:len(order)]


def _column_values(col: _Column, order: Optional[np.ndarray], rows: int,
                   scratch: Optional[np.ndarray] = None):
    """A column's values in the frame's order (order: row numbers to take, None for all in
    arrival order; rows: how many; scratch: see _reorder), as the DataFrame's column."""
    doubles = col.type in (DOUBLE, FLOAT)
    if doubles and col.all_absent:
        return np.full(rows, np.nan)  # nothing to gather
    values = col.array()
    mask = col.absent_flags()
    if doubles and mask is not None:
        # In the builder's buffer: what it holds under a flag is never read.
        np.putmask(values, mask, np.nan)
        mask = None
    if order is not None:
        if scratch is not None and col.type != STRING:
            values = _reorder(values, order, scratch)
        else:
            values = values.take(order)
        mask = mask.take(order) if mask is not None else None
    return _to_series_values(col.type, values, mask)


def _to_series_values(kind: int, values: np.ndarray, mask: Optional[np.ndarray]):
    """The column of values and absent flags (mask): kept, not copied, by DOUBLE, FLOAT and
    INT64 (and BOOL's mask); values written in place (NaN, None) where a flag is set."""
    if kind in (DOUBLE, FLOAT):
        if mask is not None:
            np.putmask(values, mask, np.nan)
        return values
    if kind == INT64:
        return pd.arrays.IntegerArray(values, mask) if mask is not None else values
    if kind == BOOL:
        b = values != 0
        return pd.arrays.BooleanArray(b, mask) if mask is not None else b
    if kind == STRING:
        if mask is not None:
            values[mask] = None
        return values
    if kind == TIMESTAMP:
        stamps = values.astype("datetime64[us]")
        if mask is not None:
            stamps[mask] = np.datetime64("NaT")
        if not _PANDAS_2:
            stamps = stamps.astype("datetime64[ns]")
        return pd.DatetimeIndex(stamps).tz_localize("UTC")
    raise ChunkError(f"unknown column type {kind}")


# A counting sort's table may be this many times the rows (8 bytes a slot):
# keys from a sweep are dense (trial ids from one sequence, steps 0..N).
_COUNTING_SPAN_PER_ROW = 4


def _composite(keys: List[np.ndarray], out: np.ndarray) -> Optional[int]:
    """Writes one int64 per row into out, ordered as the keys (first most significant),
    0 <= x < span, and returns span; None when the keys' ranges do not fit in 62 bits."""
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows)]
    span = 1
    for s in spans:
        span *= s
    if span >= 2**62:
        return None
    np.subtract(keys[0], lows[0], out=out)
    for k, lo, s in zip(keys[1:], lows[1:], spans[1:]):
        out *= s
        out += k
        if lo:
            out -= lo
    return span


def _last_per_key_order(keys: List[np.ndarray], scratch: Optional[np.ndarray] = None) -> Optional[np.ndarray]:
    """The rows to take, in key order, the last that arrived of each key; None when the rows
    already are in key order with no key twice (one complete pass sorted by key).
    scratch: an int64 array of a value per row that this may overwrite.

    A key arrives twice only across a follow/since export's passes (the server
    exports each row once per pass), so the usual case pays for a check that
    the keys increase, or for a counting sort, not for a comparison sort.
    """
    span = None
    if all(k.dtype == np.int64 for k in keys):
        composite = scratch if scratch is not None else np.empty(len(keys[0]), dtype=np.int64)
        span = _composite(keys, composite)
    if span is None:
        order = np.lexsort(keys[::-1])  # stable: equal keys stay in arrival order
        return order[_last_of_each([k.take(order) for k in keys])]
    if bool((composite[1:] > composite[:-1]).all()):
        return None
    if span <= _COUNTING_SPAN_PER_ROW * len(composite) + 1024:
        return _counting_order(composite, span)
    order = np.argsort(composite, kind="stable")
    return order[_last_of_each([composite.take(order)])]


def _last_of_each(sorted_keys: List[np.ndarray]) -> np.ndarray:
    """For rows sorted by key: True for the last row of each key."""
    n = len(sorted_keys[0])
    same_as_next = np.ones(max(n - 1, 0), dtype=bool)
    for k in sorted_keys:
        same_as_next &= k[:-1] == k[1:]
    last = np.ones(n, dtype=bool)
    last[:-1] = ~same_as_next
    return last


def _counting_order(composite: np.ndarray, span: int) -> np.ndarray:
    """_last_per_key_order by a counting sort: composite values in [0, span)."""
    rows = np.arange(len(composite))
    row_of = np.empty(span, dtype=np.intp)
    row_of[composite] = rows
    seen = np.zeros(span, dtype=bool)
    seen[composite] = True
    order = row_of[seen]
    if len(order) < len(composite):
        # A key arrived twice. NumPy leaves unspecified which of a repeated
        # index's writes above stays: set those keys' rows to the last that arrived.
        twice_key = np.zeros(span, dtype=bool)
        twice_key[composite[row_of.take(composite) != rows]] = True
        twice = np.flatnonzero(twice_key.take(composite))
        sub = composite.take(twice)
        by_key = np.argsort(sub, kind="stable")
        last = by_key[_last_of_each([sub.take(by_key)])]
        row_of[sub.take(last)] = twice.take(last)
        order = row_of[seen]
    return order


def _last_per_key(df: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """Sorted by key (stable), keeping the last row that arrived for each key: for keys
    that are not present int64s (never from the server), so pandas' way (absent last)."""
    df = df.drop_duplicates(subset=list(key), keep="last")
    return df.sort_values(list(key), kind="stable", na_position="last").reset_index(drop=True)


def chunks_to_frame(chunks: Iterable[Union[sweep_service_pb2.ExportChunk, bytes]], table: str = "") -> pd.DataFrame:
    """One DataFrame of an export's chunks (table names the key for ordering and de-duplication)."""
    builder = FrameBuilder()
    for chunk in chunks:
        builder.add(chunk)
    df = builder.frame(TABLE_KEYS.get(table, ()))
    df.attrs["cursor"] = builder.cursor
    return df
