#!/usr/bin/python3
"""normsweep-train against PyTorch on the same config and machine, in one run.

The issue 2 performance target: on the bench config (Post-LN, 6 layers,
d_model 128, 4 heads, d_ff 256, seq 64, batch 32, Adam, 2 threads)
normsweep-train should train at >= 4x PyTorch's tokens/s. Prints tokens/s for
both, the ratio, the training FLOPs per token, the GFLOP/s each reaches, and
the machine's sgemm peak (tests/bench/sgemm_peak.cc) as the ceiling.

Both sides are timed the same way: wall-clock time over the steps after the
first --warmup steps (which are excluded), tokens = batch * seq_len per step.
Step times on a shared 2-core VM vary by +-30%, so the tokens/s of the median
step is printed too, and the two sides alternate for --rounds rounds (default
2); the best round of each side is reported, since other work only ever slows
a run down.
For normsweep-train the time is taken from when its step events arrive on the
pipe (it writes one JSON line per step); its own `mean_tokens_per_s` from the
final event is printed next to it.

Run from the repository root with Debian's python3 (python3-torch):
  /usr/bin/python3 tests/bench/trainer_vs_pytorch.py [--trainer build/trainer/normsweep-train]
  /usr/bin/python3 tests/bench/trainer_vs_pytorch.py --pytorch-only
It is a benchmark that prints figures, not a test; it exits non-zero only when
something could not be run.
"""

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "reference"))

TARGET_RATIO = 4.0


def parse_args():
    p = argparse.ArgumentParser(description="normsweep-train vs PyTorch tokens/s on one config")
    p.add_argument("--trainer", default=os.path.join(REPO, "build", "trainer", "normsweep-train"),
                   help="the normsweep-train binary (default: %(default)s)")
    p.add_argument("--sgemm-peak", default=None,
                   help="the sgemm_peak binary (default: build/tests/bench/sgemm_peak, else "
                        "compiled into a temporary directory with c++ and pkg-config openblas)")
    p.add_argument("--pytorch-only", action="store_true", help="skip normsweep-train")
    p.add_argument("--no-sgemm", action="store_true", help="skip the sgemm peak measurement")
    p.add_argument("--data", default=None,
                   help="a text file to train on (default: Python sources from /usr/lib/python3*/ "
                        "concatenated into a temporary file of about --data-mb MB)")
    p.add_argument("--data-mb", type=float, default=4.0)
    p.add_argument("--placement", default="post", choices=["post", "pre"])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--d-ff", type=int, default=256)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--pytorch-steps", type=int, default=40, help="including the warm-up steps")
    p.add_argument("--trainer-steps", type=int, default=100, help="including the warm-up steps")
    p.add_argument("--warmup", type=int, default=5, help="first steps excluded from timing")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=2,
                   help="alternate PyTorch and normsweep-train this many times and report the "
                        "best round of each (the machine is shared; default %(default)s)")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    for name in ("pytorch_steps", "trainer_steps"):
        if getattr(args, name) <= args.warmup:
            p.error(f"--{name.replace('_', '-')} must be larger than --warmup ({args.warmup})")
    return args


def make_corpus(megabytes):
    """Concatenated Python sources from the system library: real text, always present."""
    files = sorted(glob.glob("/usr/lib/python3*/*.py"))
    if not files:
        raise SystemExit("error: no /usr/lib/python3*/*.py to build a corpus from; pass --data FILE")
    want = int(megabytes * 1e6)
    chunks, size = [], 0
    for path in files:
        with open(path, "rb") as f:
            chunks.append(f.read())
        size += len(chunks[-1])
        if size >= want:
            break
    fd, path = tempfile.mkstemp(prefix="normsweep-bench-", suffix=".txt")
    with os.fdopen(fd, "wb") as f:
        f.write(b"".join(chunks)[:want])
    return path


def loadavg():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


# ---------------------------------------------------------------- PyTorch

def run_pytorch(args, cfg, data_path):
    import numpy as np
    import torch
    from model import TransformerLM

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    data = np.fromfile(data_path, dtype=np.uint8)
    rng = np.random.default_rng(args.seed)
    model = TransformerLM(cfg)  # float32, Xavier-uniform init
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    B, T = args.batch_size, args.seq_len
    offsets_in_window = np.arange(T + 1)

    losses, times = [], []
    for step in range(args.pytorch_steps):
        t0 = time.perf_counter()
        starts = rng.integers(0, len(data) - T - 1, size=B)
        windows = torch.from_numpy(data[starts[:, None] + offsets_in_window].astype(np.int64))
        opt.zero_grad(set_to_none=True)
        _, loss = model(windows[:, :-1], windows[:, 1:])
        loss.backward()
        opt.step()
        losses.append(loss.item())  # .item() also ends the step for timing
        times.append(time.perf_counter() - t0)
    timed = times[args.warmup:]
    tokens_per_s = len(timed) * B * T / sum(timed)
    return {"tokens_per_s": tokens_per_s, "median_step_tokens_per_s": B * T / statistics.median(timed),
            "first_loss": losses[0], "last_loss": losses[-1],
            "timed_steps": len(timed), "seconds": sum(timed)}


