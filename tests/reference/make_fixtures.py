#!/usr/bin/python3
"""Writes the PyTorch parity fixtures for normsweep-train (as llm.c's test_gpt2).

One safetensors file per placement, tests/reference/fixtures/parity_{post,pre}.safetensors,
holding the weights, one batch, the loss, the logits, every gradient, the
instability diagnostics (largest attention logit per block, mean log Z) and
the losses and update-to-weight RMS ratios of 5 Adam steps. Everything is computed in float64 from the float32
weights that the file stores, then stored as float32: the file is the exact
answer (to float32 rounding) and the trainer's fp32 maths is compared against it.

Run with Debian's python3 (python3-torch, python3-numpy):
  /usr/bin/python3 tests/reference/make_fixtures.py
The output is deterministic for a given torch version; CI only reads the files.
"""

import argparse
import copy
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402
from model import (ModelConfig, TransformerLM, instability_diagnostics, update_ratios,  # noqa: E402
                   UPDATE_RATIO_MATRICES)

# The fixture size: small and odd so that no loop bound hides behind a power
# of two (head dim 15, odd d_model and seq_len).
LAYERS, D_MODEL, HEADS, D_FF, SEQ_LEN, BATCH = 3, 45, 3, 80, 19, 4
SEED = 1234
ADAM_LR, ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 1e-3, 0.9, 0.98, 1e-8
ADAM_STEPS = 5
# Targets set to -1 (ignored by the loss): (batch row, position).
IGNORED_TARGETS = [(0, 0), (1, SEQ_LEN - 1), (2, 7), (3, 3), (3, 4), (3, 5)]


def build_model(cfg, seed):
    """A float64 model with the standard init, then LayerNorm parameters and all
    biases perturbed so that every gradient path carries a non-trivial value,
    then every parameter rounded to float32 (the file stores float32)."""
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
    return model, gen


def make_batch(gen):
    inputs = torch.randint(0, 256, (BATCH, SEQ_LEN), generator=gen)
    targets = torch.randint(0, 256, (BATCH, SEQ_LEN), generator=gen)
    for b, t in IGNORED_TARGETS:
        targets[b, t] = -1
    return inputs, targets


def loss_and_grads(model, inputs, targets):
    model.zero_grad(set_to_none=True)
    logits, loss = model(inputs, targets)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def adam_steps(model, inputs, targets):
    """Losses at the start of each of ADAM_STEPS Adam steps on the same batch,
    and each step's update-to-weight RMS ratios [steps][layers][4]."""
    model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=ADAM_LR, betas=(ADAM_BETA1, ADAM_BETA2),
                           eps=ADAM_EPS, weight_decay=0.0)
    losses, ratios = [], []
    for _ in range(ADAM_STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets)
        losses.append(loss.item())
        loss.backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        after = {n: p.detach() for n, p in model.named_parameters()}
        ratios.append(update_ratios(before, after, model.cfg.layers))
    return losses, ratios


def adam_losses(model, inputs, targets):
    return adam_steps(model, inputs, targets)[0]


def max_rel_err(a, b):
    """max|a - b| / max|b|: the per-tensor measure the C++ parity test uses."""
    scale = b.abs().max().item()
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


def fp32_report(model64, inputs, targets, loss64, grads64, adam64, diag64, ratios64):
    """The same computation in float32 PyTorch: how close an fp32 implementation
    gets to the float64 answer, i.e. what tolerances are realistic."""
    model32 = copy.deepcopy(model64).float()
    _, loss32, grads32 = loss_and_grads(model32, inputs, targets)
    worst = max(((max_rel_err(grads32[n].double(), g), n) for n, g in grads64.items()))
    adam32, ratios32 = adam_steps(model32, inputs, targets)
    adam_err = max(abs(a - b) / abs(b) for a, b in zip(adam32, adam64))
    maxima32, log_z32 = instability_diagnostics(model32, inputs, targets)
    max_err = max(abs(a - b) / abs(b) for a, b in zip(maxima32, diag64[0]))
    ratio_err = max(abs(a - b) / abs(b) for s32, s64 in zip(ratios32, ratios64)
                    for l32, l64 in zip(s32, s64) for a, b in zip(l32, l64))
    print(f"  fp32 torch vs float64: loss rel err {abs(loss32.item() - loss64) / loss64:.2e}, "
          f"worst grad max-rel err {worst[0]:.2e} ({worst[1]}), adam losses rel err {adam_err:.2e}, "
          f"max attention logit {max_err:.2e}, log Z {abs(log_z32 - diag64[1]) / abs(diag64[1]):.2e}, "
          f"update ratios {ratio_err:.2e}")


