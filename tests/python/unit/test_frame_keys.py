"""Ordering and de-duplication by key in FrameBuilder.frame(): the frame is the rows sorted
by key, the last row that arrived of each key kept, whatever path frame() takes (keys
already in order, a counting sort, a comparison sort, non-int64 keys), and the same from
wire bytes as from messages."""

import numpy as np
import pandas as pd
import pytest

from normsweep import columns
from normsweep.columns import FrameBuilder, chunks_to_frame
from normsweep.v1 import sweep_service_pb2 as pb
from test_columns import chunk, column

T = pb


def expected(chunks, key):
    """The reference: every row in arrival order (no key), then pandas' last-per-key and a
    stable sort."""
    df = chunks_to_frame(chunks)  # no table: no key, rows as they arrived
    df = df.drop_duplicates(subset=list(key), keep="last")
    return df.sort_values(list(key), kind="stable").reset_index(drop=True)


def mixed_chunk(keys, rng, key_names=("trial_id", "step"), cursor=""):
    """A chunk of the given key tuples with a column of every type, some values absent."""
    n = len(keys)
    cols = [column(name, T.EXPORT_COLUMN_INT64, [k[i] for k in keys]) for i, name in enumerate(key_names)]
    loss = rng.random(n)
    cols.append(column("loss", T.EXPORT_COLUMN_DOUBLE, loss.tolist(), (rng.random(n) < 0.3).tolist()))
    cols.append(column("lr", T.EXPORT_COLUMN_FLOAT, rng.random(n).astype(np.float32).tolist()))
    cols.append(column("never", T.EXPORT_COLUMN_DOUBLE, [0.0] * n, [True] * n))
    cols.append(column("count", T.EXPORT_COLUMN_INT64, rng.integers(-5, 5, n).tolist(),
                       (rng.random(n) < 0.2).tolist()))
    cols.append(column("state", T.EXPORT_COLUMN_STRING, [f"s{v}" for v in rng.integers(0, 9, n)],
                       (rng.random(n) < 0.2).tolist()))
    cols.append(column("flag", T.EXPORT_COLUMN_BOOL, rng.integers(0, 2, n).tolist()))
    cols.append(column("at", T.EXPORT_COLUMN_TIMESTAMP, rng.integers(0, 2**50, n).tolist(),
                       (rng.random(n) < 0.2).tolist()))
    return chunk(n, cols, cursor=cursor)


def in_chunks(keys, rng, size, **kw):
    return [mixed_chunk(keys[i:i + size], rng, **kw) for i in range(0, len(keys), size)]


def check(chunks, table, key):
    want = expected(chunks, key)
    for form in (chunks, [c.SerializeToString() for c in chunks]):
        got = chunks_to_frame(form, table)
        pd.testing.assert_frame_equal(got, want)
    return want


def test_keys_in_order_without_duplicates_are_the_rows_as_sent():
    rng = np.random.default_rng(1)
    keys = [(t, s) for t in range(3, 40) for s in range(0, 20, 3)]
    chunks = in_chunks(keys, rng, 17)
    got = chunks_to_frame(chunks, "metrics")
    pd.testing.assert_frame_equal(got, chunks_to_frame(chunks))  # as sent: no reorder, nothing dropped
    assert got[["trial_id", "step"]].values.tolist() == [list(k) for k in keys]


def test_one_pass_interleaved_by_transaction_is_sorted():
    # The server's order (xid, trial_id, step): batches of different trials interleave.
    rng = np.random.default_rng(2)
    batches = [[(t, b * 10 + s) for s in range(10)] for t in range(1001, 1031) for b in range(5)]
    rng.shuffle(batches)
    keys = [k for batch in batches for k in batch]
    want = check(in_chunks(keys, rng, 64), "metrics", ("trial_id", "step"))
    assert len(want) == len(keys)
    assert want[["trial_id", "step"]].values.tolist() == sorted(map(list, keys))


