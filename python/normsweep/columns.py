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
    "grad_norms": ("trial_id", "step", "layer"),
    "diagnostics": ("trial_id", "step", "layer"),
    "attempts": ("trial_id", "attempt"),
}

_PANDAS_2 = int(pd.__version__.split(".")[0]) >= 2
TIMESTAMP_DTYPE = "datetime64[us, UTC]" if _PANDAS_2 else "datetime64[ns, UTC]"


class ChunkError(WireError):
    """A chunk that does not hold what its header says (a broken server or stream)."""


@dataclass
class _Column:
    name: str
    type: int
    values: List[np.ndarray] = field(default_factory=list)
    absent: List[np.ndarray] = field(default_factory=list)
    any_absent: bool = False


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
    """Collects the chunks of one export and builds one DataFrame of them."""

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
            held.values.append(_values(col, rows))
            mask = _absent(col, rows)
            if mask is not None and mask.any():
                held.any_absent = True
            held.absent.append(mask if mask is not None else np.zeros(rows, dtype=bool))
        self.rows += rows

    def frame(self, key: Sequence[str] = ()) -> pd.DataFrame:
        """The rows so far as a DataFrame, sorted by key, the last row of each key kept."""
        data = {}
        for col in self._columns:
            values = np.concatenate(col.values) if col.values else np.empty(0)
            mask = np.concatenate(col.absent) if col.any_absent else None
            data[col.name] = _to_series_values(col.type, values, mask)
        df = pd.DataFrame(data, copy=False)
        if not self._columns:
            return df
        present = [k for k in key if k in df.columns]
        if present and len(df) > 1:
            df = _last_per_key(df, present)
        return df


def _to_series_values(kind: int, values: np.ndarray, mask: Optional[np.ndarray]):
    if kind in (DOUBLE, FLOAT):
        if mask is not None:
            values = values.copy()
            values[mask] = np.nan
        return values
    if kind == INT64:
        return pd.arrays.IntegerArray(values, mask) if mask is not None else values
    if kind == BOOL:
        b = values != 0
        return pd.arrays.BooleanArray(b, mask) if mask is not None else b
    if kind == STRING:
        if mask is not None:
            values = values.copy()
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


def _sort_order(keys: List[np.ndarray]) -> np.ndarray:
    """The stable order of rows by keys (first key most significant)."""
    if all(k.dtype.kind == "i" for k in keys) and len(keys[0]):
        lows = [int(k.min()) for k in keys]
        spans = [int(k.max()) - lo + 1 for k, lo in zip(keys, lows)]
        if min(lows) >= -(2**40) and np.prod([float(s) for s in spans]) < 2.0**62:
            # One int64 key: a single stable argsort instead of lexsort.
            composite = np.zeros(len(keys[0]), dtype=np.int64)
            for k, lo, span in zip(keys, lows, spans):
                composite = composite * span + (k - lo)
            if len(composite) < 2 or bool((composite[1:] > composite[:-1]).all()):
                return np.arange(len(composite))
            return np.argsort(composite, kind="stable")
    return np.lexsort(keys[::-1])


def _last_per_key(df: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """Sorted by key (stable), keeping the last row that arrived for each key."""
    keys = [df[k].to_numpy() for k in key]
    order = _sort_order(keys)  # stable: equal keys stay in arrival order
    if len(order) == len(df) and bool((order[1:] > order[:-1]).all()):
        sorted_keys = keys
    else:
        sorted_keys = [k[order] for k in keys]
    same_as_next = np.ones(len(order) - 1, dtype=bool)
    for k in sorted_keys:
        same_as_next &= k[:-1] == k[1:]
    if not same_as_next.any() and sorted_keys is keys:
        return df  # already in key order, no key twice
    keep = np.ones(len(order), dtype=bool)
    keep[:-1] = ~same_as_next
    return df.take(order[keep]).reset_index(drop=True)


def chunks_to_frame(chunks: Iterable[Union[sweep_service_pb2.ExportChunk, bytes]], table: str = "") -> pd.DataFrame:
    """One DataFrame of an export's chunks (table names the key for ordering and de-duplication)."""
    builder = FrameBuilder()
    for chunk in chunks:
        builder.add(chunk)
    df = builder.frame(TABLE_KEYS.get(table, ()))
    df.attrs["cursor"] = builder.cursor
    return df
