"""PyTorch reference of the normsweep Transformer LM (issue 2, DESIGN.md).

Decoder-only causal byte-level LM, Post-LN or Pre-LN (Xiong et al. 2020).
Parameter names and layouts are the checkpoint names of normsweep-train
(nn.Linear weight is [out, in]):

  tok_emb.weight            [256, d]
  pos_emb.weight            [seq_len, d]      learned positions only
  blocks.i.ln1.{weight,bias}                  [d]   (attention sublayer)
  blocks.i.attn.qkv.{weight,bias}             [3d, d], [3d]: q rows, k rows, v rows;
                                              head h of q is rows h*hd:(h+1)*hd
  blocks.i.attn.proj.{weight,bias}            [d, d], [d]
  blocks.i.ln2.{weight,bias}                  [d]   (FFN sublayer)
  blocks.i.ffn.fc1.{weight,bias}              [d_ff, d], [d_ff]
  blocks.i.ffn.fc2.{weight,bias}              [d, d_ff], [d]
  ln_f.{weight,bias}                          [d]   Pre-LN only
  head.{weight,bias}                          [256, d], [256]  (untied)

Maths (fixed by the issue):
  x = tok_emb[tokens] * sqrt(d) + PE
  Post-LN block: x = ln1(x + attn(x));  x = ln2(x + ffn(x))
  Pre-LN block:  x = x + attn(ln1(x));  x = x + ffn(ln2(x));  ln_f after the last block
  attn: per head softmax(q k^T / sqrt(d/heads) + causal mask) v, heads concatenated, proj
  ffn: fc2(relu(fc1(x)));  LayerNorm eps 1e-5;  no dropout here.
  loss = mean cross-entropy over targets != -1.

Only torch and the standard library are needed; the module works in any dtype
(make_fixtures.py runs it in float64).
"""

import dataclasses
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB_SIZE = 256
LN_EPS = 1e-5
IGNORE_INDEX = -1


@dataclasses.dataclass
class ModelConfig:
    placement: str = "post"  # "post" | "pre"
    layers: int = 6
    d_model: int = 128
    heads: int = 4
    d_ff: int = 256
    seq_len: int = 64
    positions: str = "sinusoidal"  # "sinusoidal" | "learned"

    def validate(self):
        if self.placement not in ("post", "pre"):
            raise ValueError(f"placement: must be post or pre, got {self.placement!r}")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions: must be sinusoidal or learned, got {self.positions!r}")
        for name in ("layers", "d_model", "heads", "d_ff", "seq_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive")
        if self.d_model % self.heads:
            raise ValueError("heads: must divide d_model")

    def metadata(self):
        """The safetensors __metadata__ keys that describe the model."""
        return {
            "placement": self.placement,
            "layers": str(self.layers),
            "d_model": str(self.d_model),
            "heads": str(self.heads),
            "d_ff": str(self.d_ff),
            "seq_len": str(self.seq_len),
            "positions": self.positions,
        }

    @staticmethod
    def from_metadata(meta):
        return ModelConfig(
            placement=meta["placement"],
            layers=int(meta["layers"]),
            d_model=int(meta["d_model"]),
            heads=int(meta["heads"]),
            d_ff=int(meta["d_ff"]),
            seq_len=int(meta["seq_len"]),
            positions=meta.get("positions", "sinusoidal"),
        )


def sinusoidal_positions(seq_len, d, dtype=torch.float64):
    """PE [seq_len, d]: PE[p, 2i] = sin(p / 10000^(2i/d)), PE[p, 2i+1] = cos(same)."""
    pos = torch.arange(seq_len, dtype=torch.float64)[:, None]
    two_i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]
    angle = pos / torch.pow(10000.0, two_i / d)  # [seq_len, ceil(d/2)]
    pe = torch.zeros(seq_len, d, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(angle)
    pe[:, 1::2] = torch.cos(angle[:, : d // 2])
    return pe.to(dtype)


class CausalSelfAttention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        # x [B, T, d] -> [B, T, d]
        B, T, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).split(d, dim=-1)  # each [B, T, d], heads contiguous
        q = q.view(B, T, self.heads, hd).transpose(1, 2)  # [B, H, T, hd]
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)  # [B, H, T, T]
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        scores = scores.masked_fill(mask, float("-inf"))
        att = torch.softmax(scores, dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, d)  # heads concatenated
        return self.proj(y)


class FeedForward(nn.Module):
    def __init__(self, d, d_ff):
        super().__init__()
        self.fc1 = nn.Linear(d, d_ff)
        self.fc2 = nn.Linear(d_ff, d)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.placement = cfg.placement
        self.ln1 = nn.LayerNorm(cfg.d_model, eps=LN_EPS)
        self.attn = CausalSelfAttention(cfg.d_model, cfg.heads)
        self.ln2 = nn.LayerNorm(cfg.d_model, eps=LN_EPS)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff)

    def forward(self, x):
        if self.placement == "post":
            x = self.ln1(x + self.attn(x))
            x = self.ln2(x + self.ffn(x))
        else:
            x = x + self.attn(self.ln1(x))
            x = x + self.ffn(self.ln2(x))
        return x


