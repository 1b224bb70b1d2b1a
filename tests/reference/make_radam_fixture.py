#!/usr/bin/python3
"""Writes tests/reference/fixtures/radam_steps.safetensors: 12 steps of
torch.optim.RAdam (and torch.optim.Adam, for contrast) on three small tensors
with fixed gradients, for tests/trainer/radam_parity_test.cc.

Tensors (flat in the C++ test):
  w     7x5, weight decay WEIGHT_DECAY (L2, added to the gradient), gradients ~1;
  b     6,   no decay;
  tiny  11,  no decay, gradients ~1e-8, so that sqrt(v) is of the order of eps
             and where eps sits in the denominator shows.
Per step t (1-based) the learning rate and the clipping scale vary (both exact
in float32; the C++ side multiplies the gradient by the scale as clipping
does, torch gets the scaled gradient). With beta2 = 0.98, rho_t crosses
torch's threshold 5 between steps 5 (4.92) and 6 (5.88): steps 1-5 are
un-adapted momentum steps, 6-12 rectified, and step 5 tells a threshold of 4
(the paper's) from torch's 5.

Stored (float32): param0.<name> [n], grads.<name> [steps, n] (unscaled),
radam.<name> / adam.<name> [steps, n] (params after each step), lr [steps],
grad_scale [steps], rho [steps]; metadata beta1, beta2, eps, weight_decay,
steps, decay (the tensors with decay). torch runs in float64 from the float32
inputs, so the file is the exact answer to float32 rounding. Before writing,
the script checks torch against the update written out by hand.

  /usr/bin/python3 tests/reference/make_radam_fixture.py [--out PATH]
Deterministic for a given torch version; CI only reads the file.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

STEPS = 12
BETA1, BETA2, EPS = 0.9, 0.98, 1e-8
WEIGHT_DECAY = 0.01
SHAPES = {"w": (7, 5), "b": (6,), "tiny": (11,)}
DECAY = ("w",)
SEED = 16


def f32(x):
    return float(np.float32(x))


def make_inputs():
    gen = torch.Generator().manual_seed(SEED)
    params, grads = {}, {}
    for name, shape in SHAPES.items():
        n = int(np.prod(shape))
        scale = 1e-2 if name == "tiny" else 0.5
        params[name] = (scale * torch.randn(n, generator=gen, dtype=torch.float64)).float()
        g = torch.randn(STEPS, n, generator=gen, dtype=torch.float64)
        g += 0.3  # a persistent direction, so that m does not average out
        g[8:] *= 4.0  # a jump in magnitude late: adam and radam part further
        if name == "tiny":
            g *= 1e-8
        grads[name] = g.float()
    # Learning rates near 0.02 and clipping scales, each exact in float32.
    lrs = [f32(0.02 * (1.0 + 0.25 * (t % 4))) for t in range(STEPS)]
    scales = [0.5 if t in (2, 7) else 1.0 for t in range(STEPS)]
    return params, grads, lrs, scales


def rho(t):
    rho_inf = 2.0 / (1.0 - BETA2) - 1.0
    return rho_inf - 2.0 * t * BETA2**t / (1.0 - BETA2**t)


def run_torch(kind, params, grads, lrs, scales):
    """Params after each step, float64 [steps, n] per tensor."""
    ps = {k: torch.nn.Parameter(v.double().clone()) for k, v in params.items()}
    groups = [{"params": [ps[k] for k in SHAPES if k in DECAY], "weight_decay": WEIGHT_DECAY},
              {"params": [ps[k] for k in SHAPES if k not in DECAY], "weight_decay": 0.0}]
    cls = torch.optim.RAdam if kind == "radam" else torch.optim.Adam
    opt = cls(groups, lr=lrs[0], betas=(BETA1, BETA2), eps=EPS)
    out = {k: [] for k in SHAPES}
    for t in range(STEPS):
        for group in opt.param_groups:
            group["lr"] = lrs[t]
        for k, p in ps.items():
            p.grad = grads[k][t].double() * scales[t]
        opt.step()
        for k, p in ps.items():
            out[k].append(p.detach().clone())
    return {k: torch.stack(v) for k, v in out.items()}


def by_hand_radam(params, grads, lrs, scales):
    """The update as trainer/optimizer.h states it, in numpy float64."""
    rho_inf = 2.0 / (1.0 - BETA2) - 1.0
    out = {}
    for k in SHAPES:
        p = params[k].double().numpy().copy()
        m = np.zeros_like(p)
        v = np.zeros_like(p)
        wd = WEIGHT_DECAY if k in DECAY else 0.0
        rows = []
        for t in range(1, STEPS + 1):
            g = grads[k][t - 1].double().numpy() * scales[t - 1] + wd * p
            m = BETA1 * m + (1 - BETA1) * g
            v = BETA2 * v + (1 - BETA2) * g * g
            bc1, bc2 = 1 - BETA1**t, 1 - BETA2**t
            r = rho(t)
            if r > 5:
                rect = math.sqrt((r - 4) * (r - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * r))
                p = p - lrs[t - 1] * rect * (m / bc1) * math.sqrt(bc2) / (np.sqrt(v) + EPS)
            else:
                p = p - lrs[t - 1] * m / bc1
            rows.append(p.copy())
        out[k] = np.stack(rows)
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(here, "fixtures", "radam_steps.safetensors"))
    args = ap.parse_args()

    rhos = [rho(t) for t in range(1, STEPS + 1)]
    crossing = [t for t in range(1, STEPS + 1) if rhos[t - 1] > 5.0][0]
    if not (4.0 < rhos[crossing - 2] <= 5.0 and crossing < STEPS - 2):
        raise RuntimeError(f"rho_t does not cross 5 mid-run with a step in (4, 5]: {rhos}")

    params, grads, lrs, scales = make_inputs()
    radam = run_torch("radam", params, grads, lrs, scales)
    adam = run_torch("adam", params, grads, lrs, scales)
    hand = by_hand_radam(params, grads, lrs, scales)
    for k in SHAPES:
        err = np.abs(radam[k].numpy() - hand[k]).max() / np.abs(hand[k]).max()
        if err > 1e-12:
            raise RuntimeError(f"torch RAdam and the update by hand differ on {k}: {err:.2e}")
        # Adam and RAdam must part clearly, or the test could not tell them apart.
        gap = np.abs(radam[k].numpy() - adam[k].numpy()).max() / np.abs(radam[k].numpy()).max()
        if gap < 1e-3:
            raise RuntimeError(f"adam and radam hardly differ on {k}: {gap:.2e}")

    tensors = {}
    for k in SHAPES:
        tensors["param0." + k] = params[k].numpy()
        tensors["grads." + k] = grads[k].numpy()
        tensors["radam." + k] = radam[k].float().numpy()
        tensors["adam." + k] = adam[k].float().numpy()
    tensors["lr"] = np.array(lrs, dtype=np.float32)
    tensors["grad_scale"] = np.array(scales, dtype=np.float32)
    tensors["rho"] = np.array(rhos, dtype=np.float32)
    metadata = {
        "beta1": repr(BETA1), "beta2": repr(BETA2), "eps": repr(EPS),
        "weight_decay": repr(WEIGHT_DECAY), "steps": str(STEPS), "decay": ",".join(DECAY),
        "first_rectified_step": str(crossing), "compute_dtype": "float64",
        "generator": f"tests/reference/make_radam_fixture.py, torch {torch.__version__}",
    }
    safetensors_io.write(args.out, tensors, metadata)
    got, got_meta = safetensors_io.read(args.out)
    if got_meta != metadata or list(got) != list(tensors) or any(
            got[k].tobytes() != np.ascontiguousarray(v).tobytes() for k, v in tensors.items()):
        raise RuntimeError(f"{args.out}: differs after reading back")
    print(f"{args.out}: {os.path.getsize(args.out)} bytes, {len(tensors)} tensors; rho_t "
          + " ".join(f"{r:.2f}" for r in rhos) + f"; first rectified step {crossing}")


if __name__ == "__main__":
    main()
