"""PyTorch reference of the normsweep Transformer LM (issue 2, DESIGN.md; issue 24).

Decoder-only causal byte-level LM, Post-LN or Pre-LN (Xiong et al. 2020), and
issue 24's family: Peri-LN, DeepNorm, Mix-LN, qk_norm, RMSNorm (the z-loss is
a term of forward()'s loss).
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
  ln_f.{weight,bias}                          [d]   when the last block is Pre-LN or Peri-LN
  head.{weight,bias}                          [256, d], [256]  (untied)
Issue 24 adds (RMSNorm norms have a weight only, no bias):
  ln_emb.{weight,bias}                        [d]   Peri-LN: the embedding's norm
  blocks.i.ln1_out.{weight,bias}, blocks.i.ln2_out.{weight,bias}
                                              [d]   Peri-LN: the sublayers' output norms
  blocks.i.attn.q_norm.{weight,bias}, blocks.i.attn.k_norm.{weight,bias}
                                              [d/heads]  qk_norm: over head_dim,
                                              one set shared by all heads

Maths (fixed by the issue):
  x = tok_emb[tokens] * sqrt(d) + PE
  Post-LN block: x = ln1(x + attn(x));  x = ln2(x + ffn(x))
  Pre-LN block:  x = x + attn(ln1(x));  x = x + ffn(ln2(x));  ln_f after the last block
  Peri-LN block: x = x + ln1_out(attn(ln1(x)));  x = x + ln2_out(ffn(ln2(x)));
                 ln_emb on the embedding, ln_f after the last block (Kim et al. 2025)
  DeepNorm block: x = ln1(a x + attn(x));  x = ln2(a x + ffn(x)), a = (2N)^(1/4);
                 v, proj, fc1, fc2 initialised with Xavier gain (8N)^(-1/4) (Wang et al. 2022)
  Mix-LN: blocks i < floor(mix_post_fraction * N) Post-LN, the rest Pre-LN, ln_f
                 when the last block is Pre-LN (Li et al. 2024)
  qk_norm: q and k normalised over each head's hd channels before q k^T
  RMSNorm: x / sqrt(mean(x^2) + eps) * weight, for every norm (Zhang & Sennrich 2019)
  attn: per head softmax(q k^T / sqrt(d/heads) + causal mask) v, heads concatenated, proj
  ffn: fc2(relu(fc1(x)));  LayerNorm eps 1e-5;  no dropout here.
  loss = mean cross-entropy over targets != -1, plus z_loss * mean (log Z)^2
  over the same positions when z_loss > 0 (Wortsman et al. 2023).

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


PLACEMENTS = ("post", "pre", "peri", "deepnorm", "mix")
NORMS = ("layernorm", "rmsnorm")
DEFAULT_MIX_POST_FRACTION = 0.25


@dataclasses.dataclass
class ModelConfig:
    placement: str = "post"  # one of PLACEMENTS
    layers: int = 6
    d_model: int = 128
    heads: int = 4
    d_ff: int = 256
    seq_len: int = 64
    positions: str = "sinusoidal"  # "sinusoidal" | "learned"
    mix_post_fraction: float = DEFAULT_MIX_POST_FRACTION  # mix only
    qk_norm: bool = False
    norm: str = "layernorm"  # one of NORMS

    def block_placement(self, i):
        """How block i is built: post, pre, peri or deepnorm (mix resolved)."""
        if self.placement != "mix":
            return self.placement
        return "post" if i < math.floor(self.mix_post_fraction * self.layers) else "pre"

    def has_final_norm(self):
        return self.block_placement(self.layers - 1) in ("pre", "peri")

    def residual_alpha(self):
        return (2.0 * self.layers) ** 0.25 if self.placement == "deepnorm" else 1.0

    def deepnorm_beta(self):
        return (8.0 * self.layers) ** -0.25 if self.placement == "deepnorm" else 1.0

    def validate(self):
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement: must be one of {', '.join(PLACEMENTS)}, got {self.placement!r}")
        if self.norm not in NORMS:
            raise ValueError(f"norm: must be layernorm or rmsnorm, got {self.norm!r}")
        if not 0.0 <= self.mix_post_fraction <= 1.0:
            raise ValueError(f"mix_post_fraction: must be in [0, 1], got {self.mix_post_fraction}")
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions: must be sinusoidal or learned, got {self.positions!r}")
        for name in ("layers", "d_model", "heads", "d_ff", "seq_len"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name}: must be positive")
        if self.d_model % self.heads:
            raise ValueError("heads: must divide d_model")

    def metadata(self):
        """The safetensors __metadata__ keys that describe the model (issue 24's
        keys only where they differ from the defaults, as the trainer writes them)."""
        meta = {
            "placement": self.placement,
            "layers": str(self.layers),
            "d_model": str(self.d_model),
            "heads": str(self.heads),
            "d_ff": str(self.d_ff),
            "seq_len": str(self.seq_len),
            "positions": self.positions,
        }
        if self.placement == "mix":
            meta["mix_post_fraction"] = repr(float(self.mix_post_fraction))
        if self.qk_norm:
            meta["qk_norm"] = "true"
        if self.norm != "layernorm":
            meta["norm"] = self.norm
        return meta

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
            mix_post_fraction=float(meta.get("mix_post_fraction", DEFAULT_MIX_POST_FRACTION)),
            qk_norm=meta.get("qk_norm", "false") == "true",
            norm=meta.get("norm", "layernorm"),
        )


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight over the last dimension (Zhang &
    Sennrich 2019); no centring, no bias. eps 1e-5 as the LayerNorms."""

    def __init__(self, size, eps=LN_EPS):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(size))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def make_norm(cfg, size):
    """One of the model's norms: nn.LayerNorm or RMSNorm, per cfg.norm."""
    return RMSNorm(size) if cfg.norm == "rmsnorm" else nn.LayerNorm(size, eps=LN_EPS)


