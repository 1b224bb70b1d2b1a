#!/usr/bin/python3
"""Checks a built normsweep-train from the outside, through its CLI, against
the PyTorch reference (model.py), computed in float64:

  1. eval:  a checkpoint written here (random weights, PyTorch names) and a data
            file in; the trainer's `loss` and `tokens` must match PyTorch's mean
            next-byte cross-entropy over the consecutive non-overlapping windows
            of seq_len+1 bytes from the start of the file (a trailing partial
            window is left out).
  2. grads: the same checkpoint and the first B windows; every gradient tensor
            in the trainer's output file must match PyTorch's.
  3. train: a few training steps with --checkpoint-out; the checkpoint the
            trainer writes must load here by its names and metadata, and its
            PyTorch eval loss must match the trainer's eval of the same file.

For both placements and, by default, both position kinds (learned positions
are not in the committed fixtures). Tolerances as the parity test: loss 1e-4
relative, gradients 1e-3 in max|got - want| / max|want| per tensor.

  /usr/bin/python3 tests/reference/check_trainer.py [--trainer build/trainer/normsweep-train]

Exit status 0 when everything matches, 1 on a mismatch, 2 when the trainer
could not be run.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import safetensors_io  # noqa: E402
from model import ModelConfig, TransformerLM  # noqa: E402

LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-3


class TrainerError(Exception):
    pass


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise TrainerError(f"$ {' '.join(cmd)}\nexit status {res.returncode}\n{res.stderr.strip()}")
    return res.stdout


def last_json_line(text, want_key):
    for line in reversed(text.strip().splitlines()):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and want_key in obj:
            return obj
    raise TrainerError(f"no JSON line with {want_key!r} in the output:\n{text}")


def random_model(cfg, seed):
    """float64 model, standard init plus perturbed LN and biases, weights
    rounded to float32 (what the checkpoint holds)."""
    gen = torch.Generator().manual_seed(seed)
    model = TransformerLM(cfg).double()
    model.reset_parameters(generator=gen)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_ln = ".ln" in name or name.startswith("ln_f.")
            if is_ln and name.endswith(".weight"):
                p.add_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            elif is_ln or name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=p.dtype))
            p.copy_(p.float().double())
    return model


def write_checkpoint(path, model):
    tensors = {n: p.detach().float().numpy() for n, p in model.named_parameters()}
    safetensors_io.write(path, tensors, model.cfg.metadata())


def load_checkpoint(path):
    """A trainer-written checkpoint as a float64 PyTorch model; fails on a
    missing or extra parameter name or a wrong shape."""
    tensors, meta = safetensors_io.read(path)
    cfg = ModelConfig.from_metadata(meta)
    model = TransformerLM(cfg).double()
    params = {n: t for n, t in tensors.items() if not n.startswith("optimizer.")}
    state = {n: torch.from_numpy(t.astype(np.float64)) for n, t in params.items()}
    model.load_state_dict(state, strict=True)
    return model


def windows(data, seq_len, count=None):
    """[n, seq_len+1] consecutive non-overlapping windows from the start."""
    n = len(data) // (seq_len + 1)
    if count is not None:
        n = min(n, count)
    return torch.from_numpy(data[: n * (seq_len + 1)].reshape(n, seq_len + 1).astype(np.int64))


def reference_loss(model, data, count=None):
    w = windows(data, model.cfg.seq_len, count)
    with torch.no_grad():
        _, loss = model(w[:, :-1], w[:, 1:])
    return loss.item(), w.shape[0] * model.cfg.seq_len


def reference_grads(model, data, count):
    w = windows(data, model.cfg.seq_len, count)
    model.zero_grad(set_to_none=True)
    _, loss = model(w[:, :-1], w[:, 1:])
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


class Report:
    def __init__(self):
        self.failures = 0

    def check(self, what, ok, detail):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {detail}")
        self.failures += 0 if ok else 1


def check_case(args, cfg, seed, tmp, report, train_step=True):
    tag = f"{cfg.placement}_{cfg.positions}"
    model = random_model(cfg, seed)
    ckpt = os.path.join(tmp, f"{tag}.safetensors")
    write_checkpoint(ckpt, model)
    rng = np.random.default_rng(seed)
    # Text-like bytes, plus a partial window at the end that eval must ignore.
    data = rng.integers(32, 127, size=args.windows * (cfg.seq_len + 1) + cfg.seq_len // 2,
                        dtype=np.uint8)
    data_path = os.path.join(tmp, f"{tag}.txt")
    data.tofile(data_path)

    # 1. eval
    out = last_json_line(run([args.trainer, "eval", "--checkpoint", ckpt, "--data", data_path]), "loss")
    want, want_tokens = reference_loss(model, data)
    rel = abs(out["loss"] - want) / abs(want)
    report.check(f"{tag} eval loss", rel <= LOSS_RTOL,
                 f"trainer {out['loss']:.7f} pytorch {want:.7f} rel err {rel:.1e}")
    if "tokens" in out:
        report.check(f"{tag} eval tokens", int(out["tokens"]) == want_tokens,
                     f"trainer {out['tokens']} pytorch {want_tokens}")

    # 2. grads
    grads_path = os.path.join(tmp, f"{tag}.grads.safetensors")
    out = run([args.trainer, "grads", "--checkpoint", ckpt, "--data", data_path,
               "--batch-size", str(args.batch_size), "--out", grads_path])
    want_loss, want_grads = reference_grads(model, data, args.batch_size)
    try:
        got_loss = last_json_line(out, "loss")["loss"]
        rel = abs(got_loss - want_loss) / abs(want_loss)
        report.check(f"{tag} grads loss", rel <= LOSS_RTOL,
                     f"trainer {got_loss:.7f} pytorch {want_loss:.7f} rel err {rel:.1e}")
    except TrainerError:
        print(f"  (grads printed no JSON loss line: {out.strip()[:200]!r})")
    got, _ = safetensors_io.read(grads_path)
    missing = sorted(set(want_grads) - set(got))
    extra = sorted(set(got) - set(want_grads))
    report.check(f"{tag} grads names", not missing and not extra,
                 f"missing {missing} extra {extra}" if missing or extra else f"{len(got)} tensors")
    worst, worst_name = 0.0, ""
    for name, g in want_grads.items():
        if name not in got:
            continue
        have = torch.from_numpy(got[name].astype(np.float64))
        if tuple(have.shape) != tuple(g.shape):
            report.check(f"{tag} grads.{name} shape", False, f"{tuple(have.shape)} vs {tuple(g.shape)}")
            continue
        scale = g.abs().max().item()
        err = (have - g).abs().max().item() / (scale if scale > 0 else 1.0)
        if err > GRAD_RTOL:
            report.check(f"{tag} grads.{name}", False, f"max-rel err {err:.1e}")
        if err >= worst:
            worst, worst_name = err, name
    report.check(f"{tag} grads", worst <= GRAD_RTOL, f"worst max-rel err {worst:.1e} ({worst_name})")

    # 3. a trainer-written checkpoint loads here and evaluates the same
    if not train_step:
        print("  (skipped the train check: pass --positions-flag if `train` takes --positions)")
        return
    trained = os.path.join(tmp, f"{tag}.trained.safetensors")
    run([args.trainer, "train", "--placement", cfg.placement, "--layers", str(cfg.layers),
         "--d-model", str(cfg.d_model), "--heads", str(cfg.heads), "--d-ff", str(cfg.d_ff),
         "--seq-len", str(cfg.seq_len), "--batch-size", "4", "--steps", "3", "--lr", "1e-3",
         "--eval-every", "0", "--threads", "1", "--data", data_path, "--seed", str(seed),
         "--checkpoint-out", trained] + (["--positions", cfg.positions] if args.positions_flag else []))
    try:
        loaded = load_checkpoint(trained)
    except Exception as e:  # noqa: BLE001 - report any load failure the same way
        report.check(f"{tag} trained checkpoint loads in PyTorch", False, str(e))
        return
    if loaded.cfg != cfg:
        report.check(f"{tag} trained checkpoint metadata", False, f"{loaded.cfg} vs {cfg}")
    out = last_json_line(run([args.trainer, "eval", "--checkpoint", trained, "--data", data_path]), "loss")
    want, _ = reference_loss(loaded, data)
    rel = abs(out["loss"] - want) / abs(want)
    report.check(f"{tag} trained checkpoint eval", rel <= LOSS_RTOL,
                 f"trainer {out['loss']:.7f} pytorch {want:.7f} rel err {rel:.1e}")


def main():
    p = argparse.ArgumentParser(description="normsweep-train's eval/grads/checkpoints vs PyTorch")
    p.add_argument("--trainer", default=os.path.join(REPO, "build", "trainer", "normsweep-train"))
    p.add_argument("--placements", default="post,pre")
    p.add_argument("--positions", default="sinusoidal,learned")
    p.add_argument("--positions-flag", action="store_true",
                   help="pass --positions to `train` (if the trainer has such a flag); without "
                        "it the training-checkpoint check runs for sinusoidal positions only")
    p.add_argument("--layers", type=int, default=3)
    p.add_argument("--d-model", type=int, default=48)
    p.add_argument("--heads", type=int, default=3)
    p.add_argument("--d-ff", type=int, default=80)
    p.add_argument("--seq-len", type=int, default=19)
    p.add_argument("--windows", type=int, default=13, help="whole windows in the data file")
    p.add_argument("--batch-size", type=int, default=5, help="windows used by grads")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--keep", metavar="DIR", help="write the files here and keep them")
    args = p.parse_args()
    if not os.access(args.trainer, os.X_OK):
        print(f"error: the trainer binary {args.trainer} does not exist or is not executable; "
              "build it or pass --trainer PATH", file=sys.stderr)
        return 2
    torch.set_num_threads(1)
    tmp_obj = None
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        tmp = args.keep
    else:
        tmp_obj = tempfile.TemporaryDirectory(prefix="normsweep-check-")
        tmp = tmp_obj.name
    report = Report()
    try:
        for i, placement in enumerate(args.placements.split(",")):
            for j, positions in enumerate(args.positions.split(",")):
                cfg = ModelConfig(placement=placement, layers=args.layers, d_model=args.d_model,
                                  heads=args.heads, d_ff=args.d_ff, seq_len=args.seq_len,
                                  positions=positions)
                print(f"[{placement}-LN, {positions} positions]", flush=True)
                # eval and grads take the positions from the checkpoint; only
                # `train` needs a flag for learned ones.
                train_step = positions == "sinusoidal" or args.positions_flag
                check_case(args, cfg, args.seed + 10 * i + j, tmp, report, train_step)
    except TrainerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    finally:
        if tmp_obj:
            tmp_obj.cleanup()
    print("all checks passed" if report.failures == 0 else f"{report.failures} check(s) FAILED")
    return 0 if report.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