def diagnostics_discriminate(model, inputs, maxima):
    """Whether the causal maximum differs from the maximum over every (query,
    key) pair in some block: main() wants that of one fixture at least, or the
    fixtures could not catch a kernel that forgets the mask. The blocks'
    maxima must differ from one another (a kernel writing one block's maximum
    for every block must fail)."""
    import math
    cfg = model.cfg
    d, H = cfg.d_model, cfg.heads
    x = model.tok_emb(inputs) * math.sqrt(d) + model.pe[:inputs.shape[1]]
    differs = False
    for block, causal in zip(model.blocks, maxima):
        a = block.ln1(x) if cfg.placement == "pre" else x
        qkv = block.attn.qkv(a)
        q = qkv[..., :d].unflatten(-1, (H, d // H))
        k = qkv[..., d:2 * d].unflatten(-1, (H, d // H))
        full = (torch.einsum("bthi,bshi->bhts", q, k) / math.sqrt(d // H)).max().item()
        differs |= full > causal * (1 + 1e-3)
        x = block(x)
    if len(set(round(m, 6) for m in maxima)) != len(maxima):
        raise RuntimeError(f"blocks share a maximum attention logit: {maxima}")
    return differs


def check_against_torch_nn(model, inputs):
    """An independent statement of the same maths: torch's own
    nn.TransformerEncoderLayer (dropout 0, ReLU, eps 1e-5, norm_first for Pre-LN)
    with a causal mask, and PE written out element by element. Guards model.py
    against a slip (q/k/v order, scaling, LN placement) that would make every
    fixture wrong in the same way."""
    import math
    import torch.nn as nn
    cfg = model.cfg
    d, T = cfg.d_model, inputs.shape[1]
    x = model.tok_emb.weight[inputs] * math.sqrt(d)
    if cfg.positions == "learned":
        x = x + model.pos_emb.weight[:T]
    else:
        x = x + torch.tensor([[math.sin(p / 10000 ** (i / d)) if i % 2 == 0 else
                               math.cos(p / 10000 ** ((i - 1) / d)) for i in range(d)]
                              for p in range(T)], dtype=x.dtype)
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=x.dtype), 1)
    for b in model.blocks:
        layer = nn.TransformerEncoderLayer(d, cfg.heads, cfg.d_ff, dropout=0.0, activation="relu",
                                           layer_norm_eps=1e-5, batch_first=True,
                                           norm_first=cfg.placement == "pre").to(x.dtype)
        layer.load_state_dict({
            "self_attn.in_proj_weight": b.attn.qkv.weight, "self_attn.in_proj_bias": b.attn.qkv.bias,
            "self_attn.out_proj.weight": b.attn.proj.weight, "self_attn.out_proj.bias": b.attn.proj.bias,
            "linear1.weight": b.ffn.fc1.weight, "linear1.bias": b.ffn.fc1.bias,
            "linear2.weight": b.ffn.fc2.weight, "linear2.bias": b.ffn.fc2.bias,
            "norm1.weight": b.ln1.weight, "norm1.bias": b.ln1.bias,
            "norm2.weight": b.ln2.weight, "norm2.bias": b.ln2.bias})
        x = layer(x, src_mask=mask)
    if model.ln_f is not None:
        x = model.ln_f(x)
    want = model.head(x)
    got, _ = model(inputs)
    err = (want - got).abs().max().item()
    if err > 1e-10:
        raise RuntimeError(f"model.py and nn.TransformerEncoderLayer disagree by {err}")


def make_fixture(placement, seed, out_path, positions="sinusoidal"):
    torch.set_default_dtype(torch.float64)
    cfg = ModelConfig(placement=placement, layers=LAYERS, d_model=D_MODEL, heads=HEADS,
                      d_ff=D_FF, seq_len=SEQ_LEN, positions=positions)
    model, gen = build_model(cfg, seed)
    inputs, targets = make_batch(gen)
    with torch.no_grad():
        check_against_torch_nn(model, inputs)
    logits, loss, grads = loss_and_grads(model, inputs, targets)
    losses, ratios = adam_steps(model, inputs, targets)
    assert losses[0] == loss.item()
    maxima, log_z = instability_diagnostics(model, inputs, targets)
    with torch.no_grad():
        masked_max_larger = diagnostics_discriminate(model, inputs, maxima)
        # log Z - loss is the mean target logit: an independent route to log Z.
        counted = targets != -1
        target_logit = logits.gather(-1, targets.clamp(min=0)[..., None])[..., 0][counted].mean().item()
        if abs(log_z - (loss.item() + target_logit)) > 1e-9 * abs(log_z):
            raise RuntimeError(f"log Z {log_z} is not loss {loss.item()} + mean target logit {target_logit}")

    for name, g in grads.items():
        if not torch.isfinite(g).all() or g.abs().max().item() == 0.0:
            raise RuntimeError(f"{placement}: gradient of {name} is zero or not finite")

    f32 = lambda t: t.detach().to(torch.float32).numpy()  # noqa: E731
    tensors = {}
    for name, p in model.named_parameters():
        tensors[name] = f32(p)
    tensors["batch.inputs"] = inputs.to(torch.int32).numpy()
    tensors["batch.targets"] = targets.to(torch.int32).numpy()
    for name, g in grads.items():
        tensors["grads." + name] = f32(g)
    tensors["expected.loss"] = np.array([loss.item()], dtype=np.float32)
    tensors["expected.logits"] = f32(logits)
    tensors["expected.adam_losses"] = np.array(losses, dtype=np.float32)
    tensors["expected.max_attn_logit"] = np.array(maxima, dtype=np.float32)
    tensors["expected.log_z"] = np.array([log_z], dtype=np.float32)
    tensors["expected.update_ratios"] = np.array(ratios, dtype=np.float32)

    metadata = cfg.metadata()
    metadata.update({
        "batch_size": str(BATCH),
        "seed": str(seed),
        "compute_dtype": "float64",
        "ignore_index": "-1",
        "adam_lr": repr(ADAM_LR),
        "adam_beta1": repr(ADAM_BETA1),
        "adam_beta2": repr(ADAM_BETA2),
        "adam_eps": repr(ADAM_EPS),
        "adam_weight_decay": "0",
        "adam_steps": str(ADAM_STEPS),
        "update_ratio_matrices": ",".join(UPDATE_RATIO_MATRICES),
        "generator": f"tests/reference/make_fixtures.py, torch {torch.__version__}",
    })
    safetensors_io.write(out_path, tensors, metadata)
    check_file(out_path, tensors, metadata)

    size = os.path.getsize(out_path)
    print(f"{out_path}: {size} bytes, {len(tensors)} tensors, loss {loss.item():.6f}, "
          f"adam losses {' '.join(f'{x:.6f}' for x in losses)}, max attention logits "
          f"{' '.join(f'{m:.4f}' for m in maxima)}, log Z {log_z:.6f}, update ratios of step 1 "
          f"{' '.join(f'{r:.5f}' for r in ratios[0][0])} (block 0)")
    fp32_report(model, inputs, targets, loss.item(), grads, losses, (maxima, log_z), ratios)
    torch.set_default_dtype(torch.float32)
    return masked_max_larger


def check_file(path, tensors, metadata):
    """Re-open the file and compare it with what was meant to be written."""
    got, got_meta = safetensors_io.read(path)
    if got_meta != metadata:
        raise RuntimeError(f"{path}: metadata differs after reading back")
    if list(got) != list(tensors):
        raise RuntimeError(f"{path}: tensor names differ after reading back")
    for name, want in tensors.items():
        have = got[name]
        if have.dtype != want.dtype or have.shape != want.shape or have.tobytes() != want.tobytes():
            raise RuntimeError(f"{path}: {name} differs after reading back")
    # The file alone must reproduce the loss: load the float32 weights into a
    # fresh float64 model and run the batch again.
    cfg = ModelConfig.from_metadata(got_meta)
    model = TransformerLM(cfg).double()
    state = {n: torch.from_numpy(got[n]).double() for n, _ in model.named_parameters()}
    model.load_state_dict(state, strict=True)
    with torch.no_grad():
        _, loss = model(torch.from_numpy(got["batch.inputs"]).long(),
                        torch.from_numpy(got["batch.targets"]).long())
    want_loss = float(got["expected.loss"][0])
    if abs(loss.item() - want_loss) > 1e-6 * abs(want_loss):
        raise RuntimeError(f"{path}: reloaded model gives loss {loss.item()}, file says {want_loss}")


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out-dir", default=os.path.join(here, "fixtures"))
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--positions", default="sinusoidal", choices=["sinusoidal", "learned"],
                        help="the committed fixtures use sinusoidal; learned writes "
                             "parity_<placement>_learned.safetensors")
    args = parser.parse_args()
    torch.set_num_threads(1)  # deterministic reductions, and the machine is shared
    os.makedirs(args.out_dir, exist_ok=True)
    masked_max_larger = []
    for i, placement in enumerate(("post", "pre")):
        suffix = "" if args.positions == "sinusoidal" else "_learned"
        out = os.path.join(args.out_dir, f"parity_{placement}{suffix}.safetensors")
        if make_fixture(placement, args.seed + i, out, positions=args.positions):
            masked_max_larger.append(placement)
    if not masked_max_larger:
        raise RuntimeError("no fixture has a block whose unmasked attention maximum exceeds the causal one")
    print(f"a masked (query, key) pair holds a larger logit than every visible one in: "
          f"{', '.join(masked_max_larger)}")


if __name__ == "__main__":
    main()
