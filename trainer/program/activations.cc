#include "trainer/program/activations.h"

namespace normsweep::trainer {

void PlanActivations(const ModelConfig& model, const ParamLayout& layout, int B, Activations* acts,
                     BufferPlan* plan) {
  const size_t T = static_cast<size_t>(model.seq_len), N = static_cast<size_t>(B) * T;
  const size_t C = static_cast<size_t>(model.d_model), F = static_cast<size_t>(model.d_ff);
  const size_t H = static_cast<size_t>(model.heads), V = kVocabSize;
  const bool dropout = model.dropout > 0.0f;
  Activations& x = *acts;
  x = Activations{};
  auto add = [&](float** ptr, size_t floats, std::string name) { plan->push_back({ptr, floats, std::move(name)}); };
  add(&x.emb_out, N * C, "emb_out");
  if (dropout) add(&x.emb_mask, N * C, "emb_mask");
  if (layout.has_emb_ln()) {
    add(&x.emb_ln_out, N * C, "emb_ln_out");
    add(&x.emb_ln_mean, N, "emb_ln_mean");
    add(&x.emb_ln_rstd, N, "emb_ln_rstd");
  }
  x.blocks.assign(static_cast<size_t>(model.layers), BlockActivations{});
  for (size_t l = 0; l < x.blocks.size(); ++l) {
    BlockActivations& a = x.blocks[l];
    const std::string p = "blocks." + std::to_string(l) + ".";
    a.kind = model.BlockPlacement(static_cast<int>(l));
    add(&a.ln1_out, N * C, p + "ln1_out");
    add(&a.ln1_mean, N, p + "ln1_mean");
    add(&a.ln1_rstd, N, p + "ln1_rstd");
    add(&a.qkv, N * 3 * C, p + "qkv");
    add(&a.att, static_cast<size_t>(B) * H * T * T, p + "att");
    add(&a.atty, N * C, p + "atty");
    add(&a.attn_out, N * C, p + "attn_out");
    add(&a.res1, N * C, p + "res1");
    add(&a.ln2_out, N * C, p + "ln2_out");
    add(&a.ln2_mean, N, p + "ln2_mean");
    add(&a.ln2_rstd, N, p + "ln2_rstd");
    add(&a.fc1_act, N * F, p + "fc1_act");
    add(&a.ffn_out, N * C, p + "ffn_out");
    add(&a.res2, N * C, p + "res2");
    if (dropout) {
      add(&a.attn_mask, N * C, p + "attn_mask");
      add(&a.ffn_mask, N * C, p + "ffn_mask");
    }
    if (SchemeOf(a.kind).block.sublayer_output) {
      add(&a.ln1o_out, N * C, p + "ln1o_out");
      add(&a.ln1o_mean, N, p + "ln1o_mean");
      add(&a.ln1o_rstd, N, p + "ln1o_rstd");
      add(&a.ln2o_out, N * C, p + "ln2o_out");
      add(&a.ln2o_mean, N, p + "ln2o_mean");
      add(&a.ln2o_rstd, N, p + "ln2o_rstd");
    }
    if (model.qk_norm) {
      add(&a.q_raw, N * C, p + "q_raw");
      add(&a.k_raw, N * C, p + "k_raw");
      add(&a.q_mean, N * H, p + "q_mean");
      add(&a.q_rstd, N * H, p + "q_rstd");
      add(&a.k_mean, N * H, p + "k_mean");
      add(&a.k_rstd, N * H, p + "k_rstd");
    }
  }
  add(&x.lnf_out, N * C, "lnf_out");
  add(&x.lnf_mean, N, "lnf_mean");
  add(&x.lnf_rstd, N, "lnf_rstd");
  add(&x.logits, N * V, "logits");
  add(&x.probs, N * V, "probs");
  add(&x.row_loss, N, "row_loss");
  add(&x.row_log_z, N, "row_log_z");
  add(&x.grad_res_a, N * C, "grad_res_a");
  add(&x.grad_res_b, N * C, "grad_res_b");
  add(&x.grad_masked, N * C, "grad_masked");
  add(&x.grad_atty, N * C, "grad_atty");
  add(&x.grad_qkv, N * 3 * C, "grad_qkv");
  add(&x.grad_fc1_act, N * F, "grad_fc1_act");
  if (layout.has_emb_ln()) add(&x.grad_norm_in, N * C, "grad_norm_in");
  if (model.qk_norm) {
    add(&x.qk_scratch, N * C, "qk_scratch");
    add(&x.qk_scratch2, N * C, "qk_scratch2");
  }
}

size_t ArenaFloats(const BufferPlan& plan, size_t align_floats) {
  size_t total = 0;
  for (const PlannedBuffer& b : plan) total += (b.floats + align_floats - 1) / align_floats * align_floats;
  return total;
}

void AssignArena(const BufferPlan& plan, float* base, size_t align_floats) {
  for (const PlannedBuffer& b : plan) {
    *b.ptr = base;
    base += (b.floats + align_floats - 1) / align_floats * align_floats;
  }
}

}  // namespace normsweep::trainer
