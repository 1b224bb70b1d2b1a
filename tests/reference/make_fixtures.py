#!/usr/bin/python3
"""Writes the PyTorch parity fixtures for normsweep-train (as llm.c's test_gpt2).

One safetensors file per scheme, tests/reference/fixtures/parity_<name>.safetensors
(FIXTURES below: post, pre, and issue 24's peri, deepnorm, mix and each of
qk_norm, z_loss and rmsnorm on top of post and of pre),
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
from model import (LN_EPS, ModelConfig, TransformerLM, attention_logits, embed,  # noqa: E402
                   instability_diagnostics, is_norm_param, update_ratios, UPDATE_RATIO_MATRICES)

# The fixture size: small and odd so that no loop bound hides behind a power
# of two (head dim 15, odd d_model and seq_len).
LAYERS, D_MODEL, HEADS, D_FF, SEQ_LEN, BATCH = 3, 45, 3, 80, 19, 4
SEED = 1234
ADAM_LR, ADAM_BETA1, ADAM_BETA2, ADAM_EPS = 1e-3, 0.9, 0.98, 1e-8
ADAM_STEPS = 5
# Targets set to -1 (ignored by the loss): (batch row, position).
IGNORED_TARGETS = [(0, 0), (1, SEQ_LEN - 1), (2, 7), (3, 3), (3, 4), (3, 5)]
# The z-loss coefficient of the z_loss fixtures: a hundred times Wortsman et
# al.'s 1e-4, so that the z term (about 0.3 here) moves the loss and every
# gradient far beyond the tolerances and a missing or wrong term fails.
FIXTURE_Z_LOSS = 1e-2
# Mix-LN at 3 layers: floor(0.5 * 3) = 1 Post-LN block, then 2 Pre-LN (the
# default 0.25 would make all three Pre-LN).
FIXTURE_MIX_POST_FRACTION = 0.5

# name -> (ModelConfig overrides, z_loss), seeds SEED + index in this order.
# post and pre come first so that their files stay as before issue 24.
FIXTURES = [
    ("post", dict(placement="post"), 0.0),
    ("pre", dict(placement="pre"), 0.0),
    ("peri", dict(placement="peri"), 0.0),
    ("deepnorm", dict(placement="deepnorm"), 0.0),
    ("mix", dict(placement="mix", mix_post_fraction=FIXTURE_MIX_POST_FRACTION), 0.0),
    ("post_qknorm", dict(placement="post", qk_norm=True), 0.0),
    ("pre_qknorm", dict(placement="pre", qk_norm=True), 0.0),
    ("post_zloss", dict(placement="post"), FIXTURE_Z_LOSS),
    ("pre_zloss", dict(placement="pre"), FIXTURE_Z_LOSS),
    ("post_rmsnorm", dict(placement="post", norm="rmsnorm"), 0.0),
    ("pre_rmsnorm", dict(placement="pre", norm="rmsnorm"), 0.0),
]


def build_model(cfg, seed):
    """A float64 model with the standard init, then LayerNorm parameters and all
    biases perturbed so that every gradient path carries a non-trivial value,
    then every parameter rounded to float32 (the file stores float32)."""
    gen = torch.Generator().manual_seed(seed)
    model = TransformerLM(cfg).double()
    model.reset_parameters(generator=gen)
    with torch.no_grad():
        for name, p in model.named_parameters():
            is_ln = is_norm_param(name)
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


def loss_and_grads(model, inputs, targets, z_loss=0.0):
    model.zero_grad(set_to_none=True)
    logits, loss = model(inputs, targets, z_loss=z_loss)
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return logits.detach(), loss.detach(), grads


def adam_steps(model, inputs, targets, z_loss=0.0):
    """Losses at the start of each of ADAM_STEPS Adam steps on the same batch,
    and each step's update-to-weight RMS ratios [steps][layers][4]."""
    model = copy.deepcopy(model)
    opt = torch.optim.Adam(model.parameters(), lr=ADAM_LR, betas=(ADAM_BETA1, ADAM_BETA2),
                           eps=ADAM_EPS, weight_decay=0.0)
    losses, ratios = [], []
    for _ in range(ADAM_STEPS):
        opt.zero_grad(set_to_none=True)
        _, loss = model(inputs, targets, z_loss=z_loss)
        losses.append(loss.item())
        loss.backward()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        opt.step()
        after = {n: p.detach() for n, p in model.named_parameters()}
        ratios.append(update_ratios(before, after, model.cfg.layers))
    return losses, ratios