# ---------------------------------------------------------------- normsweep-train

def run_trainer(args, data_path):
    cmd = [args.trainer, "train", "--placement", args.placement, "--layers", str(args.layers),
           "--d-model", str(args.d_model), "--heads", str(args.heads), "--d-ff", str(args.d_ff),
           "--seq-len", str(args.seq_len), "--batch-size", str(args.batch_size),
           "--steps", str(args.trainer_steps), "--lr", repr(args.lr), "--threads", str(args.threads),
           "--eval-every", "0", "--seed", str(args.seed), "--data", data_path]
    print("  $ " + " ".join(cmd), flush=True)
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0)
    steps, final, other = [], None, []  # steps: (arrival time, event)
    for raw in proc.stdout:
        now = time.perf_counter()
        line = raw.decode("utf-8", "replace").strip()
        if not line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            other.append(line)
            continue
        if event.get("type") == "step":
            steps.append((now, event))
        elif event.get("type") == "final":
            final = event
    stderr = proc.stderr.read().decode("utf-8", "replace")
    rc = proc.wait()
    wall = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"error: normsweep-train exited with status {rc}\n{stderr.strip()}")
    if len(steps) <= args.warmup:
        raise SystemExit(f"error: normsweep-train wrote {len(steps)} step events, expected "
                         f"{args.trainer_steps}\n{stderr.strip()}")
    if final is None:
        print("  warning: normsweep-train wrote no final event", flush=True)
    elif final.get("outcome", final.get("status", "SUCCEEDED")) != "SUCCEEDED":
        print(f"  warning: normsweep-train final event: {json.dumps(final)}", flush=True)

    tokens_per_step = args.batch_size * args.seq_len
    # Wall time between the last warm-up step's event and the last step's event.
    span = steps[-1][0] - steps[args.warmup - 1][0] if args.warmup > 0 else steps[-1][0] - start
    timed_steps = len(steps) - args.warmup
    arrival_tps = timed_steps * tokens_per_step / span if span > 0 else float("inf")
    gaps = [b[0] - a[0] for a, b in zip(steps[max(args.warmup - 1, 0):], steps[args.warmup:])]
    median_gap = statistics.median(gaps) if gaps else 0.0
    reported = [e.get("tokens_per_s") for _, e in steps[args.warmup:]]
    # Per-step rates combine as a harmonic mean (equal tokens per step).
    step_tps = (len(reported) / sum(1.0 / r for r in reported)
                if all(isinstance(r, (int, float)) and r > 0 for r in reported) else None)
    mean_tps = final.get("mean_tokens_per_s") if final else None

    # If the trainer's stdout was block-buffered, arrival times bunch up and
    # say nothing: then fall back to its own figures.
    buffered = span < 0.5 * (wall * timed_steps / len(steps))
    median_tps = None
    if not buffered:
        median_tps = tokens_per_step / median_gap if median_gap > 0 else None
        tps, source = arrival_tps, f"wall time of steps {args.warmup + 1}..{len(steps)} (event arrival)"
    elif step_tps:
        tps, source = step_tps, "harmonic mean of per-step tokens_per_s after warm-up (stdout buffered)"
    elif mean_tps:
        tps, source = mean_tps, "final mean_tokens_per_s (stdout buffered)"
    else:
        tps, source = len(steps) * tokens_per_step / wall, "whole-process wall time (incl. start-up)"
    return {"tokens_per_s": tps, "source": source, "median_step_tokens_per_s": median_tps,
            "arrival_tokens_per_s": arrival_tps,
            "step_events_tokens_per_s": step_tps, "final_mean_tokens_per_s": mean_tps,
            "process_wall_s": wall, "first_loss": steps[0][1].get("train_loss"),
            "last_loss": steps[-1][1].get("train_loss"), "final_event": final,
            "unparsed_lines": len(other)}


# ---------------------------------------------------------------- sgemm peak