def is_norm_param(name):
    """Whether a parameter name belongs to a norm (LayerNorm or RMSNorm)."""
    return name.startswith("ln_") or ".ln" in name or "_norm." in name


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
    def __init__(self, d, heads, cfg=None):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        if cfg is not None and cfg.qk_norm:
            # One norm over head_dim for q and one for k, shared by all heads.
            self.q_norm = make_norm(cfg, d // heads)
            self.k_norm = make_norm(cfg, d // heads)
        else:
            self.q_norm = self.k_norm = None
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        # x [B, T, d] -> [B, T, d]
        B, T, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(x).split(d, dim=-1)  # each [B, T, d], heads contiguous
        q = q.view(B, T, self.heads, hd).transpose(1, 2)  # [B, H, T, hd]
        k = k.view(B, T, self.heads, hd).transpose(1, 2)
        v = v.view(B, T, self.heads, hd).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
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
    def __init__(self, cfg, index=0):
        super().__init__()
        self.placement = cfg.block_placement(index)
        self.alpha = cfg.residual_alpha()
        d = cfg.d_model
        # Registration order is the parameters' order (the fixtures' tensor order).
        self.ln1 = make_norm(cfg, d)
        self.ln1_out = make_norm(cfg, d) if self.placement == "peri" else None
        self.attn = CausalSelfAttention(d, cfg.heads, cfg)
        self.ln2 = make_norm(cfg, d)
        self.ln2_out = make_norm(cfg, d) if self.placement == "peri" else None
        self.ffn = FeedForward(d, cfg.d_ff)

    def forward(self, x):
        if self.placement == "post":
            x = self.ln1(x + self.attn(x))
            x = self.ln2(x + self.ffn(x))
        elif self.placement == "deepnorm":
            x = self.ln1(self.alpha * x + self.attn(x))
            x = self.ln2(self.alpha * x + self.ffn(x))
        elif self.placement == "peri":
            x = x + self.ln1_out(self.attn(self.ln1(x)))
            x = x + self.ln2_out(self.ffn(self.ln2(x)))
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
        self.ln_emb = make_norm(cfg, d) if cfg.placement == "peri" else None
        self.blocks = nn.ModuleList(Block(cfg, i) for i in range(cfg.layers))
        self.ln_f = make_norm(cfg, d) if cfg.has_final_norm() else None
        self.head = nn.Linear(d, VOCAB_SIZE)
        self.reset_parameters()

    @torch.no_grad()
    def reset_parameters(self, generator=None):
        """Xavier-uniform weights (q, k, v blocks of qkv separately), zero biases,
        norms 1/0, embeddings normal(0, d^-0.5). DeepNorm: v, proj, fc1 and fc2
        with Xavier gain beta = (8N)^(-1/4), q and k gain 1 (torchscale divides
        those weights by (8N)^(1/4) after its init)."""
        d = self.cfg.d_model
        beta = self.cfg.deepnorm_beta()

        def xavier(w, gain=1.0):
            fan_out, fan_in = w.shape
            a = gain * math.sqrt(6.0 / (fan_in + fan_out))
            w.uniform_(-a, a, generator=generator)

        for name, p in self.named_parameters():
            if name.endswith("tok_emb.weight") or name.endswith("pos_emb.weight"):
                p.normal_(0.0, d ** -0.5, generator=generator)
            elif is_norm_param(name):
                p.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith(".bias"):
                p.zero_()
            elif name.endswith("attn.qkv.weight"):
                for i, block in enumerate(p.split(d, dim=0)):
                    xavier(block, beta if i == 2 else 1.0)
            elif name == "head.weight":
                xavier(p)
            else:
                xavier(p, beta)

    def forward(self, tokens, targets=None, z_loss=0.0):
        # tokens [B, T] int64 -> logits [B, T, 256]; loss a scalar when targets
        # given: cross-entropy, plus z_loss * mean (log Z)^2 when z_loss > 0
        B, T = tokens.shape
        if T > self.cfg.seq_len:
            raise ValueError(f"sequence of {T} tokens is longer than seq_len {self.cfg.seq_len}")
        x = self.tok_emb(tokens) * math.sqrt(self.cfg.d_model)
        if self.pos_emb is not None:
            x = x + self.pos_emb.weight[:T]
        else:
            x = x + self.pe[:T].to(x.dtype)
        if self.ln_emb is not None:
            x = self.ln_emb(x)
        for block in self.blocks:
            x = block(x)
        if self.ln_f is not None:
            x = self.ln_f(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        loss = F.cross_entropy(logits.reshape(-1, VOCAB_SIZE), targets.reshape(-1),
                               ignore_index=IGNORE_INDEX)
        if z_loss > 0:
            counted = targets.reshape(-1) != IGNORE_INDEX
            log_z = torch.logsumexp(logits.reshape(-1, VOCAB_SIZE), dim=-1)[counted]
            loss = loss + z_loss * (log_z ** 2).mean()
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
    T = tokens.shape[1]
    x = embed(model, tokens)
    visible = torch.ones(T, T, dtype=torch.bool).tril()  # [query, key]
    maxima = []
    for block in model.blocks:
        logits = attention_logits(model, block, x)
        maxima.append(logits[:, :, visible].max().item())
        x = block(x)
    if model.ln_f is not None:
        x = model.ln_f(x)
    log_z = torch.logsumexp(model.head(x), dim=-1)  # [B, T]
    return maxima, log_z[targets != IGNORE_INDEX].mean().item()


def embed(model, tokens):
    """The first block's input: scaled token embedding plus positions, then
    ln_emb under Peri-LN."""
    T = tokens.shape[1]
    x = model.tok_emb(tokens) * math.sqrt(model.cfg.d_model)
    x = x + (model.pos_emb.weight[:T] if model.pos_emb is not None else model.pe[:T].to(x.dtype))
    return model.ln_emb(x) if model.ln_emb is not None else x


def attention_logits(model, block, x):
    """[B, H, T, T]: q_t . k_s / sqrt(hd) of one block for its input x, every
    (query t, key s) pair, after qk_norm when on (what the trainer's
    diagnostic reports), written out from the weights."""
    cfg = model.cfg
    B, T, d = x.shape
    H = cfg.heads
    hd = d // H
    a = block.ln1(x) if block.placement in ("pre", "peri") else x  # the attention sublayer's input
    w, b = block.attn.qkv.weight, block.attn.qkv.bias
    q = (a @ w[:d].T + b[:d]).view(B, T, H, hd)
    k = (a @ w[d:2 * d].T + b[d:2 * d]).view(B, T, H, hd)
    if block.attn.q_norm is not None:
        q, k = block.attn.q_norm(q), block.attn.k_norm(k)
    return torch.einsum("bthi,bshi->bhts", q, k) / math.sqrt(hd)


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