def test_a_key_sent_again_in_a_later_pass_keeps_its_last_row():
    rng = np.random.default_rng(3)
    first = [(t, s) for t in range(1, 30) for s in range(8)]
    rng.shuffle(first)
    again = [first[i] for i in rng.choice(len(first), 60, replace=False)]
    third = again[:20]  # some keys three times
    chunks = in_chunks(first, rng, 50) + in_chunks(again, rng, 25) + in_chunks(third, rng, 7)
    want = check(chunks, "metrics", ("trial_id", "step"))
    assert len(want) == len(first)
    # The last pass's values won: a row of `third`'s last chunk is in the frame.
    last = chunks_to_frame(chunks[-1:])
    merged = want.merge(last[["trial_id", "step", "lr"]], on=["trial_id", "step"], suffixes=("", "_last"))
    assert len(merged) == len(last) and (merged["lr"] == merged["lr_last"]).all()


@pytest.mark.parametrize("table,names", [("trials", ("trial_id",)), ("diagnostics", ("trial_id", "step", "layer")),
                                         ("attempts", ("trial_id", "attempt"))])
@pytest.mark.parametrize("seed", range(4))
def test_random_passes_of_every_key_shape(table, names, seed):
    rng = np.random.default_rng(seed)
    width = len(names)
    pool = rng.integers(-3, 12, size=(200, width))
    pool[:, 0] += 2**40 * (seed == 3)  # large ids: still one int64 key
    keys = [tuple(int(v) for v in row) for row in pool]  # repeats included: a key can come back
    chunks = in_chunks(keys, rng, int(rng.integers(1, 40)), key_names=names)
    check(chunks, table, names)


def grad_norm_chunk(keys, rng, cursor=""):
    """grad_norms' long shape: (trial_id, step, layer, matrix) keys and a norm."""
    n = len(keys)
    return chunk(n, [column("trial_id", T.EXPORT_COLUMN_INT64, [k[0] for k in keys]),
                     column("step", T.EXPORT_COLUMN_INT64, [k[1] for k in keys]),
                     column("layer", T.EXPORT_COLUMN_INT64, [k[2] for k in keys]),
                     column("matrix", T.EXPORT_COLUMN_STRING, [k[3] for k in keys]),
                     column("norm", T.EXPORT_COLUMN_DOUBLE, rng.random(n).tolist())], cursor=cursor)


@pytest.mark.parametrize("seed", range(4))
def test_grad_norms_are_ordered_by_their_matrix_too(seed):
    # The matrix (a string) ends the key: the rows of one layer differ only there.
    # "Z" sorts before "attn" and "ffn.fc1" (code points, the server's byte order).
    rng = np.random.default_rng(seed)
    matrices = ["ffn.fc2", "ffn.fc1", "attn.qkv", "Z", "ffn.fc10"]
    pool = [(int(rng.integers(1, 6)), int(rng.integers(0, 3)) * 100, int(rng.integers(0, 4)),
             matrices[int(rng.integers(0, len(matrices)))]) for _ in range(150)]
    size = int(rng.integers(1, 30))
    chunks = [grad_norm_chunk(pool[i:i + size], rng) for i in range(0, len(pool), size)]
    want = check(chunks, "grad_norms", ("trial_id", "step", "layer", "matrix"))
    keys = list(zip(want["trial_id"], want["step"], want["layer"], want["matrix"]))
    assert keys == sorted(set(pool)) and len(keys) == len(set(pool))


def test_grad_norms_in_key_order_are_kept_as_sent():
    rng = np.random.default_rng(9)
    keys = [(t, 0, layer, m) for t in (4, 5) for layer in range(3) for m in ("ffn.fc1", "ffn.fc2")]
    chunks = [grad_norm_chunk(keys[:5], rng), grad_norm_chunk(keys[5:], rng)]
    got = chunks_to_frame(chunks, "grad_norms")
    pd.testing.assert_frame_equal(got, chunks_to_frame(chunks))
    assert list(got.columns) == ["trial_id", "step", "layer", "matrix", "norm"]
    assert list(zip(got["trial_id"], got["step"], got["layer"], got["matrix"])) == keys