def find_or_build_sgemm_peak(args, tmpdir):
    candidates = [args.sgemm_peak] if args.sgemm_peak else [
        os.path.join(REPO, "build", "tests", "bench", "sgemm_peak"),
        os.path.join(REPO, "build-ref", "tests", "bench", "sgemm_peak")]
    for path in candidates:
        if path and os.access(path, os.X_OK):
            return path
    if args.sgemm_peak:
        raise SystemExit(f"error: --sgemm-peak {args.sgemm_peak} is not an executable")
    cxx = shutil.which("c++") or shutil.which("g++")
    if not cxx:
        return None
    # The OpenMP build of OpenBLAS is what the trainer links (top-level
    # CMakeLists.txt); pkg-config's default is the pthread build.
    omp_lib = glob.glob("/usr/lib/*-linux-gnu/openblas-openmp/libopenblas.so")
    omp_inc = glob.glob("/usr/include/*-linux-gnu/openblas-openmp/cblas.h")
    if omp_lib and omp_inc:
        lib_dir = os.path.dirname(omp_lib[0])
        flags = [f"-I{os.path.dirname(omp_inc[0])}", f"-L{lib_dir}", f"-Wl,-rpath,{lib_dir}",
                 "-lopenblas"]
    else:
        res = subprocess.run(["pkg-config", "--cflags", "--libs", "openblas"], capture_output=True,
                             text=True)
        if res.returncode != 0:
            return None
        flags = res.stdout.split()
    out = os.path.join(tmpdir, "sgemm_peak")
    src = os.path.join(REPO, "tests", "bench", "sgemm_peak.cc")
    build = subprocess.run([cxx, "-O2", "-std=c++17", src, "-o", out] + flags,
                           capture_output=True, text=True)
    return out if build.returncode == 0 else None


def run_sgemm_peak(path, threads):
    res = subprocess.run([path, "--threads", f"1,{threads}" if threads != 1 else "1"],
                         capture_output=True, text=True)
    if res.returncode != 0:
        raise SystemExit(f"error: {path} failed: {res.stderr.strip()}")
    lines = res.stdout.strip().splitlines()
    for line in lines[:-1]:
        print("  " + line)
    return json.loads(lines[-1])


# ---------------------------------------------------------------- main

