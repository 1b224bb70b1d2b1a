"""trials()/metrics()/grad_norms()/diagnostics()/attempts() over ExportSweep: each
DataFrame equals SQL over the same database row for row; the cursor; a client
that goes away mid-stream.

These need a scheduler with ExportSweep. Against one without it (UNIMPLEMENTED)
they are skipped with that reason, which pytest's -rs summary prints.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import normsweep
from conftest import run_to_end, tiny_spec
from stack import wait_for
from test_client import assert_rows_equal
from normsweep.v1 import sweep_pb2, sweep_service_pb2, train_pb2

METRIC_FIELDS = [f.name for f in sweep_pb2.MetricPoint.DESCRIPTOR.fields if f.name != "step"]


@pytest.fixture(scope="module")
def exported(client, finished_sweep):
    """The finished sweep's trials; skips the module when the scheduler lacks ExportSweep."""
    try:
        return client.trials(finished_sweep)
    except normsweep.Unimplemented as e:
        pytest.skip(f"ExportSweep is not implemented by this normsweep-scheduler yet: {e.details}")


def by_key(stack, query, sweep_id):
    rows = stack.sql(query, (sweep_id,))
    return rows, stack.last_columns


def test_trials_equal_the_trials_table(client, finished_sweep, stack, exported):
    df = exported
    assert list(df.columns[:10]) == ["trial_id", "trial_index", "variant", "state", "attempts", "interruptions",
                                     "worker_id", "created_at", "started_at", "finished_at"]
    config = [f.name for f in train_pb2.TrainConfig.DESCRIPTOR.fields]
    results = [f.name for f in sweep_pb2.TrialResult.DESCRIPTOR.fields]
    # TrainConfig.lr, the peak lr, is peak_lr in its place; lr (deprecated) repeats it last.
    assert list(df.columns[10:]) == [("peak_lr" if c == "lr" else c) for c in config] + results + ["lr"]
    assert len(df) == 8 and df["trial_id"].is_monotonic_increasing
    assert str(df["finished_at"].dtype).startswith("datetime64") and str(df["finished_at"].dtype).endswith("UTC]")
    columns = ["trial_index", "variant", "state", "attempts", "interruptions", "worker_id", "final_val_loss",
               "best_val_loss", "final_train_loss", "diverged_step", "tokens_per_s", "error", "init_val_loss",
               "unigram_loss", "placement", "warmup_steps", "seed"]
    rows = stack.sql(f"SELECT {', '.join(columns)}, peak_lr, created_at, started_at, finished_at, config"
                     " FROM trials WHERE sweep_id = %s ORDER BY id", (finished_sweep,))
    # States: the SQL's SUCCEEDED, the export's enum name (TRIAL_SUCCEEDED) or the same without its prefix.
    df = df.assign(state=df["state"].str.replace("^TRIAL_", "", regex=True))
    assert_rows_equal(df, [r[:len(columns)] for r in rows], columns, "trials")
    for i, r in enumerate(rows):
        peak_lr, created, started, finished, config = r[len(columns):]
        assert df["peak_lr"].iloc[i] == peak_lr and df["lr"].iloc[i] == peak_lr
        assert (df["created_at"].iloc[i], df["started_at"].iloc[i], df["finished_at"].iloc[i]) == \
            (pd.Timestamp(created), pd.Timestamp(started), pd.Timestamp(finished))
        for key, value in config.items():  # the resolved config, field by field
            key = "peak_lr" if key == "lr" else key
            if key in df.columns and not isinstance(value, (dict, list)):
                assert df[key].iloc[i] == value, f"trial {i} {key}: {df[key].iloc[i]!r} != {value!r}"


def test_metrics_equal_the_trial_metrics_view(client, finished_sweep, stack, exported):
    df = client.metrics(finished_sweep)
    assert list(df.columns) == ["trial_id", "step"] + METRIC_FIELDS
    rows, cols = by_key(stack, f"SELECT m.trial_id, m.step, {', '.join('m.' + c for c in METRIC_FIELDS)}"
                               " FROM trial_metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id = %s"
                               " ORDER BY 1, 2", finished_sweep)
    assert len(df) == len(rows) >= 8 * 20
    assert_rows_equal(df, rows, cols, "metrics")
    narrow = client.metrics(finished_sweep, names=["val_loss", "train_loss"])
    assert list(narrow.columns) == ["trial_id", "step", "val_loss", "train_loss"]
    pd.testing.assert_frame_equal(narrow, df[list(narrow.columns)], check_like=False)


