// CPU kernels of the Transformer, llm.c style: each op is a forward/backward
// pair over row-major float arrays. N = B*T rows, C = d_model, H heads,
// hd = C/H, V = vocabulary. Backward functions that say "accumulates" add
// into their input gradient; the others overwrite. All parallel loops use
// static partitions, so a given thread count gives bit-identical results on
// CPUs that run the same kernel variant (kernel_variant.h: the kernels are
// built for x86-64, AVX2 and AVX-512 and picked at run time).
#ifndef NORMSWEEP_TRAINER_CPU_OPS_H_
#define NORMSWEEP_TRAINER_CPU_OPS_H_

#include <cstddef>
#include <cstdint>

namespace normsweep::trainer::cpu {

// Sets the thread count of our kernels and of the BLAS. Kernels called inside
// a parallel region (the CPU backend runs one part of a batch per thread) run
// on the calling thread alone, and so does OpenBLAS.
void SetThreads(int threads);

// out (N,C) = tok_emb[tokens] * emb_scale + pos (T,C) broadcast over B.
void EncoderForward(float* out, const int32_t* tokens, const float* tok_emb, const float* pos, int B,
                    int T, int C, float emb_scale);
// Overwrites dtok_emb (V,C); accumulates into dpos (T,C) when not null.
void EncoderBackward(float* dtok_emb, float* dpos, const float* dout, const int32_t* tokens, int B, int T,
                     int C, int V, float emb_scale);

// out (N,C) = (inp - mean) * rstd * w + b; mean, rstd (N) are saved for backward.
void LayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                      const float* b, int N, int C, float eps);
// Accumulates into dinp (N,C); overwrites dw, db (C).
void LayerNormBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp,
                       const float* w, const float* mean, const float* rstd, int N, int C);

// RMSNorm (Zhang & Sennrich 2019): out (N,C) = inp * rstd * w, rstd =
// 1/sqrt(mean(inp^2) + eps) saved (N) for backward. No centring, no bias.
void RmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps);
// Accumulates into dinp (N,C); overwrites dw (C).
void RmsNormBackward(float* dinp, float* dw, const float* dout, const float* inp, const float* w, const float* rstd,
                     int N, int C);

// out (N,O) = inp (N,I) @ w (O,I)^T + b (O).
void MatmulForward(float* out, const float* inp, const float* w, const float* b, int N, int I, int O);
// dinp (N,I) = dout @ w, added when accumulate is true (skipped when dinp is
// null); dw (O,I) = dout^T @ inp and db (O) = column sums, overwritten.
void MatmulBackward(float* dinp, float* dw, float* db, const float* dout, const float* inp, const float* w,
                    int N, int I, int O, bool accumulate);

// Causal multi-head attention. qkv (N,3C): q, k, v, heads contiguous in each.
// att (B,H,T,T) keeps the softmax probabilities; out (N,C) heads concatenated.
// max_logit (B*H), when not null, gets each (batch, head)'s largest attention
// logit q.k / sqrt(hd) over its causally visible (query, key) pairs.
void AttentionForward(float* out, float* att, const float* qkv, int B, int T, int C, int H, float* max_logit);
// Overwrites dqkv (N,3C).
void AttentionBackward(float* dqkv, const float* dout, const float* qkv, const float* att, int B, int T,
                       int C, int H);

// In place: x = max(x, 0).
void ReluForward(float* x, size_t n);
// dx = dy where the activation was positive, else 0 (overwrites dx; dx may equal dy).
void ReluBackward(float* dx, const float* dy, const float* act, size_t n);

// out = a + b, n elements (out may alias a or b).
void Add(float* out, const float* a, const float* b, size_t n);
// out = a * b elementwise (dropout: a keep mask of 0 or 1/(1-p)); out may alias a.
void Multiply(float* out, const float* a, const float* b, size_t n);
// mask = 1/(1-p) with probability 1-p, else 0; deterministic in seed.
void MakeDropoutMask(float* mask, size_t n, float p, uint64_t seed);
// Elements [first, first + n) of the mask MakeDropoutMask draws for a larger
// buffer, into mask[0, n): a slice of the batch gets its rows' mask. Serial.
void MakeDropoutMaskSlice(float* mask, size_t first, size_t n, float p, uint64_t seed);

struct CrossEntropyStats {
  double loss_sum = 0.0;
  int64_t count = 0;
  int64_t correct = 0;
  double log_z_sum = 0.0;  // log sum_j exp(logit_j) summed over the same rows
};
// Softmax of logits (N,V) into probs; sums -log p[target] and log Z over
// targets != -1. row_loss and row_log_z (N) are scratch (0 for ignored rows).
CrossEntropyStats CrossEntropyForward(float* probs, float* row_loss, float* row_log_z, const float* logits,
                                      const int32_t* targets, int N, int V);
// dlogits (N,V) = (probs - onehot(target)) * scale, 0 for ignored rows.
void CrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                          float scale);

// CrossEntropyBackward with the z-loss (Wortsman et al. 2023) added: the
// gradient of scale * sum_n (CE_n + z_loss * log Z_n^2) over rows whose target
// is not -1, dlogits (N,V) = (probs * (1 + 2 z_loss log Z_n) - onehot) * scale,
// 0 for ignored rows; row_log_z from CrossEntropyForward. dlogits may alias probs.
void CrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z, const int32_t* targets,
                               int N, int V, float scale, float z_loss);

// PE[p, 2i] = sin(p / 10000^(2i/C)), PE[p, 2i+1] = cos(...), into out (T,C).
void SinusoidalPositions(float* out, int T, int C);

}  // namespace normsweep::trainer::cpu

#endif  // NORMSWEEP_TRAINER_CPU_OPS_H_
