"""ExportChunk -> DataFrame, on hand-built chunks (no server)."""

import numpy as np
import pandas as pd
import pytest

from normsweep.columns import TIMESTAMP_DTYPE, ChunkError, FrameBuilder, chunks_to_frame
from normsweep.v1 import sweep_service_pb2 as pb

T = pb


def column(name, kind, values, absent=None):
    c = pb.ExportColumn(name=name, type=kind)
    if kind in (T.EXPORT_COLUMN_DOUBLE, T.EXPORT_COLUMN_FLOAT):
        c.doubles.extend(values)
    elif kind == T.EXPORT_COLUMN_STRING:
        c.strings.extend(values)
    else:
        c.ints.extend(values)
    if absent is not None:
        c.absent.extend(absent)
    return c


def chunk(rows, columns, cursor="", last=False):
    return pb.ExportChunk(rows=rows, columns=columns, cursor=cursor, last=last)


def test_every_type_and_absent_values():
    c = chunk(3, [
        column("trial_id", T.EXPORT_COLUMN_INT64, [7, 7, 8]),
        column("step", T.EXPORT_COLUMN_INT64, [1, 2, 1]),
        column("val_loss", T.EXPORT_COLUMN_DOUBLE, [2.5, 0.0, 1.25], [False, True, False]),
        column("lr", T.EXPORT_COLUMN_FLOAT, [np.float32(1e-3).item(), 2.0, 3.0]),
        column("diverged_step", T.EXPORT_COLUMN_INT64, [0, 17, 0], [True, False, True]),
        column("state", T.EXPORT_COLUMN_STRING, ["SUCCEEDED", "", "DIVERGED"], [False, True, False]),
        column("qk_norm", T.EXPORT_COLUMN_BOOL, [1, 0, 1]),
        column("maybe", T.EXPORT_COLUMN_BOOL, [1, 0, 0], [False, False, True]),
        column("finished_at", T.EXPORT_COLUMN_TIMESTAMP, [1_700_000_000_123_456, 0, 5], [False, True, False]),
    ], cursor="c1", last=True)
    df = chunks_to_frame([c], "metrics")
    assert list(df.columns) == ["trial_id", "step", "val_loss", "lr", "diverged_step", "state", "qk_norm",
                                "maybe", "finished_at"]
    assert df.attrs["cursor"] == "c1"
    assert df["trial_id"].dtype == np.int64 and df["step"].tolist() == [1, 2, 1]
    assert df["val_loss"].dtype == np.float64
    assert df["val_loss"].iloc[0] == 2.5 and np.isnan(df["val_loss"].iloc[1]) and df["val_loss"].iloc[2] == 1.25
    assert df["lr"].iloc[0] == np.float32(1e-3).item()  # the float32 value, exactly
    assert str(df["diverged_step"].dtype) == "Int64"
    assert df["diverged_step"].isna().tolist() == [True, False, True] and df["diverged_step"].iloc[1] == 17
    assert df["state"].tolist() == ["SUCCEEDED", None, "DIVERGED"]
    assert df["qk_norm"].dtype == bool and df["qk_norm"].tolist() == [True, False, True]
    assert str(df["maybe"].dtype) == "boolean" and df["maybe"].isna().tolist() == [False, False, True]
    assert str(df["finished_at"].dtype) == TIMESTAMP_DTYPE
    assert df["finished_at"].iloc[0] == pd.Timestamp("2023-11-14T22:13:20.123456Z")
    assert pd.isna(df["finished_at"].iloc[1])
    assert df["finished_at"].iloc[2] == pd.Timestamp(5, unit="us", tz="UTC")


def test_chunks_concatenate_sort_by_key_and_keep_the_newest_row():
    first = chunk(3, [column("trial_id", T.EXPORT_COLUMN_INT64, [2, 1, 1]),
                      column("step", T.EXPORT_COLUMN_INT64, [1, 2, 1]),
                      column("val_loss", T.EXPORT_COLUMN_DOUBLE, [0, 0, 0], [True, True, True])], cursor="a")
    # Step (1, 1) written again with its evaluation: the later row wins.
    second = chunk(2, [column("trial_id", T.EXPORT_COLUMN_INT64, [1, 3]),
                       column("step", T.EXPORT_COLUMN_INT64, [1, 1]),
                       column("val_loss", T.EXPORT_COLUMN_DOUBLE, [4.5, 0], [False, True])], cursor="b")
    df = chunks_to_frame([first, second, chunk(0, [], cursor="c", last=True)], "metrics")
    assert df[["trial_id", "step"]].values.tolist() == [[1, 1], [1, 2], [2, 1], [3, 1]]
    assert df["val_loss"].iloc[0] == 4.5
    assert df["val_loss"].iloc[1:].isna().all()
    assert df.attrs["cursor"] == "c"


def test_an_empty_export_is_an_empty_frame():
    df = chunks_to_frame([chunk(0, [], cursor="x", last=True)], "trials")
    assert len(df) == 0 and df.attrs["cursor"] == "x"


@pytest.mark.parametrize("bad,message", [
    (chunk(2, [column("step", T.EXPORT_COLUMN_INT64, [1])]), "1 values in a chunk of 2 rows"),
    (chunk(1, [column("step", T.EXPORT_COLUMN_INT64, [1], [True, False])]), "2 absent flags"),
    (chunk(1, [pb.ExportColumn(name="x", type=99)]), "unknown type 99"),
])
def test_inconsistent_chunks_are_refused(bad, message):
    with pytest.raises(ChunkError, match=message):
        chunks_to_frame([bad])