def test_sparse_keys_use_a_comparison_sort():
    # steps 10^9 apart: a counting table would be far larger than the rows.
    rng = np.random.default_rng(5)
    keys = [(int(t), int(s) * 10**9) for t, s in zip(rng.integers(0, 50, 300), rng.integers(0, 1000, 300))]
    check(in_chunks(keys, rng, 33), "metrics", ("trial_id", "step"))


def test_keys_beyond_62_bits_use_lexsort():
    rng = np.random.default_rng(6)
    keys = [(int(t), int(s)) for t, s in zip(rng.integers(-2**62, 2**62, 50), rng.integers(-2**40, 2**40, 50))]
    keys += keys[:10]  # sent again
    check(in_chunks(keys, rng, 9), "metrics", ("trial_id", "step"))


def test_a_key_column_with_absent_values_is_still_ordered():
    # Not what the server sends (keys are always there): the frame-level fallback.
    c = chunk(3, [column("trial_id", T.EXPORT_COLUMN_INT64, [2, 1, 2], [False, False, False]),
                  column("step", T.EXPORT_COLUMN_INT64, [0, 5, 0], [False, True, False]),
                  column("x", T.EXPORT_COLUMN_DOUBLE, [1.0, 2.0, 3.0])])
    df = chunks_to_frame([c], "metrics")
    assert df["trial_id"].tolist() == [1, 2] and df["x"].tolist() == [2.0, 3.0]
    assert pd.isna(df["step"].iloc[0])


def test_absent_in_some_chunks_present_in_others():
    # A column absent throughout one chunk (not copied) and present in the next.
    a = chunk(2, [column("trial_id", T.EXPORT_COLUMN_INT64, [2, 1]), column("step", T.EXPORT_COLUMN_INT64, [0, 0]),
                  column("v", T.EXPORT_COLUMN_DOUBLE, [9.0, 9.0], [True, True])])
    b = chunk(2, [column("trial_id", T.EXPORT_COLUMN_INT64, [4, 3]), column("step", T.EXPORT_COLUMN_INT64, [0, 0]),
                  column("v", T.EXPORT_COLUMN_DOUBLE, [4.0, 3.0])])
    for chunks in ([a, b], [b, a]):
        df = chunks_to_frame(chunks, "metrics")
        assert df["trial_id"].tolist() == [1, 2, 3, 4]
        assert df["v"].isna().tolist() == [True, True, False, False] and df["v"].iloc[2:].tolist() == [3.0, 4.0]
    only_absent = chunks_to_frame([a], "metrics")["v"]
    assert only_absent.dtype == np.float64 and only_absent.isna().all()


def test_buffers_grow_and_frames_stay_independent(monkeypatch):
    # Small buffers, so that a few chunks cross both growth steps.
    monkeypatch.setattr(columns, "_FIRST_ROWS", 4)
    monkeypatch.setattr(columns, "_BIG_ROWS", 16)
    rng = np.random.default_rng(7)
    keys = [(t, s) for t in range(12) for s in range(6)]
    chunks = in_chunks(keys, rng, 5)
    builder = FrameBuilder()
    for c in chunks[:4]:
        builder.add(c.SerializeToString())
    early = builder.frame(("trial_id", "step"))  # in order: may share the builder's arrays
    early_copy = early.copy()
    for c in chunks[4:]:
        builder.add(c)
    late = builder.frame(("trial_id", "step"))
    pd.testing.assert_frame_equal(early, early_copy)  # later rows did not write into the first frame
    pd.testing.assert_frame_equal(late, expected(chunks, ("trial_id", "step")))
    shuffled = [chunks[i] for i in rng.permutation(len(chunks))]
    check(shuffled, "metrics", ("trial_id", "step"))


def test_frames_are_writable():
    rng = np.random.default_rng(8)
    for keys in ([(1, 0), (1, 1)], [(2, 0), (1, 1), (2, 0)]):
        df = chunks_to_frame([mixed_chunk(keys, rng).SerializeToString()], "metrics")
        df.loc[0, "loss"] = 7.0
        df.loc[0, "trial_id"] = 9
        assert df["loss"].iloc[0] == 7.0 and df["trial_id"].iloc[0] == 9