def adam_losses(model, inputs, targets, z_loss=0.0):
    return adam_steps(model, inputs, targets, z_loss)[0]


def max_rel_err(a, b, scale=None):
    """max|a - b| / max|b|: the per-tensor measure the C++ parity test uses
    (scale replaces max|b| where given)."""
    scale = b.abs().max().item() if scale is None else scale
    return (a - b).abs().max().item() / scale if scale > 0 else (a - b).abs().max().item()


def gradient_scale(name, grads):
    """The denominator of a gradient's max-rel error: max|grad| of the tensor,
    except for attn.k_norm.bias, whose gradient is zero in exact arithmetic (a
    bias added to every key of a head adds q . b to every logit of a query's
    row, which the softmax ignores): it is measured against its weight's
    gradient, as the C++ parity test does (float64 leaves ~1e-17 there)."""
    if name.endswith("attn.k_norm.bias"):
        return grads[name[:-len("bias")] + "weight"].abs().max().item()
    return grads[name].abs().max().item()


def fp32_report(model64, inputs, targets, loss64, grads64, adam64, diag64, ratios64, z_loss=0.0):
    """The same computation in float32 PyTorch: how close an fp32 implementation
    gets to the float64 answer, i.e. what tolerances are realistic."""
    model32 = copy.deepcopy(model64).float()
    _, loss32, grads32 = loss_and_grads(model32, inputs, targets, z_loss)
    worst = max(((max_rel_err(grads32[n].double(), g, gradient_scale(n, grads64)), n) for n, g in grads64.items()))
    adam32, ratios32 = adam_steps(model32, inputs, targets, z_loss)
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
    x = embed(model, inputs)
    differs = False
    for block, causal in zip(model.blocks, maxima):
        full = attention_logits(model, block, x).max().item()
        differs |= full > causal * (1 + 1e-3)
        x = block(x)
    if len(set(round(m, 6) for m in maxima)) != len(maxima):
        raise RuntimeError(f"blocks share a maximum attention logit: {maxima}")
    return differs


def _norm_by_formula(x, mod):
    """A norm from its module's parameters, by formula (F.layer_norm, or
    RMSNorm through the vector norm rather than model.py's mean of squares)."""
    import torch.nn as nn
    import torch.nn.functional as F
    if isinstance(mod, nn.LayerNorm):
        return F.layer_norm(x, mod.normalized_shape, mod.weight, mod.bias, mod.eps)
    d = x.shape[-1]
    return x / torch.sqrt(torch.linalg.vector_norm(x, dim=-1, keepdim=True) ** 2 / d + LN_EPS) * mod.weight


def _attention_by_heads(block, a, cfg):
    """Causal attention written out head by head (for qk_norm, which torch's
    nn.MultiheadAttention cannot express): per head h, q_h = a W_q,h^T + b,
    normalised over its hd channels, softmax(q k^T / sqrt(hd)) v, then proj."""
    import math
    import torch.nn.functional as F
    d, H = cfg.d_model, cfg.heads
    hd, T = d // H, a.shape[1]
    w, b = block.attn.qkv.weight, block.attn.qkv.bias
    outs = []
    for h in range(H):
        rows = slice(h * hd, (h + 1) * hd)
        q = F.linear(a, w[:d][rows], b[:d][rows])
        k = F.linear(a, w[d:2 * d][rows], b[d:2 * d][rows])
        v = F.linear(a, w[2 * d:][rows], b[2 * d:][rows])
        q, k = _norm_by_formula(q, block.attn.q_norm), _norm_by_formula(k, block.attn.k_norm)
        scores = q @ k.transpose(-1, -2) / math.sqrt(hd)
        scores = scores + torch.triu(torch.full((T, T), float("-inf"), dtype=a.dtype), 1)
        outs.append(torch.softmax(scores, dim=-1) @ v)
    return F.linear(torch.cat(outs, dim=-1), block.attn.proj.weight, block.attn.proj.bias)