def test_a_chunk_with_other_columns_is_refused():
    b = FrameBuilder()
    b.add(chunk(1, [column("step", T.EXPORT_COLUMN_INT64, [1])]))
    with pytest.raises(ChunkError, match="differ from the first"):
        b.add(chunk(1, [column("layer", T.EXPORT_COLUMN_INT64, [1])]))


def test_wire_bytes_decode_as_the_parsed_message():
    c = chunk(4, [
        column("trial_id", T.EXPORT_COLUMN_INT64, [1, 300, -5, 2**62 + 7]),  # 1-, 2-, 10- and 9-byte varints
        column("loss", T.EXPORT_COLUMN_DOUBLE, [1.5, -0.0, float("inf"), 1e-300], [False, False, False, True]),
        column("state", T.EXPORT_COLUMN_STRING, ["ok", "", "naïve ✓", "x"], [False, True, False, False]),
        column("flag", T.EXPORT_COLUMN_BOOL, [0, 1, 1, 0]),
        column("at", T.EXPORT_COLUMN_TIMESTAMP, [0, 1, 2, 1_700_000_000_000_000], [True, False, False, False]),
    ], cursor="cur-é", last=True)
    from_message = chunks_to_frame([c])
    from_bytes = chunks_to_frame([c.SerializeToString()])
    pd.testing.assert_frame_equal(from_message, from_bytes)
    assert from_bytes["trial_id"].tolist() == [1, 300, -5, 2**62 + 7]
    assert from_bytes.attrs["cursor"] == "cur-é"
    # Truncated bytes are refused, never read as fewer rows.
    with pytest.raises(ValueError):
        chunks_to_frame([c.SerializeToString()[:-3]])


def test_varints_of_every_length():
    from normsweep.wire import varints
    values = [0, 1, 127, 128, 16383, 16384, 2**31, 2**35 + 3, 2**56, 2**63 - 1, -1, -(2**63)]
    c = pb.ExportColumn(ints=values)
    packed = c.SerializeToString()
    # field 4, wire type 2, then the length: the packed payload follows
    payload = packed[packed.index(b"\x22") + 2:] if len(packed) < 130 else None
    assert varints(np.frombuffer(payload, dtype=np.uint8)).tolist() == values


def test_a_million_rows_convert_without_a_row_loop():
    # 1M metric rows in ~1 MB chunks, as ExportSweep sends them; the figure
    # is printed (tests/bench measures it), the check is that every value lands.
    import time
    n, per_chunk = 1_000_000, 12_500
    rng = np.random.default_rng(0)
    chunks = []
    for start in range(0, n, per_chunk):
        rows = min(per_chunk, n - start)
        idx = np.arange(start, start + rows)
        cols = [column("trial_id", T.EXPORT_COLUMN_INT64, (idx // 100).tolist()),
                column("step", T.EXPORT_COLUMN_INT64, (idx % 100).tolist())]
        for name in ("lr", "train_loss", "val_loss", "grad_norm"):
            absent = (idx % 10 != 0).tolist() if name == "val_loss" else None
            cols.append(column(name, T.EXPORT_COLUMN_DOUBLE, rng.random(rows).tolist(), absent))
        chunks.append(chunk(rows, cols).SerializeToString())
    t = time.perf_counter()
    df = chunks_to_frame(chunks, "metrics")  # as export() gets them: the wire bytes
    print(f"1M rows, {len(chunks)} chunks of {len(chunks[0])} bytes: {time.perf_counter() - t:.3f} s")
    assert len(df) == n
    assert df["trial_id"].iloc[-1] == (n - 1) // 100 and df["step"].iloc[-1] == 99
    assert df["val_loss"].notna().sum() == n // 10


@pytest.mark.parametrize("values", [
    [128, 300, 16383, 200],                        # two bytes each
    [16384, 2**21 - 1, 99999, 16385],              # three bytes each
    [2**63 - 1, -1, -(2**63), -5],                 # nine and ten bytes
    [1, 128, 16384, 2, 129],                       # mixed: 1, 2, 3 bytes
    [128, 1, 128, 1],                              # 4 values in 6 bytes: not one width
    [16384, 1, 1, 1, 16384, 1],                    # 10 bytes, 6 values: not one width
])
def test_varints_of_one_width_and_of_mixed_widths(values):
    from normsweep.wire import varints
    packed = pb.ExportColumn(ints=values).SerializeToString()
    assert packed[0] == 0x22  # field 4, length-delimited: the packed run follows its length
    length, start = packed[1], 2
    assert length < 128
    assert varints(np.frombuffer(packed[start:start + length], dtype=np.uint8)).tolist() == values


def test_truncated_packed_varints_are_refused():
    from normsweep.wire import WireError, varints
    with pytest.raises(WireError, match="truncated"):
        varints(np.frombuffer(bytes([0x80, 0x01, 0x80]), dtype=np.uint8))
    with pytest.raises(WireError, match="longer than 10"):
        varints(np.frombuffer(bytes([0xFF] * 11 + [0x01]), dtype=np.uint8))
