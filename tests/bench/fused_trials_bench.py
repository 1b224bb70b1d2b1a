#!/usr/bin/env python3
"""Fused trials (issue 26): aggregate trials per hour on the paper sweep's model.

The reference is today's local stack: nproc slots of one thread, one solo
trainer process per trial (`solo xN`). Against it, the same trials fused K at
a time in one process with nproc threads (`fused K`), for each K asked. Every
side trains the same trials (the paper sweep's model and settings, lr and
warm-up varying as in its grid; --steps shortens them, keeping the eval ratio)
and the sides alternate within each round. Prints each round's figures, then
min / median / max of trials per hour and of the ratio to the reference,
with the machine and its load.

  tests/bench/fused_trials_bench.py [--trainer build/trainer/normsweep-train]
      [--corpus .local/corpus.txt] [--trials 8] [--ks 1,2,4,8] [--rounds 3] [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_machine import machine, uptime  # noqa: E402

LRS = [3e-4, 1e-3, 3e-3, 1e-2, 3e-2]
WARMUPS = [0, 100, 400]


def trial_configs(n: int, steps: int, corpus: str, threads: int) -> list[dict]:
    configs = []
    for i in range(n):
        configs.append({
            "placement": ["post", "pre"][i % 2], "layers": 6, "d_model": 64, "heads": 4, "d_ff": 128,
            "seq_len": 64, "batch_size": 32, "steps": steps, "optimizer": "adam", "beta1": 0.9,
            "beta2": 0.98, "schedule": "constant", "eval_every": max(1, steps // 4), "eval_batches": 16,
            "data_file": corpus, "lr": LRS[i % len(LRS)], "warmup_steps": WARMUPS[i % len(WARMUPS)] * steps // 400,
            "seed": i % 2, "threads": threads})
    return configs


def write(dirname: str, name: str, config: dict) -> str:
    path = os.path.join(dirname, name)
    with open(path, "w") as f:
        json.dump(config, f)
    return path


def check_events(out: bytes, expected: int) -> None:
    finals = [e for e in map(json.loads, out.decode().splitlines()) if e.get("type") == "final"]
    bad = [f for f in finals if f.get("outcome") == "FAILED"]
    if len(finals) != expected or bad:
        sys.exit(f"error: expected {expected} final events without FAILED, got {finals[:2]}")


def run_solo(trainer: str, configs: list[dict], tmp: str, slots: int) -> float:
    """Each trial its own one-thread process, `slots` at a time."""
    paths = [write(tmp, f"solo{i}.json", dict(c, threads=1)) for i, c in enumerate(configs)]
    start = time.monotonic()
    queue = list(paths)
    running: list[subprocess.Popen] = []
    while queue or running:
        while queue and len(running) < slots:
            running.append(subprocess.Popen([trainer, "train", "--config", queue.pop(0)],
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))
        p = running.pop(0)
        out, _ = p.communicate()
        check_events(out, 1)
    return time.monotonic() - start


def run_fused(trainer: str, configs: list[dict], tmp: str, k: int, threads: int) -> float:
    """The trials K at a time, one process of `threads` threads per group."""
    start = time.monotonic()
    for g in range(0, len(configs), k):
        group = configs[g:g + k]
        paths = [write(tmp, f"fused{g + i}.json", dict(c, threads=threads)) for i, c in enumerate(group)]
        # Fused trials share the shape: one placement per group.
        out = subprocess.run([trainer, "train", "--config", ",".join(paths)], capture_output=True, check=False)
        if out.returncode != 0:
            sys.exit(f"error: fused run failed: {out.stderr.decode()[-400:]}")
        check_events(out.stdout, len(group))
    return time.monotonic() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainer", default="build/trainer/normsweep-train")
    ap.add_argument("--corpus", default=".local/corpus.txt")
    ap.add_argument("--trials", type=int, default=8)
    ap.add_argument("--ks", default="1,2,4,8")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    args = ap.parse_args()
    nproc = os.cpu_count() or 1
    ks = [int(k) for k in args.ks.split(",")]
    corpus = os.path.abspath(args.corpus)
    # One placement for all: fused trials must share the shape and norms.
    configs = [dict(c, placement="post") for c in trial_configs(args.trials, args.steps, corpus, nproc)]
    print(machine())
    print(f"start: {uptime()}")
    print(f"{args.trials} trials of the paper sweep's model, {args.steps} steps each; "
          f"reference: {nproc} one-thread solo processes at a time")
    per_hour: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(1, args.rounds + 1):
            base = run_solo(args.trainer, configs, tmp, nproc)
            per_hour.setdefault("solo", []).append(args.trials * 3600 / base)
            line = [f"round {r}: solo x{nproc} {base:.1f} s"]
            for k in ks:
                t = run_fused(args.trainer, configs, tmp, k, nproc)
                name = f"fused {k}"
                per_hour.setdefault(name, []).append(args.trials * 3600 / t)
                ratios.setdefault(name, []).append(base / t)
                line.append(f"{name} {t:.1f} s ({base / t:.2f}x)")
            print(", ".join(line) + f"; load {open('/proc/loadavg').read().split()[0]}", flush=True)
    print(f"end: {uptime()}")
    for name, v in per_hour.items():
        s = f"{name:>9}: trials/hour min {min(v):.0f} median {statistics.median(v):.0f} max {max(v):.0f}"
        if name in ratios:
            q = ratios[name]
            s += f"; vs solo min {min(q):.2f}x median {statistics.median(q):.2f}x max {max(q):.2f}x"
        print(s)


if __name__ == "__main__":
    main()