def main():
    args = parse_args()
    from model import ModelConfig, matmul_params, training_flops_per_token

    if not args.pytorch_only and not os.access(args.trainer, os.X_OK):
        raise SystemExit(
            f"error: the trainer binary {args.trainer} does not exist or is not executable.\n"
            "Build it (cmake --build build --target normsweep-train), pass --trainer PATH, "
            "or run with --pytorch-only to measure the PyTorch side alone.")
    cfg = ModelConfig(placement=args.placement, layers=args.layers, d_model=args.d_model,
                      heads=args.heads, d_ff=args.d_ff, seq_len=args.seq_len)
    cfg.validate()
    flops_per_token = training_flops_per_token(cfg)
    n_matmul = matmul_params(cfg)

    tmpdir = tempfile.mkdtemp(prefix="normsweep-bench-")
    data_path = args.data or make_corpus(args.data_mb)
    try:
        print(f"config: {args.placement}-LN, {args.layers} layers, d_model {args.d_model}, "
              f"{args.heads} heads, d_ff {args.d_ff}, seq {args.seq_len}, batch {args.batch_size}, "
              f"Adam lr {args.lr}, {args.threads} threads; data {data_path} "
              f"({os.path.getsize(data_path)} bytes); first {args.warmup} steps not timed")
        print(f"load average before: {loadavg():.2f} (other work on the machine skews every figure)")

        pts, trs = [], []
        for r in range(args.rounds):
            round_tag = f" (round {r + 1} of {args.rounds})" if args.rounds > 1 else ""
            print(f"\n[a] PyTorch {__import__('torch').__version__}, {args.pytorch_steps} steps"
                  f"{round_tag}", flush=True)
            pt = run_pytorch(args, cfg, data_path)
            pts.append(pt)
            print(f"  {pt['tokens_per_s']:.0f} tokens/s over {pt['timed_steps']} steps "
                  f"({pt['seconds']:.1f} s; median step {pt['median_step_tokens_per_s']:.0f} tokens/s); "
                  f"loss {pt['first_loss']:.3f} -> {pt['last_loss']:.3f}; load {loadavg():.2f}")
            if args.pytorch_only:
                continue
            print(f"\n[b] normsweep-train, {args.trainer_steps} steps{round_tag}", flush=True)
            tr = run_trainer(args, data_path)
            trs.append(tr)
            print(f"  {tr['tokens_per_s']:.0f} tokens/s, from {tr['source']}")
            extra = [f"final mean_tokens_per_s {tr['final_mean_tokens_per_s']}"]
            if tr["median_step_tokens_per_s"]:
                extra.insert(0, f"median step {tr['median_step_tokens_per_s']:.0f}")
            if tr["step_events_tokens_per_s"]:
                extra.append(f"step events (harmonic mean) {tr['step_events_tokens_per_s']:.0f}")
            extra.append(f"process wall {tr['process_wall_s']:.1f} s")
            print("  (" + "; ".join(extra) + ")")
            print(f"  loss {tr['first_loss']} -> {tr['last_loss']}; load {loadavg():.2f}")
        # Other work on a shared machine only ever slows a run down: the best
        # round of each side is the least disturbed one.
        pt = max(pts, key=lambda x: x["tokens_per_s"])
        tr = max(trs, key=lambda x: x["tokens_per_s"]) if trs else None
        if args.rounds > 1:
            print(f"\nbest of {args.rounds} rounds: PyTorch "
                  f"{', '.join('%.0f' % x['tokens_per_s'] for x in pts)} tokens/s"
                  + (f"; normsweep-train {', '.join('%.0f' % x['tokens_per_s'] for x in trs)} tokens/s"
                     if trs else ""))

        peak = None
        if not args.no_sgemm:
            print("\n[c] sgemm peak (OpenBLAS)", flush=True)
            path = find_or_build_sgemm_peak(args, tmpdir)
            if path is None:
                print("  sgemm_peak not built and could not be compiled; skipped")
            else:
                peak = run_sgemm_peak(path, args.threads)
        print(f"load average after: {loadavg():.2f}")

        print("\n== summary ==")
        print(f"training FLOPs per token = 6 * N_matmul + 12 * layers * seq_len * d_model\n"
              f"  = 6 * {n_matmul} + 12 * {args.layers} * {args.seq_len} * {args.d_model} "
              f"= {flops_per_token / 1e6:.3f} MFLOP/token\n"
              f"  (N_matmul = layers * (4 d^2 + 2 d d_ff) + 256 d: qkv, proj, fc1, fc2, head;\n"
              f"   attention q k^T and att v counted over the full T x T scores, as dense GEMMs "
              f"compute them; embeddings, LayerNorm, softmax, Adam not counted)")
        gflops_pt = pt["tokens_per_s"] * flops_per_token / 1e9
        peak_t = peak["best_gflops"].get(str(args.threads)) if peak else None
        peak_shapes = peak.get("trainer_shapes_gflops", {}).get(str(args.threads)) if peak else None

        def pct(g):
            if not peak_t:
                return ""
            s = f", {100 * g / peak_t:.0f}% of the {args.threads}-thread sgemm peak"
            return s + (f" ({100 * g / peak_shapes:.0f}% of its best on the trainer's shapes)"
                        if peak_shapes else "")

        print(f"PyTorch          {pt['tokens_per_s']:9.0f} tokens/s  {gflops_pt:7.1f} GFLOP/s{pct(gflops_pt)}")
        result = {"type": "bench", "config": vars(args), "flops_per_token": flops_per_token,
                  "pytorch_tokens_per_s": pt["tokens_per_s"],
                  "pytorch_median_step_tokens_per_s": pt["median_step_tokens_per_s"], "pytorch_gflops": gflops_pt,
                  "sgemm_peak": peak}
        if tr:
            gflops_tr = tr["tokens_per_s"] * flops_per_token / 1e9
            ratio = tr["tokens_per_s"] / pt["tokens_per_s"]
            print(f"normsweep-train  {tr['tokens_per_s']:9.0f} tokens/s  {gflops_tr:7.1f} GFLOP/s"
                  f"{pct(gflops_tr)}")
            print(f"ratio normsweep-train / PyTorch = {ratio:.2f}x (target >= {TARGET_RATIO:.0f}x: "
                  f"{'met' if ratio >= TARGET_RATIO else 'NOT met'})")
            if tr["median_step_tokens_per_s"]:
                print(f"ratio of median steps = "
                      f"{tr['median_step_tokens_per_s'] / pt['median_step_tokens_per_s']:.2f}x")
            result.update({"trainer_tokens_per_s": tr["tokens_per_s"],
                           "trainer_median_step_tokens_per_s": tr["median_step_tokens_per_s"],
                           "trainer_gflops": gflops_tr,
                           "trainer_tokens_per_s_source": tr["source"],
                           "trainer_final_mean_tokens_per_s": tr["final_mean_tokens_per_s"],
                           "ratio": ratio})
        if peak:
            print(f"sgemm peak: {peak['best_gflops']} GFLOP/s by thread count "
                  f"(best on the trainer's shapes: {peak.get('trainer_shapes_gflops')})")
        print(json.dumps(result))
    finally:
        if args.data is None:
            os.unlink(data_path)
        shutil.rmtree(tmpdir, ignore_errors=True)


if __name__ == "__main__":
    main()
