#!/usr/bin/env python3
"""GPU benchmark: normsweep-train's CUDA backend against PyTorch on the same GPU.

Trains the same model (tests/reference/model.py is the PyTorch twin of the
trainer) with normsweep (tests/bench/gpu_train_bench.cc: the real training
loop, fp32 and TF32) and with PyTorch eager (fp32 and TF32) and torch.compile (fp32),
in one run, on two configs:

  sweep  the trainer's default model (6 layers, d_model 128, 4 heads,
         d_ff 512, seq 64, batch 32): launch overhead dominates
  paper  6 layers, d_model 512, 8 heads, d_ff 2048, seq 256, batch 64

and prints tokens/s (median step), the ratios normsweep / PyTorch, and
normsweep's model FLOP utilisation (training FLOPs per token =
6 * matmul parameters + 12 * layers * seq_len * d_model, over the GPU's
dense peak for the arithmetic used: --peak-tflops-fp32/--peak-tflops-tf32,
defaulting to the H100/H200 SXM datasheet figures, 67 and 494.7).

  python3 tests/bench/gpu_vs_pytorch.py --bench build-gpu/tests/gpu/normsweep-gpu-bench

Targets (issue 7): at least PyTorch eager's tokens/s on `paper`, at least 3x on
`sweep`. Exit status is 0 whatever the figures: a benchmark, not a test.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

CONFIGS = {
    "sweep": dict(layers=6, d_model=128, heads=4, d_ff=512, seq_len=64, batch=32),
    "paper": dict(layers=6, d_model=512, heads=8, d_ff=2048, seq_len=256, batch=64),
}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", required=True, help="the normsweep-gpu-bench binary")
    p.add_argument("--device", default="cuda:0")
    p.add_argument("--configs", default="sweep,paper")
    p.add_argument("--placement", default="pre", choices=["pre", "post"])
    p.add_argument("--steps", type=int, default=80, help="training steps per measurement")
    p.add_argument("--warmup", type=int, default=15, help="steps not timed (compilation, graph capture)")
    p.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    p.add_argument("--compile-all", action="store_true",
                   help="torch.compile for tf32 too (by default fp32 only, to keep the run short)")
    p.add_argument("--peak-tflops-fp32", type=float, default=67.0)
    p.add_argument("--peak-tflops-tf32", type=float, default=494.7)
    p.add_argument("--out", help="also write the figures as JSON here")
    return p.parse_args()


def run_normsweep(args, cfg, precision):
    cmd = [args.bench, "--device", args.device, "--precision", precision, "--placement", args.placement,
           "--layers", str(cfg["layers"]), "--d-model", str(cfg["d_model"]), "--heads", str(cfg["heads"]),
           "--d-ff", str(cfg["d_ff"]), "--seq-len", str(cfg["seq_len"]), "--batch-size", str(cfg["batch"]),
           "--steps", str(args.steps), "--warmup", str(args.warmup)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_pytorch(args, cfg, precision, compiled):
    import torch
    from model import ModelConfig, TransformerLM

    torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
    torch.backends.cudnn.allow_tf32 = precision == "tf32"
    device = torch.device(args.device)
    torch.manual_seed(0)
    mc = ModelConfig(placement=args.placement, layers=cfg["layers"], d_model=cfg["d_model"], heads=cfg["heads"],
                     d_ff=cfg["d_ff"], seq_len=cfg["seq_len"])
    model = TransformerLM(mc).to(device=device, dtype=torch.float32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-8)
    step_fn = torch.compile(model) if compiled else model
    B, T = cfg["batch"], cfg["seq_len"]
    gen = torch.Generator(device="cpu").manual_seed(0)
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        windows = torch.randint(0, 256, (B, T + 1), generator=gen).to(device, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        _, loss = step_fn(windows[:, :-1], windows[:, 1:])
        loss.backward()
        # The global gradient norm, as normsweep computes (and logs) every step.
        torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        opt.step()
        loss.item()  # ends the step, as normsweep's host-side loss does
        times.append(time.perf_counter() - t0)
    timed = times[args.warmup:]
    return {"median_step_tokens_per_s": B * T / statistics.median(timed)}


def main():
    args = parse_args()
    from model import ModelConfig, training_flops_per_token
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: PyTorch sees no CUDA device; this benchmark needs a GPU")
    print(f"GPU: {torch.cuda.get_device_name(0)}; torch {torch.__version__}")
    results = {}
    for name in args.configs.split(","):
        cfg = CONFIGS[name]
        mc = ModelConfig(placement=args.placement, layers=cfg["layers"], d_model=cfg["d_model"], heads=cfg["heads"],
                         d_ff=cfg["d_ff"], seq_len=cfg["seq_len"])
        flops = training_flops_per_token(mc)
        row = {"config": cfg, "flops_per_token": flops}
        for precision in ("fp32", "tf32"):
            ns = run_normsweep(args, cfg, precision)
            eager = run_pytorch(args, cfg, precision, compiled=False)
            row[f"normsweep_{precision}"] = ns
            row[f"pytorch_eager_{precision}"] = eager
            compiled = None
            if not args.no_compile and (precision == "fp32" or args.compile_all):
                try:
                    compiled = run_pytorch(args, cfg, precision, compiled=True)
                except Exception as e:  # torch.compile needs a working Triton
                    print(f"  torch.compile unavailable: {type(e).__name__}: {str(e)[:200]}")
            row[f"pytorch_compile_{precision}"] = compiled
            peak = (args.peak_tflops_fp32 if precision == "fp32" else args.peak_tflops_tf32) * 1e12
            tps = ns["median_step_tokens_per_s"]
            mfu = tps * flops / peak
            row[f"mfu_{precision}"] = mfu
            line = (f"{name:5s} {precision}: normsweep {tps:10.0f} tok/s (MFU {100 * mfu:5.1f}%)"
                    f" | PyTorch eager {eager['median_step_tokens_per_s']:10.0f}"
                    f" -> {tps / eager['median_step_tokens_per_s']:5.2f}x")
            if compiled:
                line += (f" | torch.compile {compiled['median_step_tokens_per_s']:10.0f}"
                         f" -> {tps / compiled['median_step_tokens_per_s']:5.2f}x")
            print(line, flush=True)
        results[name] = row
    print("targets: paper fp32 >= 1.0x PyTorch eager; sweep fp32 >= 3.0x PyTorch eager")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
