"""python/examples/analyse_sweep.py on a real finished sweep: the points it plots are
the analysis rows, and it prints the LR sensitivity table."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pandas as pd


def test_analyse_sweep_plots_the_analysis_rows(client, finished_sweep, stack, tmp_path):
    script = stack.src / "python" / "examples" / "analyse_sweep.py"
    png = tmp_path / "sweep.png"
    done = subprocess.run([sys.executable, str(script), str(finished_sweep), "--scheduler", stack.address,
                           "--out", str(png)], capture_output=True, text=True, timeout=600, env=os.environ.copy())
    assert done.returncode == 0, done.stderr
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    points = pd.read_csv(tmp_path / "sweep.points.csv", keep_default_na=False, float_precision="round_trip")
    cells = client.analysis(finished_sweep)["cells"]
    usable = cells[cells["mean_val_loss"].notna()]
    key = ["placement", "variant", "warmup_steps", "peak_lr"]
    expected = usable.sort_values(key)[key + ["mean_val_loss"]].reset_index(drop=True)
    got = points.sort_values(key).reset_index(drop=True)
    assert len(got) == len(expected) > 0
    for (_, g), (_, e) in zip(got.iterrows(), expected.iterrows()):
        assert (g["placement"], g["variant"], g["warmup_steps"]) == (e["placement"], e["variant"], e["warmup_steps"])
        assert g["peak_lr"] == e["peak_lr"] and g["mean_val_loss"] == e["mean_val_loss"]  # %.17g: exact
    # The LR sensitivity table: a line per (placement, warm-up) with its figure.
    lines = done.stdout.splitlines()
    header = lines.index(next(l for l in lines if l.startswith("LR sensitivity")))
    table = lines[header + 1:]
    assert table[0].split() == ["variant", "placement", "warmup_steps", "lrs", "best_lr", "best_val_loss",
                                "init_val_loss", "lr_sensitivity"]
    sens = client.analysis(finished_sweep)["lr_sensitivity"]
    assert len(table) - 1 == len(sens) > 0
    for row, (_, s) in zip(table[1:], sens.iterrows()):
        fields = row.split()  # variant is "" here: no extra axes
        assert fields[0] == s["placement"] and int(fields[1]) == s["warmup_steps"]
        assert math.isclose(float(fields[-1]), s["lr_sensitivity"], rel_tol=1e-3)


def test_analyse_sweep_of_an_unknown_sweep(stack):
    script = stack.src / "python" / "examples" / "analyse_sweep.py"
    done = subprocess.run([sys.executable, str(script), "987654", "--scheduler", stack.address,
                           "--out", "/nonexistent/x.png"], capture_output=True, text=True, timeout=600,
                          env=os.environ.copy())
    assert done.returncode == 2 and "987654" in done.stderr, done.stderr