def test_grad_norms_equal_the_layer_grad_norms_table(client, finished_sweep, stack, exported):
    # The stored shape: a row per matrix, as layer_grad_norms holds them.
    df = client.grad_norms(finished_sweep)
    assert list(df.columns) == ["trial_id", "step", "layer", "matrix", "norm"]
    rows, cols = by_key(stack, "SELECT g.trial_id, g.step, g.layer, g.matrix, g.norm"
                               " FROM layer_grad_norms g JOIN trials t ON t.id = g.trial_id WHERE t.sweep_id = %s"
                               ' ORDER BY 1, 2, 3, g.matrix COLLATE "C"', finished_sweep)
    assert len(df) == len(rows) > 0
    assert set(df["matrix"]) == {"ffn.fc1", "ffn.fc2"}
    assert_rows_equal(df, rows, cols, "grad_norms")
    assert client.grad_norms(finished_sweep, since=df.attrs["cursor"]).empty
    # A cursor between the two matrices of one layer (one transaction wrote both: the same
    # x) ends with the matrix: the export after it starts with the layer's ffn.fc2.
    [(x, trial_id, step, layer, same_x)] = stack.sql(
        "SELECT a.export_xid::text, a.trial_id, a.step, a.layer, a.export_xid = b.export_xid"
        " FROM layer_grad_norms a JOIN layer_grad_norms b USING (trial_id, step, layer)"
        " JOIN trials t ON t.id = a.trial_id WHERE t.sweep_id = %s AND a.matrix = 'ffn.fc1'"
        " AND b.matrix = 'ffn.fc2' ORDER BY a.export_xid::text::bigint, 2, 3, 4 LIMIT 1", (finished_sweep,))
    assert same_x
    cursor = f"{finished_sweep}.grad_norms.{x}.{trial_id}.{step}.{layer}.ffn.fc1"
    after = client.grad_norms(finished_sweep, since=cursor)
    keys = list(zip(after["trial_id"], after["step"], after["layer"], after["matrix"]))
    assert (trial_id, step, layer, "ffn.fc2") in keys and (trial_id, step, layer, "ffn.fc1") not in keys
    [(later,)] = stack.sql(
        "SELECT count(*) FROM layer_grad_norms g JOIN trials t ON t.id = g.trial_id WHERE t.sweep_id = %s"
        ' AND (g.export_xid::text::bigint, g.trial_id, g.step, g.layer, g.matrix COLLATE "C")'
        " > (%s::bigint, %s, %s, %s, 'ffn.fc1')", (finished_sweep, x, trial_id, step, layer))
    assert len(after) == later


def test_diagnostics_equal_the_layer_diagnostics_table(client, finished_sweep, stack, exported):
    df = client.diagnostics(finished_sweep)
    fields = [f.name for f in train_pb2.LayerDiagnostics.DESCRIPTOR.fields if f.name != "layer"]
    assert list(df.columns) == ["trial_id", "step", "layer"] + fields
    rows, cols = by_key(stack, f"SELECT d.trial_id, d.step, d.layer, {', '.join('d.' + c for c in fields)}"
                               " FROM layer_diagnostics d JOIN trials t ON t.id = d.trial_id"
                               " WHERE t.sweep_id = %s ORDER BY 1, 2, 3", finished_sweep)
    assert len(df) == len(rows) > 0
    assert_rows_equal(df, rows, cols, "diagnostics")


def test_attempts_equal_get_trial(client, finished_sweep, stack, exported):
    df = client.attempts(finished_sweep)
    fields = [f.name for f in sweep_pb2.TrialAttempt.DESCRIPTOR.fields]
    assert list(df.columns) == ["trial_id"] + fields
    stub = client._stub  # GetTrial's attempts: the API's own list, trial by trial
    expected = []
    for trial_id in exported["trial_id"]:
        for a in stub.GetTrial(sweep_service_pb2.GetTrialRequest(trial_id=int(trial_id)), timeout=15).attempts:
            expected.append((int(trial_id), a.attempt, a.worker_id, pd.Timestamp(a.ended_at.ToDatetime(), tz="UTC"),
                             sweep_pb2.TrialState.Name(a.outcome).replace("TRIAL_", ""), a.reason, a.interruption))
    outcome = df["outcome"].str.replace("^TRIAL_", "", regex=True)
    got = list(zip(df["trial_id"], df["attempt"], df["worker_id"], df["ended_at"], outcome, df["reason"],
                   df["interruption"]))
    assert got == expected and len(got) >= 8


