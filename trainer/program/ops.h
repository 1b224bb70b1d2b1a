// The ops the block program (trainer/program/block_program.h) is written
// in: the interface each backend implements (trainer/cpu/ in host memory,
// trainer/cuda/ in device memory) and the op-trace recorder of the tests.
// N = B*T rows, C = d_model, H heads, hd = C/H, V = vocabulary; row-major
// float arrays, as in trainer/cpu/ops.h. Each backward op says whether it
// overwrites (=) or accumulates into (+=) each gradient it writes.
//
// The program passes only pointers, sizes and host scalars: an op never
// returns a value the program branches on, so that one program serves a
// host backend and a device backend whose step is captured as a CUDA graph
// (no synchronisation, no allocation, the same pointers on every replay). A
// backend that can fail (cuBLAS) keeps its first error and reports it after
// the pass. This header includes no CUDA header.
#ifndef NORMSWEEP_TRAINER_PROGRAM_OPS_H_
#define NORMSWEEP_TRAINER_PROGRAM_OPS_H_

#include <cstddef>
#include <cstdint>

#include "trainer/settings/config.h"

namespace normsweep::trainer {

// A norm's weights: w (the gain) and b, null where the norm has no bias
// (RMSNorm).
struct NormWeights {
  const float* w = nullptr;
  const float* b = nullptr;
};
// Their gradients, in the same shape (db null without a bias).
struct NormGrads {
  float* dw = nullptr;
  float* db = nullptr;
};
// Per-row statistics a norm's forward saves for its backward: LayerNorm's
// mean and rstd, RMSNorm's rstd (mean unused).
struct NormStats {
  float* mean = nullptr;
  float* rstd = nullptr;
};
// One norm: its kind and where its rows are.
struct NormShape {
  NormKind kind = NormKind::kLayerNorm;
  int rows = 0, width = 0;
};

// QK-norm (one op): q and k of qkv (N,3C) normalised over each head's hd
// channels, q and k separately, with weights shared by the heads. The raw
// q and k (N,C) are kept for the backward; scratch and scratch2 are (N,C)
// buffers the op may use as it likes.
struct QkNormArgs {
  NormKind kind = NormKind::kLayerNorm;
  int N = 0, C = 0, H = 0;
  float* qkv = nullptr;
  float *q_raw = nullptr, *k_raw = nullptr;
  NormStats q, k;  // (N*H) rows each
  NormWeights qw, kw;
  float *scratch = nullptr, *scratch2 = nullptr;
};

class Ops {
 public:
  virtual ~Ops() = default;

  // out (N,C) = tok_emb[tokens] * scale + pos[t] (pos (T,C)); the tokens
  // are the pass's inputs, which the backend holds.
  virtual void Embed(float* out, const float* tok_emb, const float* pos, int B, int T, int C, float scale) = 0;
  // dtok_emb (V,C) = ; dpos (T,C) = , when not null.
  virtual void EmbedBackward(float* dtok_emb, float* dpos, const float* dout, int B, int T, int C, float scale) = 0;

  // out (N,O) = inp (N,I) @ w (O,I)^T + b (O).
  virtual void Matmul(float* out, const float* inp, const float* w, const float* b, int N, int I, int O) = 0;
  // dinp (N,I) = dout @ w, or += with accumulate (skipped when null);
  // dw (O,I) = dout^T @ inp; db (O) = column sums of dout.
  virtual void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                              int N, int I, int O, bool accumulate) = 0;

  // out (rows, width) = the norm of inp; stats saved.
  virtual void Norm(NormShape s, float* out, NormStats stats, const float* inp, NormWeights w) = 0;
  // dinp += ; g.dw = , g.db = .
  virtual void NormBackward(NormShape s, float* dinp, NormGrads g, const float* dout, const float* inp,
                            NormWeights w, NormStats stats) = 0;
  // In place on qkv (N,3C); see QkNormArgs.
  virtual void QkNorm(const QkNormArgs& a) = 0;
  // In place on dqkv (N,3C): the gradients of q and k become those of the
  // raw q and k (=); gq, gk = .
  virtual void QkNormBackward(const QkNormArgs& a, float* dqkv, NormGrads gq, NormGrads gk) = 0;

  // Causal multi-head attention of block `layer`: qkv (N,3C), q, k and v
  // each heads-contiguous; att (B,H,T,T) keeps the softmax probabilities,
  // out (N,C) the heads concatenated. The layer index lets a backend keep
  // its diagnostics (the attention logits' maxima in evaluation).
  virtual void Attention(int layer, float* out, float* att, const float* qkv, int B, int T, int C, int H) = 0;
  // dqkv (N,3C) = .
  virtual void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                                 int C, int H) = 0;

  // In place: x = max(x, 0).
  virtual void Relu(float* x, size_t n) = 0;
  // dx = dy where act > 0, else 0 (dx may be dy).
  virtual void ReluBackward(float* dx, const float* dy, const float* act, size_t n) = 0;

  // out = a * x + b * s (a residual sum scaled on both sides; out may
  // alias x or s).
  virtual void Residual(float* out, float a, const float* x, float b, const float* s, size_t n) = 0;
  // In place: x *= a.
  virtual void Scale(float* x, float a, size_t n) = 0;
  // x = 0.
  virtual void Zero(float* x, size_t n) = 0;
  // out = x * y elementwise (out may alias x).
  virtual void Multiply(float* out, const float* x, const float* y, size_t n) = 0;
  // Dropout of x (n elements) in place: mask = a fresh keep mask (0 or
  // 1/(1-p)) from the pass's dropout seed and `stream`, x *= mask.
  virtual void Dropout(float* x, float* mask, size_t n, float p, uint64_t stream) = 0;

  // Softmax of logits (N,V) into probs; per row the loss -log p[target]
  // and log Z (0 for ignored targets). The backend sums them into the
  // pass's statistics, against the targets it holds.
  virtual void CrossEntropy(float* probs, float* row_loss, float* row_log_z, const float* logits, int N, int V) = 0;
  // dlogits (N,V) = (probs - onehot(target)) * the pass's loss scale (1 /
  // the batch's target count), 0 for ignored rows; may alias probs.
  virtual void CrossEntropyBackward(float* dlogits, const float* probs, int N, int V) = 0;
  // With the z-loss (Wortsman et al. 2023): dlogits = (probs * (1 + 2
  // z_loss log Z_n) - onehot) * the loss scale; may alias probs.
  virtual void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, int N, int V,
                                         float z_loss) = 0;
};

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PROGRAM_OPS_H_
