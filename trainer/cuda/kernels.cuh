// CUDA kernels of the Transformer: the non-GEMM half of each op (the matrix
// products are cuBLAS calls in cuda_forward_backward.cu). Same conventions as
// trainer/cpu/ops.h: N = B*T rows, C = d_model, H heads, hd = C/H,
// V = vocabulary, row-major arrays. No kernel uses atomics: every reduction
// has a fixed order, so a run is bit-identical from one launch to the next.
// Values that change from step to step (dropout seed, loss scale) are read
// from device memory so that a captured CUDA graph can be replayed.
// Defined in trainer/cuda/kernels/, one .cu per op family, each opening with
// the gradients its backward kernels overwrite (=) or accumulate into (+=).
#ifndef NORMSWEEP_TRAINER_CUDA_KERNELS_CUH_
#define NORMSWEEP_TRAINER_CUDA_KERNELS_CUH_

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainer/optimizer.h"

namespace normsweep::trainer::cuda {

// out (N,C) = tok_emb[tokens] * scale + pos[t] (pos is (T,C)).
void LaunchEncoderForward(float* out, const int32_t* tokens, const float* tok_emb, const float* pos, int N,
                          int T, int C, float scale, cudaStream_t s);
// onehot (N,V) = scale where v == tokens[n], else 0: the token-embedding
// gradient is then onehot^T @ dout, one deterministic GEMM.
void LaunchOneHot(float* onehot, const int32_t* tokens, int N, int V, float scale, cudaStream_t s);
// dpos (T,C) = sum over b of dout[b*T + t] (overwrites).
void LaunchPositionGrad(float* dpos, const float* dout, int B, int T, int C, cudaStream_t s);

// LayerNorm over rows of C, saving mean and rstd (N) for backward.
void LaunchLayerNormForward(float* out, float* mean, float* rstd, const float* inp, const float* w,
                            const float* b, int N, int C, float eps, cudaStream_t s);
// dinp (N,C) += LayerNorm backward (accumulates, as on the CPU).
void LaunchLayerNormInputGrad(float* dinp, const float* dout, const float* inp, const float* w,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s);
// dw = sum_n dout * xhat, db = sum_n dout (overwrite). partial: scratch of
// ColumnReducePartialFloats(N, C) floats.
void LaunchLayerNormParamGrad(float* dw, float* db, float* partial, const float* dout, const float* inp,
                              const float* mean, const float* rstd, int N, int C, cudaStream_t s);
// RMSNorm (Zhang & Sennrich 2019) over rows of C: out = inp * rstd * w,
// rstd = 1/sqrt(mean(inp^2) + eps) saved (N) for backward; no mean, no bias.
void LaunchRmsNormForward(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps,
                          cudaStream_t s);
// dinp (N,C) += RMSNorm backward (accumulates, as on the CPU).
void LaunchRmsNormInputGrad(float* dinp, const float* dout, const float* inp, const float* w, const float* rstd,
                            int N, int C, cudaStream_t s);
// dw = sum_n dout * inp * rstd (overwrites); partial as below.
void LaunchRmsNormParamGrad(float* dw, float* partial, const float* dout, const float* inp, const float* rstd, int N,
                            int C, cudaStream_t s);
// db (O) = column sums of dout (N,O) (overwrites); partial as above.
void LaunchColumnSums(float* db, float* partial, const float* dout, int N, int O, cudaStream_t s);
size_t ColumnReducePartialFloats(int N, int C);

// out (N,O) += bias broadcast over rows.
void LaunchAddBias(float* out, const float* bias, int N, int O, cudaStream_t s);

// qkv (B,T,3,H,hd) -> q, k, v each (B,H,T,hd).
void LaunchSplitHeads(float* q, float* k, float* v, const float* qkv, int B, int T, int H, int hd,
                      cudaStream_t s);
// The inverse: q, k, v (B,H,T,hd) -> qkv (B,T,3,H,hd). Used for gradients.
void LaunchMergeQkvHeads(float* qkv, const float* q, const float* k, const float* v, int B, int T, int H,
                         int hd, cudaStream_t s);
// y (B,H,T,hd) <-> out (B,T,H*hd).
void LaunchMergeHeads(float* out, const float* y, int B, int T, int H, int hd, cudaStream_t s);
void LaunchSplitOutputHeads(float* y, const float* out, int B, int T, int H, int hd, cudaStream_t s);

// In place over rows (BH*T rows of T): p = causal softmax(scale * scores),
// zero above the diagonal. row_max (BH*T), when not null, gets each row's
// largest attention logit scale * score over its visible keys.
void LaunchCausalSoftmax(float* att, float* row_max, int BH, int T, float scale, cudaStream_t s);
// In place: datt becomes d(scores) = scale * p * (datt - sum_j p datt).
void LaunchCausalSoftmaxBackward(float* datt, const float* att, int BH, int T, float scale, cudaStream_t s);

// Elementwise.
void LaunchRelu(float* x, size_t n, cudaStream_t s);
void LaunchReluBackward(float* dx, const float* act, size_t n, cudaStream_t s);  // in place on dx
void LaunchAdd(float* out, const float* a, const float* b, size_t n, cudaStream_t s);
void LaunchMultiply(float* out, const float* a, const float* b, size_t n, cudaStream_t s);
// out = alpha * a + b (DeepNorm's residual); out may alias a or b.
void LaunchScaledAdd(float* out, float alpha, const float* a, const float* b, size_t n, cudaStream_t s);
// out = alpha * a + beta * b (a residual scaled on both sides); out may alias a or b.
void LaunchScaledSum(float* out, float alpha, const float* a, float beta, const float* b, size_t n, cudaStream_t s);
// In place: x *= alpha.
void LaunchScale(float* x, float alpha, size_t n, cudaStream_t s);
// The CPU backend's counter-based mask (trainer/cpu/ops.cc MakeDropoutMask),
// bit for bit, seeded with MixSeed(*base_seed, stream).
void LaunchDropoutMask(float* mask, size_t n, float p, const uint64_t* base_seed, uint64_t stream,
                       cudaStream_t s);

// Softmax of logits (N,V) into probs; per row the loss -log p[target], log Z
// = log sum_j exp(logit_j) and whether the argmax (first maximum) is the
// target; 0 for targets of -1.
void LaunchCrossEntropyForward(float* probs, float* row_loss, float* row_log_z, int32_t* row_correct,
                               const float* logits, const int32_t* targets, int N, int V, cudaStream_t s);
// dlogits = (probs - onehot(target)) * (*scale), 0 for ignored rows. May
// alias probs.
void LaunchCrossEntropyBackward(float* dlogits, const float* probs, const int32_t* targets, int N, int V,
                                const float* scale, cudaStream_t s);

// LaunchCrossEntropyBackward with the z-loss (Wortsman et al. 2023): the
// gradient of (*scale) * sum_n (CE_n + z_loss * log Z_n^2) over counted rows,
// dlogits = (probs * (1 + 2 z_loss log Z_n) - onehot) * (*scale), 0 for
// ignored rows; row_log_z from the forward kernel. May alias probs.
void LaunchCrossEntropyZLossBackward(float* dlogits, const float* probs, const float* row_log_z,
                                     const int32_t* targets, int N, int V, const float* scale, float z_loss,
                                     cudaStream_t s);

// The optimizer updates of trainer/optimizer.h, over params[0, n).
void LaunchAdam(float* p, const float* g, float* m, float* v, size_t n, AdamCoefficients a, cudaStream_t s);
void LaunchRAdam(float* p, const float* g, float* m, float* v, size_t n, RAdamCoefficients a, cudaStream_t s);
void LaunchSgd(float* p, const float* g, float* m, size_t n, SgdCoefficients a, cudaStream_t s);

// Sum of squares of segments of x: out[i] = sum over [begin[i], begin[i]+len[i])
// in double. One block per segment.
void LaunchSegmentSquaredNorms(double* out, const float* x, const size_t* begin, const size_t* len,
                               int segments, cudaStream_t s);

// The update of an optimizer step, per segment as above, in double:
// update[i] = sum (after - before)^2, weight[i] = sum before^2.
void LaunchSegmentUpdateSquaredNorms(double* update, double* weight, const float* after, const float* before,
                                     const size_t* begin, const size_t* len, int segments, cudaStream_t s);

// out[i] = max of x[i * len, (i + 1) * len), -inf when len is 0. One block per segment.
void LaunchSegmentMax(float* out, const float* x, int segments, int len, cudaStream_t s);

}  // namespace normsweep::trainer::cuda

#endif  // NORMSWEEP_TRAINER_CUDA_KERNELS_CUH_
