#!/usr/bin/env python3
"""Reads a finished sweep, plots final validation loss against peak lr per warm-up
and placement into a PNG, and prints the LR sensitivity table.

    python3 python/examples/analyse_sweep.py SWEEP_ID [--scheduler HOST:PORT] [--out sweep.png]

Beside the PNG it writes NAME.points.csv: every point drawn, read back from
the figure's lines (placement, variant, warmup_steps, peak_lr,
mean_val_loss), so that what the picture shows can be checked against
Client.analysis(). The scheduler and token come from the same flags and
environment variables as the normsweep CLI.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import List, Optional, Sequence

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

import normsweep  # noqa: E402

# The report's palette (Okabe-Ito): warm-ups in order.
COLOURS = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#f0e442", "#000000"]


def draw(cells: pd.DataFrame) -> plt.Figure:
    """One panel per (variant, placement), a line per warm-up: mean final val loss against peak lr.

    Cells without a usable loss (every seed diverged) are left out.
    """
    usable = cells[cells["mean_val_loss"].notna()]
    panels = list(usable.groupby(["variant", "placement"], sort=False).groups)
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.5 * max(len(panels), 1), 3.6), squeeze=False,
                             sharey=True)
    for ax, (variant, placement) in zip(axes[0], panels):
        panel = usable[(usable["variant"] == variant) & (usable["placement"] == placement)]
        for i, (warmup, line) in enumerate(panel.groupby("warmup_steps")):
            line = line.sort_values("peak_lr")
            ax.plot(line["peak_lr"], line["mean_val_loss"], marker="o", color=COLOURS[i % len(COLOURS)],
                    label=f"warm-up {warmup}", gid=f"{placement}|{variant}|{warmup}")
        ax.set_xscale("log")
        ax.set_xlabel("peak lr")
        ax.set_title(f"{placement}" + (f" ({variant})" if variant else ""))
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("final val loss (mean over seeds)")
    fig.tight_layout()
    return fig


def plotted_points(fig: plt.Figure) -> pd.DataFrame:
    """The points the figure's lines draw, read from the lines themselves."""
    rows: List[dict] = []
    for ax in fig.axes:
        for line in ax.get_lines():
            placement, variant, warmup = line.get_gid().split("|")
            for x, y in zip(line.get_xdata(), line.get_ydata()):
                rows.append({"placement": placement, "variant": variant, "warmup_steps": int(warmup),
                             "peak_lr": float(x), "mean_val_loss": float(y)})
    return pd.DataFrame(rows, columns=["placement", "variant", "warmup_steps", "peak_lr", "mean_val_loss"])


def sensitivity_table(lr_sensitivity: pd.DataFrame) -> str:
    """The LR sensitivity table as text (Wortsman et al. 2023: lower is more robust)."""
    columns = ["variant", "placement", "warmup_steps", "lrs", "best_lr", "best_val_loss", "init_val_loss",
               "lr_sensitivity"]
    return lr_sensitivity[columns].to_string(index=False, float_format=lambda v: f"{v:.4g}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sweep_id", type=int)
    parser.add_argument("--scheduler", default=None, help="HOST:PORT (default $NORMSWEEP_SCHEDULER)")
    parser.add_argument("--out", default=None, help="the PNG (default sweep-ID.png)")
    args = parser.parse_args(argv)
    out = Path(args.out or f"sweep-{args.sweep_id}.png")
    try:
        with normsweep.Client(args.scheduler) as client:
            sweep = client.sweep(args.sweep_id)
            if sweep["state"] == "RUNNING":
                print(f"analyse_sweep: sweep {args.sweep_id} is still running; run it again when it has ended",
                      file=sys.stderr)
                return 2
            frames = client.analysis(args.sweep_id)
    except normsweep.Error as e:
        print(f"analyse_sweep: {e.details}", file=sys.stderr)
        return 2 if e.code.name in ("INVALID_ARGUMENT", "NOT_FOUND") else 1
    fig = draw(frames["cells"])
    fig.savefig(out, dpi=100)
    points = plotted_points(fig)
    points_path = out.with_suffix(".points.csv")
    points.to_csv(points_path, index=False, float_format="%.17g")
    print(f"sweep {args.sweep_id} ({sweep['name']}, {sweep['state'].lower()}): {len(points)} points in {out}, "
          f"listed in {points_path}")
    print()
    print("LR sensitivity (mean shortfall from the best loss over the peak lrs; lower is more robust)")
    print(sensitivity_table(frames["lr_sensitivity"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
