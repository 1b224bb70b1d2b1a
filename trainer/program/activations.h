// What a forward pass saves for the backward pass and the scratch the
// block program (trainer/program/block_program.h) works in, and how a
// backend lays those buffers out in one arena (the CPU per part of a batch
// in host memory, the CUDA backend in device memory). Which buffers exist
// depends on the model (dropout, Peri-LN, QK-norm): the plan decides, so
// that no backend branches on a scheme.
#ifndef NORMSWEEP_TRAINER_PROGRAM_ACTIVATIONS_H_
#define NORMSWEEP_TRAINER_PROGRAM_ACTIVATIONS_H_

#include <cstddef>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/settings/schemes.h"

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
  // Normalising inside the residual stream (Post-LN, DeepNorm): out is ln2_out, else res2.
  bool norm_after_residual() const { return SchemeOf(kind).block.after_residual; }
  const float* out() const { return norm_after_residual() ? ln2_out : res2; }
};

// Every buffer of one pass over B sequences (N = B*T rows).
struct Activations {
  float *emb_out = nullptr, *emb_mask = nullptr;
  // Peri-LN: the embedding's norm ln_emb (its output is the first block's input).
  float *emb_ln_out = nullptr, *emb_ln_mean = nullptr, *emb_ln_rstd = nullptr;
  std::vector<BlockActivations> blocks;
  float *lnf_out = nullptr, *lnf_mean = nullptr, *lnf_rstd = nullptr;
  float *logits = nullptr, *probs = nullptr, *row_loss = nullptr, *row_log_z = nullptr;
  // Backward scratch, gradients of activations: the residual stream's
  // (N,C) in two buffers that swap as the pass goes down; a sublayer
  // output's times its dropout mask (N,C); attention's merged output atty
  // (N,C); qkv (N,3C); the ReLU output fc1_act (N,F).
  float *grad_res_a = nullptr, *grad_res_b = nullptr, *grad_masked = nullptr, *grad_atty = nullptr;
  float *grad_qkv = nullptr, *grad_fc1_act = nullptr;
  // Peri-LN: the gradient of a sublayer's output before its output norm (N,C).
  float* grad_norm_in = nullptr;
  // qk_norm: two (N,C) buffers for the QK-norm op (QkNormArgs::scratch).
  float *qk_scratch = nullptr, *qk_scratch2 = nullptr;
};

// One buffer of an arena: where its pointer goes, its size in floats and
// its name (for op traces and error messages).
struct PlannedBuffer {
  float** ptr = nullptr;
  size_t floats = 0;
  std::string name;
};
using BufferPlan = std::vector<PlannedBuffer>;

// Resets acts to the model's buffers for B windows of model.seq_len tokens
// and appends them to plan, in arena order.
void PlanActivations(const ModelConfig& model, const ParamLayout& layout, int B, Activations* acts,
                     BufferPlan* plan);

// Floats an arena for plan needs, each buffer rounded up to align_floats.
size_t ArenaFloats(const BufferPlan& plan, size_t align_floats);

// Points every buffer of plan into the arena at base.
void AssignArena(const BufferPlan& plan, float* base, size_t align_floats);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PROGRAM_ACTIVATIONS_H_
