"""Every Client call against a real scheduler, worker and trainer, and its error paths."""

from __future__ import annotations

import math

import grpc
import pandas as pd
import pytest

import normsweep
from conftest import TINY_SPEC, run_to_end, tiny_spec
from normsweep.v1 import sweep_service_pb2


def test_submit_is_idempotent_and_validates(client, worker):
    first = client.submit(tiny_spec(name="idem"), request_id="idem-1")
    again = client.submit(tiny_spec(name="idem"), request_id="idem-1")
    assert first["created"] and not again["created"]
    assert again["id"] == first["id"] and first["trial_count"] == 8
    dry = client.submit(tiny_spec(name="dry", seeds=[0, 1]), validate_only=True)
    assert dry["trial_count"] == 16 and not dry["created"]
    run_to_end(client, first["id"])


def test_submit_a_yaml_file(client, worker, stack, tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("name: from-yaml\nplacements: [pre]\nwarmup_steps: [0]\npeak_lrs: [1e-3]\nseeds: [0]\n"
                    "extra_axes:\n  - field: qk_norm\n    values: [false, true]\n"
                    "base: {layers: 1, d_model: 16, heads: 2, seq_len: 16, batch_size: 4, steps: 10,"
                    " eval_every: 5, eval_batches: 1}\n")
    sweep = client.submit(str(path))
    assert sweep["trial_count"] == 2
    assert sweep["spec"]["extra_axes"] == [{"field": "qk_norm", "values": ["false", "true"]}]
    stored = stack.sql("SELECT spec->>'name', trial_count FROM sweeps WHERE id = %s", (sweep["id"],))
    assert stored == [("from-yaml", 2)]
    run_to_end(client, sweep["id"])


def test_sweep_and_sweeps_match_the_database(client, finished_sweep, stack):
    s = client.sweep(finished_sweep)
    assert s["id"] == finished_sweep and s["name"] == TINY_SPEC["name"] and s["state"] == "COMPLETED"
    assert s["spec"]["placements"] == ["post", "pre"]
    assert sum(s["counts"].values()) == 8 and s["counts"]["pending"] == 0 and s["counts"]["running"] == 0
    assert s["submitted_by"] == "" and s["cancelled_by"] == ""  # no token roles on this scheduler
    created, finished = stack.sql("SELECT created_at, finished_at FROM sweeps WHERE id = %s", (finished_sweep,))[0]
    assert s["created_at"] == pd.Timestamp(created) and s["finished_at"] == pd.Timestamp(finished)
    all_sweeps = client.sweeps()
    ids = stack.sql("SELECT id FROM sweeps ORDER BY id DESC")
    assert all_sweeps["id"].tolist() == [i for (i,) in ids]  # newest first, every one
    assert {"submitted_by", "cancelled_by", "succeeded", "trial_count"} <= set(all_sweeps.columns)
    row = all_sweeps.set_index("id").loc[finished_sweep]
    assert row["state"] == "COMPLETED" and row["succeeded"] + row["diverged"] == 8
    completed = client.sweeps(state="completed")
    assert finished_sweep in completed["id"].tolist() and set(completed["state"]) == {"COMPLETED"}
    with pytest.raises(normsweep.InvalidArgument, match="state: expected running"):
        client.sweeps(state="done")


def test_cancel(client, stack):
    # No worker takes these: a new sweep with priority below everything and
    # max_concurrent_trials 1 is cancelled at once.
    sweep = client.submit(tiny_spec(name="to-cancel", base={"steps": 2000}, max_concurrent_trials=1))
    cancelled = client.cancel(sweep["id"])
    assert cancelled["state"] == "CANCELLED"
    last = run_to_end(client, sweep["id"])
    assert last["state"] == "CANCELLED"
    states = dict(stack.sql("SELECT state, count(*) FROM trials WHERE sweep_id = %s GROUP BY state",
                            (sweep["id"],)))
    assert states.get("CANCELLED", 0) >= 7 and "PENDING" not in states and "RUNNING" not in states


def test_watch_reports_every_trial_until_the_end(client, worker, stack, capsys):
    sweep = client.submit(tiny_spec(name="watched", placements=["pre"]))
    events = list(client.watch(sweep["id"], progress=True))
    assert len(events[0]["trials"]) == 4  # the first event carries every trial
    assert {t["state"] for t in events[-1]["trials"]} <= {"SUCCEEDED", "DIVERGED"}
    assert events[-1]["state"] == "COMPLETED"
    done = sum(events[-1]["counts"][k] for k in ("succeeded", "diverged", "failed", "cancelled"))
    assert done == 4
    err = capsys.readouterr().err
    assert f"sweep {sweep['id']}" in err and "4/4" in err  # the tqdm bar


# variant_comparison's rows in the response's order: by placement, then the variants in the
# spec's expansion order (the baseline first), as db/sweep_analysis.cc reads them.
VARIANTS_ORDER = ("(SELECT min(trial_index) FROM trials t WHERE t.sweep_id = v.sweep_id"
                  " AND t.placement = v.placement AND t.variant = v.variant)")


def test_analysis_equals_the_views(client, finished_sweep, stack):
    frames = client.analysis(finished_sweep)
    assert set(frames) == {"cells", "placements", "lr_sensitivity", "lr_sensitivity_summary", "importance",
                           "boundary", "variants"}
    views = {
        "variants": ("variant_comparison v", f'placement COLLATE "C", {VARIANTS_ORDER}'),
        "cells": ("warmup_lr_grid_stats", "variant, placement, warmup_steps, peak_lr"),
        "lr_sensitivity": ("lr_sensitivity", "variant, placement, warmup_steps"),
        "lr_sensitivity_summary": ("lr_sensitivity_summary", "variant, placement"),
        "importance": ("grid_importance", "variant, placement"),
        "placements": ("placement_sensitivity", "variant, placement"),
    }
    for name, (view, order) in views.items():
        df = frames[name]
        # tolerance is the request's (0 = the view's 0.05), not a column of the view
        columns = [c for c in df.columns if not (name == "placements" and c == "tolerance")]
        rows = stack.sql(f"SELECT {', '.join(columns)} FROM {view} WHERE sweep_id = %s ORDER BY {order}",
                         (finished_sweep,))
        assert len(df) == len(rows) > 0, name
        assert_rows_equal(df, rows, columns, name)
    assert (frames["placements"]["tolerance"] == 0.05).all()
    assert len(frames["cells"]) == 8 and set(frames["cells"]["placement"]) == {"post", "pre"}
    assert frames["boundary"].empty  # a grid, not a boundary search
    assert "peak_lr" in frames["cells"].columns and frames["cells"]["peak_lr"].dtype == float
    # One variant: each placement is its own baseline.
    v = frames["variants"]
    assert v["placement"].tolist() == ["post", "pre"] and (v["variant"] == v["baseline_variant"]).all()
    assert (v["delta_best_val_loss"] == 0).all() and (v["best_lr_ratio"] == 1).all()


def test_variants_compared_qk_norm_off_and_on(client, worker, stack):
    # "Does QK-norm help Pre-LN?": a variant beside the placement's first variant, its baseline.
    sweep = client.submit(tiny_spec(name="qk-norm", placements=["pre"], warmup_steps=[0],
                                    extra_axes=[{"field": "qk_norm", "values": [False, True]}]))
    assert run_to_end(client, sweep["id"])["state"] == "COMPLETED"
    v = client.analysis(sweep["id"])["variants"]
    assert list(v.columns) == [f.name for f in sweep_service_pb2.VariantComparison.DESCRIPTOR.fields]
    rows = stack.sql(f"SELECT {', '.join(v.columns)} FROM variant_comparison v WHERE sweep_id = %s"
                     f" ORDER BY {VARIANTS_ORDER}", (sweep["id"],))
    assert len(v) == len(rows) == 2
    assert_rows_equal(v, rows, list(v.columns), "variants")
    base, other = v.iloc[0], v.iloc[1]
    assert "qk_norm" in other["variant"] and base["variant"] != other["variant"]
    assert (v["baseline_variant"] == base["variant"]).all() and (v["trials"] == 2).all()
    assert math.isclose(other["delta_best_val_loss"], other["best_val_loss"] - base["best_val_loss"], rel_tol=1e-12)
    assert math.isclose(other["best_lr_ratio"], other["best_lr"] / base["best_lr"], rel_tol=1e-12)


def assert_rows_equal(df: pd.DataFrame, rows, columns, what: str) -> None:
    """Each DataFrame row equals the SQL row: NULL = None/NaN/<NA>, floats to 1e-12 relative."""
    for i, sql_row in enumerate(rows):
        for col, expected in zip(columns, sql_row):
            got = df[col].iloc[i]
            if expected is None:
                assert got is None or pd.isna(got), f"{what} row {i} {col}: {got!r}, SQL NULL"
            elif isinstance(expected, float) or hasattr(expected, "as_tuple"):  # float, Decimal
                assert not pd.isna(got) and math.isclose(float(got), float(expected), rel_tol=1e-12), \
                    f"{what} row {i} {col}: {got!r} != {expected!r}"
            else:
                assert got == expected, f"{what} row {i} {col}: {got!r} != {expected!r}"


def test_validate_only_shows_the_grid_and_the_estimate(client, worker, stack):
    before = stack.sql("SELECT count(*) FROM sweeps")
    dry = client.submit(tiny_spec(name="dry-grid", seeds=[0, 1]), validate_only=True)
    assert not dry["created"] and dry["trial_count"] == 16 and dry["warnings"] == []
    axes = {a["name"]: a["values"] for a in dry["axes"]}
    assert axes["placement"] == ["post", "pre"] and axes["warmup_steps"] == ["0", "5"]
    assert axes["peak_lr"] == ["0.001", "0.01"] and axes["seed"] == ["0", "1"]
    assert [(g["placement"], g["trials"]) for g in dry["groups"]] == [("post", 8), ("pre", 8)]
    e = dry["estimate"]
    assert e["flops"] > 0 and e["slot_hours"] > 0 and e["core_hours"] >= e["slot_hours"]
    assert e["training_tokens"] == 16 * 20 * 4 * 16  # trials x steps x batch_size x seq_len
    assert e["slots"] >= 2 and e["wall_seconds"] is not None and e["wall_seconds"] > 0  # the worker's 2 slots
    assert e["throughput_source"]
    assert stack.sql("SELECT count(*) FROM sweeps") == before  # nothing stored


def test_a_sweep_with_warnings_is_stored_only_when_forced(client, stack):
    # A warm-up longer than the run: the peak lr is never reached.
    spec = tiny_spec(name="warned", placements=["pre"], warmup_steps=[40], base={"steps": 20})
    dry = client.submit(spec, validate_only=True)
    assert len(dry["warnings"]) == 1 and "warmup_steps" in dry["warnings"][0]
    before = stack.sql("SELECT count(*) FROM sweeps")
    with pytest.raises(normsweep.SweepHasWarnings) as e:
        client.submit(spec)
    assert e.value.code == grpc.StatusCode.FAILED_PRECONDITION and isinstance(e.value, normsweep.FailedPrecondition)
    assert "warmup_steps" in e.value.details and "force=True" in e.value.details
    assert e.value.warnings == dry["warnings"]
    assert stack.sql("SELECT count(*) FROM sweeps") == before
    forced = client.submit(spec, force=True)
    assert forced["created"] and forced["warnings"] == dry["warnings"]
    client.cancel(forced["id"])


def test_the_readmes_error_example_is_true(client):
    # python/README.md, "Errors": the example and the text it shows.
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit({"name": "x", "peak_lrs": [-1e-3], "placements": ["pre"]})
    assert (e.value.code, e.value.details) == (grpc.StatusCode.INVALID_ARGUMENT,
                                               "spec.peak_lrs[0]: lr: must be finite and > 0")


def test_a_bad_spec_field_is_invalid_argument_naming_it(client):
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit(tiny_spec(name="bad", peak_lrs=[-1e-3]))
    assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT and "peak_lrs" in e.value.details
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit(tiny_spec(name="bad", base={"placement_typo": "pre"}))
    # Refused before the call, as the CLI does, in the sweep file's names.
    assert e.value.details == "unknown field 'placement_typo' in base (TrainConfig)"  # nothing close
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit(tiny_spec(name="bad", base={"qkNrom": True}))
    assert e.value.details == "unknown field 'qkNrom' in base (TrainConfig); did you mean 'qk_norm'?"
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit(tiny_spec(name="bad", placements=["middle"]))
    assert "middle" in e.value.details


def test_axis_fields_in_base_are_refused_by_the_scheduler(client, stack):
    # Issue 34: base {lr: 5, ...} used to validate as one trial that ran pre at
    # lr 1e-3, warm-up 0, seed 0. The scheduler's one check answers every client.
    before = stack.sql("SELECT count(*) FROM sweeps")
    for field, value, axis in [("lr", 5, "spec.peak_lrs"), ("warmup_steps", 7, "spec.warmup_steps"),
                               ("seed", 3, "spec.seeds"), ("placement", "post", "spec.placements")]:
        with pytest.raises(normsweep.InvalidArgument) as e:
            client.submit(tiny_spec(name="axis-in-base", base={field: value}))
        assert e.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert f"spec.base.{field}: set by an axis" in e.value.details and axis in e.value.details
    with pytest.raises(normsweep.InvalidArgument) as e:
        client.submit(tiny_spec(name="extra-in-base", base={"qk_norm": True},
                                extra_axes=[{"field": "qk_norm", "values": [False, True]}]))
    assert "spec.base.qk_norm: set by spec.extra_axes[0]" in e.value.details
    assert stack.sql("SELECT count(*) FROM sweeps") == before


def test_overrides_reach_the_stored_sweep_with_zero_false_and_empty_values(client, stack):
    spec = tiny_spec(name="overrides", base={"qk_norm": True, "z_loss": 1e-4, "dropout": 0.1, "norm": "rmsnorm"})
    sweep = client.submit(spec, overrides={"qk_norm": False, "z_loss": 0, "dropout": 0, "norm": ""})
    base = sweep["spec"]["base"]
    assert not base.get("qk_norm") and not base.get("z_loss") and not base.get("dropout") and not base.get("norm")
    [(stored,)] = stack.sql("SELECT spec->'base' FROM sweeps WHERE id = %s", (sweep["id"],))
    assert stored["layers"] == 2 and not {"qk_norm", "qkNorm", "z_loss", "zLoss", "dropout", "norm"} & set(stored)
    client.cancel(sweep["id"])


@pytest.mark.parametrize("call", ["sweep", "cancel", "analysis", "watch"])
def test_an_unknown_sweep_is_not_found(client, call):
    with pytest.raises(normsweep.NotFound) as e:
        result = getattr(client, call)(987654)
        if call == "watch":
            next(result)
    assert e.value.code == grpc.StatusCode.NOT_FOUND


def test_analysis_of_a_boundary_search_equals_lr_boundary(client, worker, stack):
    sweep = client.submit(tiny_spec(name="boundary", placements=["post", "pre"], warmup_steps=[0], peak_lrs=[],
                                    boundary_search={"lr_min": 1e-3, "lr_max": 1e-1, "resolution": 4,
                                                     "initial_points": 2}))
    assert run_to_end(client, sweep["id"])["state"] == "COMPLETED"
    boundary = client.analysis(sweep["id"])["boundary"]
    columns = list(boundary.columns)
    rows = stack.sql(f"SELECT {', '.join(columns)} FROM lr_boundary WHERE sweep_id = %s ORDER BY line",
                     (sweep["id"],))
    assert len(boundary) == len(rows) == 2
    assert_rows_equal(boundary, rows, columns, "boundary")
    assert set(boundary["state"]) <= {"FOUND", "TRAINABLE_EVERYWHERE", "NOWHERE_TRAINABLE"}
    assert (boundary["trials"] == boundary["finished"]).all() and (boundary["trials"] >= 2).all()