def test_export_errors_name_what_is_wrong(client, finished_sweep, exported):
    with pytest.raises(normsweep.InvalidArgument, match="nope"):
        list(client.export_chunks(finished_sweep, "nope"))
    with pytest.raises(normsweep.InvalidArgument, match="val_los"):
        client.metrics(finished_sweep, names=["val_los"])
    with pytest.raises(normsweep.InvalidArgument):
        client.metrics(finished_sweep, since="not-a-cursor")
    with pytest.raises(normsweep.NotFound):
        client.metrics(987654)


def test_a_running_sweep_exported_with_the_cursor(client, worker, stack, exported):
    sweep = client.submit(tiny_spec(name="cursor", base={"steps": 120, "eval_every": 20}))
    sweep_id = sweep["id"]
    parts, cursor = [], ""
    while True:
        final = client.sweep(sweep_id)["state"] != "RUNNING"  # read before the export: then it has everything
        part = client.metrics(sweep_id, since=cursor)
        parts.append(part)
        cursor = part.attrs["cursor"] or cursor
        if final:
            break
    assert len(parts) >= 3, "the sweep ended before the export could follow it"
    both = pd.concat(parts, ignore_index=True)
    # No row twice: a key comes again only with newer values (a step whose evaluation came later).
    assert not both.duplicated().any(), both[both.duplicated(keep=False)]
    last = both.drop_duplicates(["trial_id", "step"], keep="last").sort_values(["trial_id", "step"])
    rows, cols = by_key(stack, f"SELECT m.trial_id, m.step, {', '.join('m.' + c for c in METRIC_FIELDS)}"
                               " FROM trial_metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id = %s"
                               " ORDER BY 1, 2", sweep_id)
    assert len(last) == len(rows) == 8 * 121  # none missing (step 0 to 120)
    assert_rows_equal(last.reset_index(drop=True), rows, cols, "cursor export")


def test_follow_until_the_sweep_ends(client, worker, stack, exported):
    sweep = client.submit(tiny_spec(name="follow", placements=["pre"], base={"steps": 60}))
    df = client.metrics(sweep["id"], follow=True)
    assert client.sweep(sweep["id"])["state"] == "COMPLETED"
    rows, cols = by_key(stack, f"SELECT m.trial_id, m.step, {', '.join('m.' + c for c in METRIC_FIELDS)}"
                               " FROM trial_metrics m JOIN trials t ON t.id = m.trial_id WHERE t.sweep_id = %s"
                               " ORDER BY 1, 2", sweep["id"])
    assert len(df) == len(rows) == 4 * 61
    assert_rows_equal(df, rows, cols, "follow")


def export_sessions(stack) -> int:
    """The scheduler's database sessions that are inside an export's cursor."""
    rows = stack.sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     " AND pid <> pg_backend_pid() AND (query ILIKE '%%fetch%%' OR query ILIKE '%%declare%%')"
                     " AND state <> 'idle'")
    return rows[0][0]


def test_a_client_that_goes_away_mid_stream(client, worker, stack, exported):
    # Steps enough that no trial ends before the cancel below (400 steps of the
    # tiny model once finished first on a quiet machine: the sweep completed).
    sweep = client.submit(tiny_spec(name="gone", base={"steps": 1000000, "eval_every": 50}))
    # Closing the generator after the first chunk cancels the stream.
    chunks = client.export_chunks(sweep["id"], "metrics", follow=True)
    first = next(chunks)
    assert first.rows >= 0
    chunks.close()
    # A process killed while it reads a following stream.
    script = textwrap.dedent(f"""
        import os, signal, sys, normsweep
        c = normsweep.Client({stack.address!r})
        for chunk in c.export_chunks({sweep['id']}, "metrics", follow=True):
            print("chunk", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env=os.environ.copy())
    assert done.returncode == -signal.SIGKILL and "chunk" in done.stdout, done.stderr
    wait_for(lambda: export_sessions(stack) == 0, 30, "the exports' queries to stop")
    client.cancel(sweep["id"])
    run_to_end(client, sweep["id"])
    # The scheduler still exports, and what it exports is whole.
    df = client.metrics(sweep["id"])
    rows = stack.sql("SELECT count(*) FROM trial_metrics m JOIN trials t ON t.id = m.trial_id"
                     " WHERE t.sweep_id = %s", (sweep["id"],))
    assert len(df) == rows[0][0]
    assert np.array_equal(df["trial_id"].to_numpy(), np.sort(df["trial_id"].to_numpy()))
    assert client.sweep(sweep["id"])["state"] == "CANCELLED"