class TransformerLM(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        d = cfg.d_model
        self.tok_emb = nn.Embedding(VOCAB_SIZE, d)
        if cfg.positions == "learned":
            self.pos_emb = nn.Embedding(cfg.seq_len, d)
        else:
            self.pos_emb = None
            # Not a parameter and not in state_dict(): checkpoints never carry it.
            self.register_buffer("pe", sinusoidal_positions(cfg.seq_len, d), persistent=False)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(d, eps=LN_EPS) if cfg.placement == "pre" else None
        self.head = nn.Linear(d, VOCAB_SIZE)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, generator=None):
        """Xavier-uniform weights (q, k, v blocks of qkv separately), zero biases,
        LayerNorm 1/0, embeddings normal(0, d^-0.5)."""
        d = self.cfg.d_model

        def xavier(w):
            fan_out, fan_in = w.shape
            a = math.sqrt(6.0 / (fan_in + fan_out))
            w.uniform_(-a, a, generator=generator)

        for name, p in self.named_parameters():
            if name.endswith("emb.weight"):
                p.normal_(0.0, d ** -0.5, generator=generator)
            elif ".ln" in name or name.startswith("ln_f."):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif name.endswith("attn.qkv.weight"):
                for block in p.split(d, dim=0):
                    xavier(block)
            else:
                xavier(p)

    def forward(self, tokens, targets=None):
        # tokens [B, T] int64 -> logits [B, T, 256]; loss a scalar when targets given
        B, T = tokens.shape
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence of {T} tokens is longer than seq_len {self.cfg.seq_len}")
        x = self.tok_emb(tokens) * math.sqrt(self.cfg.d_model)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[:T]
        else:
            x = x + self.pe[:T].to(x.dtype)
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), targets.reshape(-1),
                               ignore_index=IGNORE_INDEX)
        return logits, loss


@torch.no_grad()
def instability_diagnostics(model, tokens, targets):
    """Wortsman et al. 2023's diagnostics of one batch, stated from the maths
    rather than from forward()'s code path (so a slip in either shows):
      max_attn_logit [layers]: per block, max over batch, heads and causally
        visible (query t, key s <= t) pairs of q_t . k_s / sqrt(d/heads);
      log_z: mean over the targets != -1 of logsumexp(logits) at that position.
    """
    cfg = model.cfg
    B, T = tokens.shape
    d, H = cfg.d_model, cfg.heads
    hd = d // H
    x = model.tok_emb(tokens) * math.sqrt(d)
    x = x + (model.pos_emb.weight[:T] if model.pos_emb is not None else model.pe[:T].to(x.dtype))
    visible = torch.ones(T, T, dtype=torch.bool).tril()  # [query, key]
    maxima = []
    for block in model.blocks:
        a = block.ln1(x) if cfg.placement == "pre" else x  # the attention sublayer's input
        w, b = block.attn.qkv.weight, block.attn.qkv.bias
        q = (a @ w[:d].T + b[:d]).view(B, T, H, hd)
        k = (a @ w[d:2 * d].T + b[d:2 * d]).view(B, T, H, hd)
        logits = torch.einsum("bthi,bshi->bhts", q, k) / math.sqrt(hd)
        maxima.append(logits[:, :, visible].max().item())
        x = block(x)
    if model.ln_f is not None:
        x = model.ln_f(x)
    log_z = torch.logsumexp(model.head(x), dim=-1)  # [B, T]
    return maxima, log_z[targets != IGNORE_INDEX].mean().item()


# The weight matrices whose update-to-weight RMS ratio the trainer reports, per block.
UPDATE_RATIO_MATRICES = ("attn.qkv", "attn.proj", "ffn.fc1", "ffn.fc2")


def update_ratios(before, after, layers):
    """[layers, 4]: RMS(after - before) / RMS(before) of each block's
    UPDATE_RATIO_MATRICES weights, from two {name: tensor} dicts."""
    out = []
    for i in range(layers):
        row = []
        for m in UPDATE_RATIO_MATRICES:
            name = f"blocks.{i}.{m}.weight"
            w0, w1 = before[name], after[name]
            row.append(math.sqrt(((w1 - w0) ** 2).sum().item() / (w0 ** 2).sum().item()))
        out.append(row)
    return out


def matmul_params(cfg):
    """Parameters that take part in a matrix product (no embeddings, LN, biases)."""
    d, f = cfg.d_model, cfg.d_ff
    per_layer = 3 * d * d + d * d + f * d + d * f
    return cfg.layers * per_layer + VOCAB_SIZE * d


def training_flops_per_token(cfg):
    """6 * matmul params + 12 * layers * seq_len * d  (PaLM's count: forward is
    2 flops per matmul weight plus 4*T*d for q k^T and att v over the full T x T
    score matrix; backward is twice the forward)."""
    return 6 * matmul_params(cfg) + 12 * cfg.layers * cfg.seq_len * cfg.d_model