def check_against_torch_nn(model, inputs, z_loss=0.0, targets=None):
    """An independent statement of the same maths, guarding model.py against
    a slip (q/k/v order, scaling, norm placement) that would make every
    fixture wrong in the same way. Post-LN and Pre-LN with LayerNorm: torch's
    own nn.TransformerEncoderLayer (dropout 0, ReLU, eps 1e-5, norm_first for
    Pre-LN) with a causal mask. Every other scheme: the block composed from
    its definition over torch's nn.MultiheadAttention (or the attention
    written out head by head under qk_norm), F.linear and the norms by
    formula. PE is written out element by element; the z-loss is recomputed
    from log_softmax."""
    import math
    import torch.nn as nn
    import torch.nn.functional as F
    cfg = model.cfg
    d, T = cfg.d_model, inputs.shape[1]
    x = model.tok_emb.weight[inputs] * math.sqrt(d)
    if cfg.positions == "learned":
        x = x + model.pos_emb.weight[:T]
    else:
        x = x + torch.tensor([[math.sin(p / 10000 ** (i / d)) if i % 2 == 0 else
                               math.cos(p / 10000 ** ((i - 1) / d)) for i in range(d)]
                              for p in range(T)], dtype=x.dtype)
    if model.ln_emb is not None:
        x = _norm_by_formula(x, model.ln_emb)
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=x.dtype), 1)
    plain = cfg.placement in ("post", "pre") and cfg.norm == "layernorm" and not cfg.qk_norm
    alpha = cfg.residual_alpha()
    for b in model.blocks:
        layer = nn.TransformerEncoderLayer(d, cfg.heads, cfg.d_ff, dropout=0.0, activation="relu",
                                           layer_norm_eps=1e-5, batch_first=True,
                                           norm_first=b.placement == "pre").to(x.dtype)
        state = {
            "self_attn.in_proj_weight": b.attn.qkv.weight, "self_attn.in_proj_bias": b.attn.qkv.bias,
            "self_attn.out_proj.weight": b.attn.proj.weight, "self_attn.out_proj.bias": b.attn.proj.bias,
            "linear1.weight": b.ffn.fc1.weight, "linear1.bias": b.ffn.fc1.bias,
            "linear2.weight": b.ffn.fc2.weight, "linear2.bias": b.ffn.fc2.bias}
        if plain:
            state.update({"norm1.weight": b.ln1.weight, "norm1.bias": b.ln1.bias,
                          "norm2.weight": b.ln2.weight, "norm2.bias": b.ln2.bias})
            layer.load_state_dict(state)
            x = layer(x, src_mask=mask)
            continue
        layer.load_state_dict(state, strict=False)

        def attn(a, b=b, layer=layer):
            if cfg.qk_norm:
                return _attention_by_heads(b, a, cfg)
            return layer.self_attn(a, a, a, attn_mask=mask, need_weights=False)[0]

        def ffn(a, layer=layer):
            return layer.linear2(F.relu(layer.linear1(a)))

        def n(a, mod):
            return _norm_by_formula(a, mod)

        if b.placement in ("post", "deepnorm"):
            x = n(alpha * x + attn(x), b.ln1)
            x = n(alpha * x + ffn(x), b.ln2)
        elif b.placement == "peri":
            x = x + n(attn(n(x, b.ln1)), b.ln1_out)
            x = x + n(ffn(n(x, b.ln2)), b.ln2_out)
        else:
            x = x + attn(n(x, b.ln1))
            x = x + ffn(n(x, b.ln2))
    if model.ln_f is not None:
        x = _norm_by_formula(x, model.ln_f)
    want = model.head(x)
    got, _ = model(inputs)
    err = (want - got).abs().max().item()
    if err > 1e-10:
        raise RuntimeError(f"model.py and the independent statement ({'nn.TransformerEncoderLayer' if plain else 'composed'}) "
                           f"disagree by {err}")
    if z_loss > 0:
        counted = targets != -1
        logp = F.log_softmax(want, dim=-1)
        log_z = (want - logp)[..., 0][counted]  # logit - log p = log Z, any column
        ce = -logp.gather(-1, targets.clamp(min=0)[..., None])[..., 0][counted].mean()
        want_loss = ce + z_loss * (log_z ** 2).mean()
        _, got_loss = model(inputs, targets, z_loss=z_loss)
        if abs(want_loss.item() - got_loss.item()) > 1e-12 * abs(want_loss.item()):
            raise RuntimeError(f"z-loss: model.py gives {got_loss.item()}, the statement {want_loss.item()}")


