#!/usr/bin/python3
"""Two normsweep-train binaries (or one binary under two environments) on the
same training run, in alternating rounds, on the CPU: tokens/s of each, and
the ratio B / A.

  tests/bench/trainer_ab.py [--rounds 5] [--steps 25] [--warmup 5] [--threads 2]
      [--max-load 2] [--a-env NAME=VALUE] [--b-env NAME=VALUE] A_TRAINER B_TRAINER [-- trainer flags]

The run is the trainer's (and a sweep's) default model: Post-LN, 6 layers,
d_model 128, 4 heads, d_ff 512, seq 64, batch 32, Adam, on the built-in
translate task, no evaluation. tokens/s = batch * seq_len * (steps - warmup)
over the time between the step events after the first --warmup steps and the
last (the trainer writes one JSON line per step, with elapsed_s); tokens
per CPU-second divides the same tokens by the user + system CPU time the
trainer spent between those two events (from /proc), which moves less than
wall time when other work takes a core.

Rounds alternate A B, B A, ... so that both see the same minutes of a shared
machine. Before each round the 1-minute load average is read: above
--max-load the round is reported "not measured" and retried after
--retry-wait seconds, up to --max-wait seconds in all. Prints the machine
(nproc, CPU model, its avx2/avx512f flags, uptime before and after), every
round, then min/median/max per side and the ratio of the medians. E.g. the
dispatched kernels against the fallback in one binary:

  tests/bench/trainer_ab.py --a-env NORMSWEEP_CPU_KERNELS=baseline build/trainer/normsweep-train \\
      build/trainer/normsweep-train

With tests/bench/fma_peak built (or --fma-peak PATH), it also prints each
side's GFLOP/s (training FLOPs per token of the resolved config, PaLM's count
as tests/reference/model.py's training_flops_per_token: 6 x the matmul
weights + 12 x layers x seq_len x d_model) and its share of the machine's FMA
limit at the width of the matrix product that side ran (the final event's
"kernels": our packed avx512 kernel or OpenBLAS's SkylakeX/Cooperlake ones
against the 512-bit limit, packed avx2 or Haswell/Zen ones against the
256-bit one), with --threads threads.

With --compare-bits it compares instead of timing: A and B on the same
training runs must agree bit for bit (a refactoring's before and after).
Every placement x qk_norm x norm x z_loss x positions x threads 1 and 2 x
each CPU kernel variant this machine runs, with dropout 0.1, 20 steps of a
small model (4 layers, d_model 32), then each placement on the default
model: every event line with its timings (elapsed_s, [mean_]tokens_per_s) and the
"kernels" text dropped, and a SHA-256 of each tensor of the final
checkpoint (weights and optimizer moments). Prints a table of the runs and
exits non-zero on any difference:

  tests/bench/trainer_ab.py --compare-bits /tmp/before/normsweep-train build/trainer/normsweep-train

A program that prints figures, not a test; it exits non-zero only when
something could not be run.
"""

