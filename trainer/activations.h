// What a forward pass saves for the backward pass, block by block, and how
// both backends lay those buffers out in one arena (the CPU in host memory,
// the CUDA backend in device memory).
#ifndef NORMSWEEP_TRAINER_ACTIVATIONS_H_
#define NORMSWEEP_TRAINER_ACTIVATIONS_H_

#include <cstddef>
#include <utility>
#include <vector>

#include "trainer/config.h"

namespace normsweep::trainer {

// Saved activations of one block, each (N, ...) for N = B*T rows.
struct BlockActivations {
  float* x_in = nullptr;  // the block's input (the previous block's output)
  float *ln1_out = nullptr, *ln1_mean = nullptr, *ln1_rstd = nullptr;
  float *qkv = nullptr, *att = nullptr, *atty = nullptr, *attn_out = nullptr, *res1 = nullptr;
  float *ln2_out = nullptr, *ln2_mean = nullptr, *ln2_rstd = nullptr;
  float *fc1_act = nullptr, *ffn_out = nullptr, *res2 = nullptr;
  float *attn_mask = nullptr, *ffn_mask = nullptr;  // dropout keep masks, when dropout > 0
  // Peri-LN: the output norms of the attention (ln1_out) and FFN (ln2_out)
  // sublayers, over attn_out and ffn_out.
  float *ln1o_out = nullptr, *ln1o_mean = nullptr, *ln1o_rstd = nullptr;
  float *ln2o_out = nullptr, *ln2o_mean = nullptr, *ln2o_rstd = nullptr;
  // qk_norm: q and k before their norm, (N*H, hd) each, and the norms' row
  // statistics (N*H); the normalised q and k are in qkv.
  float *q_raw = nullptr, *k_raw = nullptr;
  float *q_mean = nullptr, *q_rstd = nullptr, *k_mean = nullptr, *k_rstd = nullptr;
  // How this block is built (ModelConfig::BlockPlacement: never kMix).
  Placement kind = Placement::kPostLN;
  bool pre_ln = false;  // kind == kPreLN
  // Normalising inside the residual stream (Post-LN, DeepNorm): out is ln2_out, else res2.
  bool norm_after_residual() const { return kind == Placement::kPostLN || kind == Placement::kDeepNorm; }
  const float* out() const { return norm_after_residual() ? ln2_out : res2; }
};

// (where the buffer's pointer goes, its size in floats), in arena order.
using BufferPlan = std::vector<std::pair<float**, size_t>>;

// Resets blocks to one entry per layer and plans their buffers for B
// windows of model.seq_len tokens.
inline void PlanBlockActivations(const ModelConfig& model, int B, std::vector<BlockActivations>* blocks,
                                 BufferPlan* plan) {
  const size_t T = static_cast<size_t>(model.seq_len), N = static_cast<size_t>(B) * T;
  const size_t C = static_cast<size_t>(model.d_model), F = static_cast<size_t>(model.d_ff);
  const size_t H = static_cast<size_t>(model.heads);
  blocks->assign(static_cast<size_t>(model.layers), BlockActivations{});
  for (size_t l = 0; l < blocks->size(); ++l) {
    BlockActivations& a = (*blocks)[l];
    a.kind = model.BlockPlacement(static_cast<int>(l));
    a.pre_ln = a.kind == Placement::kPreLN;
    plan->push_back({&a.ln1_out, N * C});
    plan->push_back({&a.ln1_mean, N});
    plan->push_back({&a.ln1_rstd, N});
    plan->push_back({&a.qkv, N * 3 * C});
    plan->push_back({&a.att, static_cast<size_t>(B) * H * T * T});
    plan->push_back({&a.atty, N * C});
    plan->push_back({&a.attn_out, N * C});
    plan->push_back({&a.res1, N * C});
    plan->push_back({&a.ln2_out, N * C});
    plan->push_back({&a.ln2_mean, N});
    plan->push_back({&a.ln2_rstd, N});
    plan->push_back({&a.fc1_act, N * F});
    plan->push_back({&a.ffn_out, N * C});
    plan->push_back({&a.res2, N * C});
    if (model.dropout > 0.0f) {
      plan->push_back({&a.attn_mask, N * C});
      plan->push_back({&a.ffn_mask, N * C});
    }
    if (a.kind == Placement::kPeriLN) {
      plan->push_back({&a.ln1o_out, N * C});
      plan->push_back({&a.ln1o_mean, N});
      plan->push_back({&a.ln1o_rstd, N});
      plan->push_back({&a.ln2o_out, N * C});
      plan->push_back({&a.ln2o_mean, N});
      plan->push_back({&a.ln2o_rstd, N});
    }
    if (model.qk_norm) {
      plan->push_back({&a.q_raw, N * C});
      plan->push_back({&a.k_raw, N * C});
      plan->push_back({&a.q_mean, N * H});
      plan->push_back({&a.q_rstd, N * H});
      plan->push_back({&a.k_mean, N * H});
      plan->push_back({&a.k_rstd, N * H});
    }
  }
}

// Floats an arena for plan needs, each buffer rounded up to align_floats.
inline size_t ArenaFloats(const BufferPlan& plan, size_t align_floats) {
  size_t total = 0;
  for (const auto& entry : plan) total += (entry.second + align_floats - 1) / align_floats * align_floats;
  return total;
}

// Points every buffer of plan into the arena at base.
inline void AssignArena(const BufferPlan& plan, float* base, size_t align_floats) {
  for (const auto& [ptr, n] : plan) {
    *ptr = base;
    base += (n + align_floats - 1) / align_floats * align_floats;
  }
}

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_ACTIVATIONS_H_