def make_fixture(name, overrides, z_loss, seed, out_path, positions="sinusoidal"):
    torch.set_default_dtype(torch.float64)
    cfg = ModelConfig(layers=LAYERS, d_model=D_MODEL, heads=HEADS, d_ff=D_FF, seq_len=SEQ_LEN,
                      positions=positions, **overrides)
    model, gen = build_model(cfg, seed)
    inputs, targets = make_batch(gen)
    with torch.no_grad():
        check_against_torch_nn(model, inputs, z_loss, targets)
    logits, loss, grads = loss_and_grads(model, inputs, targets, z_loss)
    losses, ratios = adam_steps(model, inputs, targets, z_loss)
    assert losses[0] == loss.item()
    maxima, log_z = instability_diagnostics(model, inputs, targets)
    with torch.no_grad():
        masked_max_larger = diagnostics_discriminate(model, inputs, maxima)
        # log Z - loss is the mean target logit: an independent route to log Z.
        counted = targets != -1
        target_logit = logits.gather(-1, targets.clamp(min=0)[..., None])[..., 0][counted].mean().item()
        _, ce = model(inputs, targets)  # the cross-entropy alone
        if abs(log_z - (ce.item() + target_logit)) > 1e-9 * abs(log_z):
            raise RuntimeError(f"log Z {log_z} is not loss {ce.item()} + mean target logit {target_logit}")

    for name, g in grads.items():
        if name.endswith("attn.k_norm.bias"):  # zero by the softmax's shift invariance
            if g.abs().max().item() > 1e-12 * gradient_scale(name, grads):
                raise RuntimeError(f"{name}: gradient of {name} is not zero")
            continue
        if not torch.isfinite(g).all() or g.abs().max().item() == 0.0:
            raise RuntimeError(f"{name}: gradient of {name} is zero or not finite")

    f32 = lambda t: t.detach().to(torch.float32).numpy()  # noqa: E731
    tensors = {}
    for name, p in model.named_parameters():
        tensors[name] = f32(p)
    tensors["batch.inputs"] = inputs.to(torch.int32).numpy()
    tensors["batch.targets"] = targets.to(torch.int32).numpy()
    for name, g in grads.items():
        tensors["grads." + name] = f32(g)
    tensors["expected.loss"] = np.array([loss.item()], dtype=np.float32)
    if z_loss > 0:
        # The z term apart: expected.loss is the cross-entropy plus it.
        tensors["expected.z_term"] = np.array([loss.item() - ce.item()], dtype=np.float32)
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
        **({"z_loss": repr(z_loss)} if z_loss > 0 else {}),
        "generator": f"tests/reference/make_fixtures.py, torch {torch.__version__}",
    })
    safetensors_io.write(out_path, tensors, metadata)
    check_file(out_path, tensors, metadata)

    size = os.path.getsize(out_path)
    print(f"{out_path}: {size} bytes, {len(tensors)} tensors, loss {loss.item():.6f}, "
          f"adam losses {' '.join(f'{x:.6f}' for x in losses)}, max attention logits "
          f"{' '.join(f'{m:.4f}' for m in maxima)}, log Z {log_z:.6f}, update ratios of step 1 "
          f"{' '.join(f'{r:.5f}' for r in ratios[0][0])} (block 0)")
    fp32_report(model, inputs, targets, loss.item(), grads, losses, (maxima, log_z), ratios, z_loss)
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
                        torch.from_numpy(got["batch.targets"]).long(),
                        z_loss=float(got_meta.get("z_loss", "0")))
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
    parser.add_argument("--only", nargs="*", help="write only these fixtures (names from FIXTURES)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # deterministic reductions, and the machine is shared
    os.makedirs(args.out_dir, exist_ok=True)
    masked_max_larger = []
    for i, (name, overrides, z_loss) in enumerate(FIXTURES):
        if args.only and name not in args.only:
            continue
        suffix = "" if args.positions == "sinusoidal" else "_learned"
        out = os.path.join(args.out_dir, f"parity_{name}{suffix}.safetensors")
        if make_fixture(name, overrides, z_loss, args.seed + i, out, positions=args.positions):
            masked_max_larger.append(name)
    if not masked_max_larger:
        raise RuntimeError("no fixture has a block whose unmasked attention maximum exceeds the causal one")
    print(f"a masked (query, key) pair holds a larger logit than every visible one in: "
          f"{', '.join(masked_max_larger)}")


if __name__ == "__main__":
    main()