import argparse
import hashlib
import itertools
import json
import os
import struct
import tempfile
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_args():
    p = argparse.ArgumentParser(description="normsweep-train A/B tokens/s on the CPU")
    p.add_argument("a", help="trainer A (the reference)")
    p.add_argument("b", help="trainer B")
    p.add_argument("trainer_flags", nargs="*", help="extra flags for both (after --)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=25, help="including the warm-up steps")
    p.add_argument("--warmup", type=int, default=5, help="first steps excluded from timing")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-load", type=float, default=2.0, help="1-minute load average above which a round waits")
    p.add_argument("--retry-wait", type=float, default=30.0)
    p.add_argument("--max-wait", type=float, default=1800.0, help="seconds of waiting for calm in all")
    p.add_argument("--a-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--b-env", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--compare-bits", action="store_true",
                   help="check that A and B train bit for bit alike instead of timing them")
    p.add_argument("--fma-peak", default=os.path.join(REPO, "build", "tests", "bench", "fma_peak"),
                   help="the fma_peak binary (tests/bench/fma_peak.cc); absent: no share printed")
    args = p.parse_args()
    if args.rounds < 1 or args.steps <= args.warmup or args.warmup < 1:
        p.error("need --rounds >= 1 and --steps > --warmup >= 1")
    for path in (args.a, args.b):
        if not os.access(path, os.X_OK):
            p.error(f"{path}: not an executable")
    return args


def environment(pairs):
    env = dict(os.environ)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise SystemExit(f"error: --a-env/--b-env takes NAME=VALUE, not {pair!r}")
        env[name] = value
    return env


def load_average():
    with open("/proc/loadavg") as f:
        return float(f.read().split()[0])


def uptime():
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def machine():
    model, flags = "?", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and model == "?":
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    wanted = ["avx2", "fma", "avx512f", "avx512vl", "avx512bw", "avx512dq"]
    have = " ".join(f"{f}={'yes' if f in flags else 'no'}" for f in wanted)
    return f"nproc {os.cpu_count()}, CPU {model}, {have}"


def cpu_seconds(pid):
    """User + system CPU time of a running process, all its threads (from /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def flops_per_token(trainer, env, args):
    """Training FLOPs per token of the run's resolved config (--print-config)."""
    out = subprocess.run([trainer, "train", "--lr", "1e-3", "--print-config"] + args.trainer_flags, env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"error: {trainer} --print-config exited {out.returncode}: {out.stderr.strip()}")
    c = json.loads(out.stdout)
    d, layers = c["d_model"], c["layers"]
    matmul = layers * (4 * d * d + 2 * d * c["d_ff"]) + 256 * d  # qkv, proj, fc1, fc2; the 256-token head
    return 6 * matmul + 12 * layers * c["seq_len"] * d


def gemm_bits(kernels):
    """The vector width of the matrix product in a final event's kernels
    ("avx2, gemm openblas (core Cooperlake)"): where nearly all the FLOPs go,
    so the FMA limit to measure against. None when unknown."""
    gemm = kernels.partition("gemm ")[2].lower()
    if gemm.startswith("packed avx512"):
        return 512
    if gemm.startswith("packed avx2"):
        return 256
    core = gemm.partition("(core ")[2].split(",")[0].rstrip(")").strip()
    if core in ("skylakex", "cooperlake", "sapphirerapids"):
        return 512
    if core in ("haswell", "zen", "excavator"):
        return 256
    return None


def fma_limits(path, threads):
    """{bits: GFLOP/s} of fma_peak with this many threads; {} without the binary."""
    if not os.access(path, os.X_OK):
        return {}
    out = subprocess.run([path, "--threads", str(threads)], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"error: {path} exited {out.returncode}: {out.stderr.strip()}")
    for line in out.stdout.splitlines():
        print(f"  fma_peak: {line}")
    gflops = json.loads(out.stdout.splitlines()[-1])["gflops"]
    return {int(bits): by_threads[str(threads)] for bits, by_threads in gflops.items()}


def run_once(trainer, env, args):
    """(tokens per second, tokens per CPU-second, stderr, the final event's kernels) over the timed steps."""
    cmd = [trainer, "train", "--steps", str(args.steps), "--threads", str(args.threads), "--lr", "1e-3",
           "--eval-every", "0", "--eval-batches", "1", "--seed", "0"] + args.trainer_flags
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    steps, cpu, final = {}, {}, None
    for line in proc.stdout:  # one JSON line per event, written as it happens
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("type") == "step":
            steps[event["step"]] = event["elapsed_s"]
            if event["step"] in (args.warmup, args.steps):
                cpu[event["step"]] = cpu_seconds(proc.pid)
        elif event.get("type") == "final":
            final = event
    stderr = proc.stderr.read()
    if proc.wait() != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited {proc.returncode}\n{stderr.strip()}")
    if len(steps) != args.steps or len(cpu) != 2 or final is None or final.get("outcome") != "SUCCEEDED":
        raise SystemExit(f"error: {' '.join(cmd)}: {len(steps)} step events, final {final}")
    config = [("batch-size", 32), ("seq-len", 64)]
    flags = dict(zip(args.trainer_flags[::2], args.trainer_flags[1::2]))
    batch, seq = (int(flags.get("--" + name, default)) for name, default in config)
    tokens = batch * seq * (args.steps - args.warmup)
    cpu_s = cpu[args.steps] - cpu[args.warmup]
    return tokens / (steps[args.steps] - steps[args.warmup]), tokens / cpu_s if cpu_s > 0 else float("nan"), \
        stderr.strip(), final.get("kernels", "")


def summary(values):
    return f"min {min(values):8.0f}  median {statistics.median(values):8.0f}  max {max(values):8.0f}"


TIMING_KEYS = ("elapsed_s", "tokens_per_s", "mean_tokens_per_s", "kernels")


def cpu_variants():
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    variants = ["baseline"]
    if {"avx2", "fma"} <= flags:
        variants.append("avx2")
    if {"avx512f", "avx512vl", "avx512bw", "avx512dq"} <= flags:
        variants.append("avx512")
    return variants


def strip_timings(value):
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def tensor_hashes(path):
    """name -> SHA-256 of the tensor's bytes, for each tensor of a safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {name: hashlib.sha256(body[spec["data_offsets"][0]:spec["data_offsets"][1]]).hexdigest()
            for name, spec in header.items() if name != "__metadata__"}


def bits_run(trainer, env, flags, workdir, tag):
    """The run's events (timings dropped) and its final checkpoint's tensor hashes."""
    checkpoint = os.path.join(workdir, tag + ".safetensors")
    cmd = [trainer, "train", "--checkpoint-out", checkpoint] + flags
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited {proc.returncode}\n{proc.stderr.strip()[-2000:]}")
    events = [strip_timings(json.loads(line)) for line in proc.stdout.splitlines() if line.startswith("{")]
    hashes = tensor_hashes(checkpoint)
    os.remove(checkpoint)
    return events, hashes


def first_difference(a, b):
    events_a, hashes_a = a
    events_b, hashes_b = b
    for i, (x, y) in enumerate(zip(events_a, events_b)):
        if x != y:
            return f"event {i} ({x.get('type')} step {x.get('step')})"
    if len(events_a) != len(events_b):
        return f"{len(events_a)} events against {len(events_b)}"
    if hashes_a.keys() != hashes_b.keys():
        return "checkpoint tensor names"
    for name in hashes_a:
        if hashes_a[name] != hashes_b[name]:
            return f"tensor {name}"
    return ""


def compare_bits(args):
    print(machine())
    print(f"uptime before: {uptime()}")
    print(f"A: {args.a}\nB: {args.b}", flush=True)
    variants = cpu_variants()
    small = ["--layers", "4", "--d-model", "32", "--heads", "4", "--d-ff", "64", "--seq-len", "16",
             "--batch-size", "8", "--steps", "20", "--eval-every", "10", "--eval-batches", "2", "--lr", "3e-3",
             "--warmup-steps", "5", "--dropout", "0.1", "--seed", "7"]
    placements = ["post", "pre", "peri", "deepnorm", "mix"]
    cases = []
    for placement, qk, norm, z_loss, positions in itertools.product(
            placements, (False, True), ("layernorm", "rmsnorm"), ("0", "1e-3"), ("learned", "sinusoidal")):
        flags = small + ["--placement", placement, "--norm", norm, "--z-loss", z_loss, "--positions", positions]
        if qk:
            flags.append("--qk-norm")
        name = f"{placement} {'qk_norm ' if qk else ''}{norm} z_loss {z_loss} {positions}"
        cases.append((placement, name, flags))
    default_model = ["--steps", "20", "--eval-every", "10", "--eval-batches", "2", "--lr", "1e-3",
                     "--warmup-steps", "5", "--dropout", "0.1", "--seed", "7"]
    for placement in placements:
        cases.append((placement, f"{placement} default model", default_model + ["--placement", placement]))
    rows = {}  # placement -> [runs, same]
    differences = []
    with tempfile.TemporaryDirectory() as workdir:
        for placement, name, flags in cases:
            for threads, variant in itertools.product((1, 2), variants):
                env = dict(os.environ, NORMSWEEP_CPU_KERNELS=variant)
                env.pop("OPENBLAS_CORETYPE", None)
                run_flags = flags + ["--threads", str(threads)]
                a = bits_run(args.a, env, run_flags, workdir, "a")
                b = bits_run(args.b, env, run_flags, workdir, "b")
                diff = first_difference(a, b)
                row = rows.setdefault(placement, [0, 0, 0])
                row[0] += 1
                row[1] += not diff
                row[2] += len(a[0])
                if diff:
                    differences.append(f"{name}, threads {threads}, {variant}: first difference at {diff}")
                    print(f"DIFFERENT: {differences[-1]}", flush=True)
    print(f"uptime after: {uptime()}")
    print(f"kernel variants: {', '.join(variants)}; threads 1 and 2; dropout 0.1; 20 steps")
    print("| placement | runs | identical | events compared |")
    print("|---|---|---|---|")
    for placement in placements:
        runs, same, events = rows[placement]
        print(f"| {placement} | {runs} | {same} | {events} |")
    total = sum(r[0] for r in rows.values())
    print(f"{total - len(differences)} of {total} runs identical (events and checkpoint tensors)")
    return 1 if differences else 0


def main():
    args = parse_args()
    if args.compare_bits:
        return compare_bits(args)
    sides = {"A": (args.a, environment(args.a_env), args.a_env), "B": (args.b, environment(args.b_env), args.b_env)}
    print(machine())
    print(f"uptime before: {uptime()}")
    for side, (path, _, env) in sides.items():
        print(f"{side}: {' '.join(env)} {path}".replace(":  ", ": "))
    print(f"{args.steps} steps, first {args.warmup} excluded, {args.threads} threads, "
          f"extra flags: {' '.join(args.trainer_flags) or 'none'}", flush=True)
    results = {"A": [], "B": []}
    per_cpu = {"A": [], "B": []}
    kernels = {"A": "", "B": ""}
    limits = {}
    if load_average() <= args.max_load:
        limits = fma_limits(args.fma_peak, args.threads)
    elif os.access(args.fma_peak, os.X_OK):
        print(f"fma_peak: not measured (load {load_average():.2f} > {args.max_load})")
    waited, measured = 0.0, 0
    while measured < args.rounds:
        load = load_average()
        if load > args.max_load:
            print(f"round {measured + 1}: not measured (load {load:.2f} > {args.max_load})", flush=True)
            if waited >= args.max_wait:
                print(f"gave up waiting for a load at or below {args.max_load} after {waited:.0f} s")
                break
            time.sleep(args.retry_wait)
            waited += args.retry_wait
            continue
        order = ["A", "B"] if measured % 2 == 0 else ["B", "A"]
        line = []
        for side in order:
            path, env, _ = sides[side]
            tokens_per_s, tokens_per_cpu_s, stderr, kernels[side] = run_once(path, env, args)
            results[side].append(tokens_per_s)
            per_cpu[side].append(tokens_per_cpu_s)
            line.append(f"{side} {tokens_per_s:6.0f} ({tokens_per_cpu_s:5.0f} per CPU-s)")
            stderr = [l for l in stderr.splitlines() if not l.startswith("normsweep-train: cpu kernels")]
            if stderr:  # the start line aside
                line.append(f"({side} stderr: {stderr[-1]})")
        measured += 1
        print(f"round {measured}: load {load:.2f} before, {load_average():.2f} after: {', '.join(line)} tokens/s",
              flush=True)
    print(f"uptime after: {uptime()}")
    if not results["A"]:
        print("not measured: the machine was never calm enough")
        return 0
    for side in ("A", "B"):
        print(f"{side} tokens/s over {len(results[side])} rounds:       {summary(results[side])}")
        print(f"{side} tokens per CPU-second:         {summary(per_cpu[side])}")
    for name, figures in (("tokens/s", results), ("tokens per CPU-second", per_cpu)):
        ratio = statistics.median(figures["B"]) / statistics.median(figures["A"])
        print(f"ratio of medians B / A, {name}: {ratio:.3f}")
    for side in ("A", "B"):
        path, env, _ = sides[side]
        gflops = statistics.median(results[side]) * flops_per_token(path, env, args) / 1e9
        bits = gemm_bits(kernels[side])
        share = (f", {100 * gflops / limits[bits]:.0f}% of the {bits}-bit FMA limit ({limits[bits]:.1f} GFLOP/s, "
                 f"{args.threads} threads)") if bits in limits else ""
        print(f"{side}: {kernels[side] or 'kernels not reported'}: median {gflops:.1f} GFLOP/s{share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
