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
  4. step:  the training objective's gradient, through `train`: resume from
            the checkpoint of 1., one SGD step at lr 1 on a file of one
            repeated byte (so every training window is the same, whichever
            the trainer draws), with the case's --z-loss; (before - after)
            must match PyTorch's gradient of cross-entropy + z_loss *
            mean (log Z)^2 on that batch.

`grads` takes its model from the checkpoint, which carries no z_loss (a
training setting, not the model's), so its gradient is of the plain
cross-entropy and 2. compares it with PyTorch's plain cross-entropy for every
case; the z term's gradient is checked by 4., with a coefficient (1e-2, the
fixtures') large enough that leaving the term out fails it.

Cases: every placement (post, pre, peri, deepnorm, mix; mix with
mix_post_fraction 0.5, so that 1 of 3 blocks is Post-LN) for both position
kinds, and qk_norm, norm=rmsnorm and z_loss each on top of post and of pre
(sinusoidal positions). Tolerances as the parity test: loss 1e-4 relative,
gradients 1e-3 in max|got - want| / max|want| per tensor.

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
from make_fixtures import build_model, gradient_scale, max_rel_err  # noqa: E402
from model import PLACEMENTS, ModelConfig, TransformerLM  # noqa: E402

LOSS_RTOL = 1e-4
GRAD_RTOL = 1e-3
# As make_fixtures.py: a hundred times Wortsman et al.'s 1e-4, so that the z
# term moves the gradients far beyond GRAD_RTOL.
Z_LOSS = 1e-2
# Mix-LN at 3 layers: floor(0.5 * 3) = 1 Post-LN block (the default 0.25
# would make all three Pre-LN), as make_fixtures.py.
MIX_POST_FRACTION = 0.5
# The switches, each on top of --variant-bases: name -> (ModelConfig overrides, z_loss).
VARIANTS = {
    "qk_norm": (dict(qk_norm=True), 0.0),
    "rmsnorm": (dict(norm="rmsnorm"), 0.0),
    "z_loss": ({}, Z_LOSS),
}


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


def reference_grads(model, data, count, z_loss=0.0):
    w = windows(data, model.cfg.seq_len, count)
    model.zero_grad(set_to_none=True)
    _, loss = model(w[:, :-1], w[:, 1:], z_loss=z_loss)
    loss.backward()
    return loss.item(), {n: p.grad.detach().clone() for n, p in model.named_parameters()}


def model_flags(cfg, z_loss):
    """`train` flags for the model of cfg and the case's z_loss."""
    flags = ["--placement", cfg.placement, "--layers", str(cfg.layers), "--d-model", str(cfg.d_model),
             "--heads", str(cfg.heads), "--d-ff", str(cfg.d_ff), "--seq-len", str(cfg.seq_len),
             "--positions", cfg.positions, "--norm", cfg.norm]
    if cfg.placement == "mix":
        flags += ["--mix-post-fraction", repr(cfg.mix_post_fraction)]
    if cfg.qk_norm:
        flags.append("--qk-norm")
    if z_loss > 0:
        flags += ["--z-loss", repr(z_loss)]
    return flags


def compare_grads(what, got, want_grads, report):
    """got: name -> numpy array; every tensor of want_grads within GRAD_RTOL."""
    missing = sorted(set(want_grads) - set(got))
    extra = sorted(set(got) - set(want_grads))
    report.check(f"{what} names", not missing and not extra,
                 f"missing {missing} extra {extra}" if missing or extra else f"{len(got)} tensors")
    worst, worst_name = 0.0, ""
    for name, g in want_grads.items():
        if name not in got:
            continue
        have = torch.from_numpy(np.asarray(got[name]).astype(np.float64))
        if tuple(have.shape) != tuple(g.shape):
            report.check(f"{what}.{name} shape", False, f"{tuple(have.shape)} vs {tuple(g.shape)}")
            continue
        # attn.k_norm.bias: zero in exact arithmetic, measured against its weight's scale.
        err = max_rel_err(have, g, gradient_scale(name, want_grads))
        if err > GRAD_RTOL:
            report.check(f"{what}.{name}", False, f"max-rel err {err:.1e}")
        if err >= worst:
            worst, worst_name = err, name
    report.check(what, worst <= GRAD_RTOL, f"worst max-rel err {worst:.1e} ({worst_name})")


class Report:
    def __init__(self):
        self.failures = 0

    def check(self, what, ok, detail):
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {detail}")
        self.failures += 0 if ok else 1


def check_case(args, tag, cfg, z_loss, seed, tmp, report):
    model, _ = build_model(cfg, seed)  # the fixtures' weights: standard init, LN and biases perturbed
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

    # 2. grads (of the plain cross-entropy: the checkpoint carries no z_loss)
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
    compare_grads(f"{tag} grads", got, want_grads, report)

    # 3. a trainer-written checkpoint loads here and evaluates the same
    trained = os.path.join(tmp, f"{tag}.trained.safetensors")
    run([args.trainer, "train"] + model_flags(cfg, z_loss) +
        ["--batch-size", "4", "--steps", "3", "--lr", "1e-3", "--eval-every", "0", "--threads", "1",
         "--data", data_path, "--seed", str(seed), "--checkpoint-out", trained])
    try:
        loaded = load_checkpoint(trained)
    except Exception as e:  # noqa: BLE001 - report any load failure the same way
        report.check(f"{tag} trained checkpoint loads in PyTorch", False, str(e))
        loaded = None
    if loaded is not None:
        report.check(f"{tag} trained checkpoint metadata", loaded.cfg == cfg,
                     f"{loaded.cfg}" if loaded.cfg == cfg else f"{loaded.cfg} vs {cfg}")
        out = last_json_line(run([args.trainer, "eval", "--checkpoint", trained, "--data", data_path]), "loss")
        want, _ = reference_loss(loaded, data)
        rel = abs(out["loss"] - want) / abs(want)
        report.check(f"{tag} trained checkpoint eval", rel <= LOSS_RTOL,
                     f"trainer {out['loss']:.7f} pytorch {want:.7f} rel err {rel:.1e}")

    # 4. the training objective's gradient (z term included) through one SGD step
    check_train_step(args, tag, cfg, z_loss, model, ckpt, tmp, report)


def check_train_step(args, tag, cfg, z_loss, model, ckpt, tmp, report):
    """Resume from ckpt, one SGD step at lr 1 (no momentum, decay or clipping)
    on a file of one repeated byte: every window the trainer can draw is the
    same, so its batch is known. before - after is the gradient of its
    objective, rounded to float32 in the update (well inside GRAD_RTOL here)."""
    batch, byte = 4, 97
    data = np.full(64 * (cfg.seq_len + 1), byte, dtype=np.uint8)
    data_path = os.path.join(tmp, f"{tag}.step.txt")
    data.tofile(data_path)
    after_path = os.path.join(tmp, f"{tag}.step.safetensors")
    run([args.trainer, "train"] + model_flags(cfg, z_loss) +
        ["--optimizer", "sgd", "--lr", "1", "--batch-size", str(batch), "--steps", "1", "--eval-every", "0",
         "--eval-batches", "1", "--threads", "1", "--data", data_path, "--resume", ckpt,
         "--checkpoint-out", after_path])
    after, _ = safetensors_io.read(after_path)
    before = {n: p.detach().double() for n, p in model.named_parameters()}
    got = {n: before[n].numpy() - after[n].astype(np.float64) for n in after
           if not n.startswith("optimizer.") and n in before}
    got.update({n: after[n] for n in after if not n.startswith("optimizer.") and n not in before})
    _, want = reference_grads(model, data, batch, z_loss)
    if z_loss > 0:
        # The check must be able to fail: the z term's share of the gradient.
        _, plain = reference_grads(model, data, batch, 0.0)
        share = max(max_rel_err(plain[n], want[n], gradient_scale(n, want)) for n in want)
        report.check(f"{tag} step: the z term moves the gradient beyond the tolerance",
                     share > 10 * GRAD_RTOL, f"max-rel difference with and without it {share:.1e}")
    compare_grads(f"{tag} step gradient (z_loss {z_loss:g})", got, want, report)


def cases(args):
    """(tag, ModelConfig, z_loss) for every placement x position kind, then
    every variant on top of every base placement."""
    size = dict(layers=args.layers, d_model=args.d_model, heads=args.heads, d_ff=args.d_ff,
                seq_len=args.seq_len)
    out = []
    for placement in filter(None, args.placements.split(",")):
        for positions in filter(None, args.positions.split(",")):
            cfg = ModelConfig(placement=placement, positions=positions, **size)
            if placement == "mix":
                cfg.mix_post_fraction = MIX_POST_FRACTION
            out.append((f"{placement}_{positions}", cfg, 0.0))
    for variant in filter(None, args.variants.split(",")):
        if variant not in VARIANTS:
            raise SystemExit(f"error: --variants: unknown variant {variant!r} (expected {', '.join(VARIANTS)})")
        overrides, z_loss = VARIANTS[variant]
        for base in filter(None, args.variant_bases.split(",")):
            cfg = ModelConfig(placement=base, **size, **overrides)
            out.append((f"{base}_{variant}", cfg, z_loss))
    for _, cfg, _ in out:
        try:
            cfg.validate()
        except ValueError as e:
            raise SystemExit(f"error: {e}")
    return out


def main():
    p = argparse.ArgumentParser(description="normsweep-train's eval/grads/checkpoints vs PyTorch")
    p.add_argument("--trainer", default=os.path.join(REPO, "build", "trainer", "normsweep-train"))
    p.add_argument("--placements", default=",".join(PLACEMENTS))
    p.add_argument("--positions", default="sinusoidal,learned")
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help="switches checked on top of each of --variant-bases (sinusoidal positions)")
    p.add_argument("--variant-bases", default="post,pre")
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
        for i, (tag, cfg, z_loss) in enumerate(cases(args)):
            print(f"[{tag}]", flush=True)
            check_case(args, tag, cfg, z_loss, args.seed + 10 * i, tmp, report)
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
