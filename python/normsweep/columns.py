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
from typing import Dict, Iterable, List, Optional, Sequence

import numpy as np
import pandas as pd

from ._stubs import sweep_service_pb2

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


class ChunkError(ValueError):
    """A chunk that does not hold what its header says (a broken server or stream)."""


@dataclass
class _Column:
    name: str
    type: int
    values: List[np.ndarray] = field(default_factory=list)
    absent: List[np.ndarray] = field(default_factory=list)
    any_absent: bool = False


def _values(col: sweep_service_pb2.ExportColumn, rows: int) -> np.ndarray:
    if col.type in (DOUBLE, FLOAT):
        src, dtype = col.doubles, np.float64
    elif col.type in (INT64, BOOL, TIMESTAMP):
        src, dtype = col.ints, np.int64
    elif col.type == STRING:
        src, dtype = col.strings, object
    else:
        raise ChunkError(f"column {col.name!r}: unknown type {col.type}")
    if len(src) != rows:
        raise ChunkError(f"column {col.name!r}: {len(src)} values in a chunk of {rows} rows")
    if dtype is object:
        out = np.empty(rows, dtype=object)
        out[:] = list(src)
        return out
    return np.fromiter(src, dtype=dtype, count=rows)


def _absent(col: sweep_service_pb2.ExportColumn, rows: int) -> Optional[np.ndarray]:
    n = len(col.absent)
    if n == 0:
        return None
    if n != rows:
        raise ChunkError(f"column {col.name!r}: {n} absent flags in a chunk of {rows} rows")
    return np.fromiter(col.absent, dtype=bool, count=rows)


class FrameBuilder:
    """Collects the chunks of one export and builds one DataFrame of them."""

    def __init__(self) -> None:
        self._columns: List[_Column] = []
        self.rows = 0
        self.cursor = ""

    def add(self, chunk: sweep_service_pb2.ExportChunk) -> None:
        """Appends a chunk's columns; ChunkError when they differ from the first chunk's."""
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


def _last_per_key(df: pd.DataFrame, key: Sequence[str]) -> pd.DataFrame:
    """Sorted by key (stable), keeping the last row that arrived for each key."""
    keys = [df[k].to_numpy() for k in key]
    order = np.lexsort(keys[::-1])  # stable: equal keys stay in arrival order
    sorted_keys = [k[order] for k in keys]
    keep = np.ones(len(order), dtype=bool)
    same_as_next = np.ones(len(order) - 1, dtype=bool)
    for k in sorted_keys:
        same_as_next &= k[:-1] == k[1:]
    keep[:-1] = ~same_as_next
    order = order[keep]
    if len(order) == len(df) and np.array_equal(order, np.arange(len(df))):
        return df
    return df.take(order).reset_index(drop=True)


def chunks_to_frame(chunks: Iterable[sweep_service_pb2.ExportChunk], table: str = "") -> pd.DataFrame:
    """One DataFrame of an export's chunks (table names the key for ordering and de-duplication)."""
    builder = FrameBuilder()
    for chunk in chunks:
        builder.add(chunk)
    df = builder.frame(TABLE_KEYS.get(table, ()))
    df.attrs["cursor"] = builder.cursor
    return df
