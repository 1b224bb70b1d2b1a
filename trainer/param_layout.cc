#include "trainer/param_layout.h"

#include <cmath>

#include "trainer/rng.h"
#include "trainer/settings/schemes.h"

namespace normsweep::trainer {

size_t ParamLayout::Add(std::string name, std::vector<int64_t> shape, InitKind init, bool decay, double gain) {
  TensorSpec t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.size = 1;
  for (int64_t d : t.shape) t.size *= static_cast<size_t>(d);
  t.offset = total_;
  t.init = init;
  t.decay = decay;
  t.gain = gain;
  total_ += t.size;
  tensors_.push_back(std::move(t));
  return tensors_.back().offset;
}

void ParamLayout::AddNorm(const std::string& name, int64_t size, size_t* w, size_t* b) {
  *w = Add(name + ".weight", {size}, InitKind::kOne, false);
  if (norm_bias_) *b = Add(name + ".bias", {size}, InitKind::kZero, false);
}

ParamLayout ParamLayout::ForModel(const ModelConfig& m) {
  ParamLayout l;
  const int64_t d = m.d_model, f = m.d_ff;
  const double beta = m.DeepNormBeta();  // 1 unless DeepNorm
  l.norm_bias_ = m.norm == NormKind::kLayerNorm;
  l.tok_emb_ = l.Add("tok_emb.weight", {kVocabSize, d}, InitKind::kEmbedding, false);
  if (m.positions == Positions::kLearned) {
    l.has_pos_emb_ = true;
    l.pos_emb_ = l.Add("pos_emb.weight", {m.seq_len, d}, InitKind::kEmbedding, false);
  }
  if (m.HasEmbeddingNorm()) {
    l.has_emb_ln_ = true;
    l.AddNorm("ln_emb", d, &l.lnemb_w_, &l.lnemb_b_);
  }
  for (int i = 0; i < m.layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    const bool peri = SchemeOf(m.BlockPlacement(i)).block.sublayer_output;  // Peri-LN's output norms
    BlockOffsets b;
    l.AddNorm(p + "ln1", d, &b.ln1_w, &b.ln1_b);
    if (peri) l.AddNorm(p + "ln1_out", d, &b.ln1o_w, &b.ln1o_b);
    b.qkv_w = l.Add(p + "attn.qkv.weight", {3 * d, d}, InitKind::kXavierPerThird, true, beta);
    b.qkv_b = l.Add(p + "attn.qkv.bias", {3 * d}, InitKind::kZero, false);
    if (m.qk_norm) {
      l.AddNorm(p + "attn.q_norm", m.head_dim(), &b.qn_w, &b.qn_b);
      l.AddNorm(p + "attn.k_norm", m.head_dim(), &b.kn_w, &b.kn_b);
    }
    b.proj_w = l.Add(p + "attn.proj.weight", {d, d}, InitKind::kXavier, true, beta);
    b.proj_b = l.Add(p + "attn.proj.bias", {d}, InitKind::kZero, false);
    l.AddNorm(p + "ln2", d, &b.ln2_w, &b.ln2_b);
    if (peri) l.AddNorm(p + "ln2_out", d, &b.ln2o_w, &b.ln2o_b);
    b.fc1_w_index = static_cast<int>(l.tensors_.size());
    b.fc1_w = l.Add(p + "ffn.fc1.weight", {f, d}, InitKind::kXavier, true, beta);
    b.fc1_b = l.Add(p + "ffn.fc1.bias", {f}, InitKind::kZero, false);
    b.fc2_w_index = static_cast<int>(l.tensors_.size());
    b.fc2_w = l.Add(p + "ffn.fc2.weight", {d, f}, InitKind::kXavier, true, beta);
    b.fc2_b = l.Add(p + "ffn.fc2.bias", {d}, InitKind::kZero, false);
    l.blocks_.push_back(b);
  }
  if (m.HasFinalNorm()) {
    l.has_final_ln_ = true;
    l.AddNorm("ln_f", d, &l.lnf_w_, &l.lnf_b_);
  }
  l.head_w_ = l.Add("head.weight", {kVocabSize, d}, InitKind::kXavier, true);
  l.head_b_ = l.Add("head.bias", {kVocabSize}, InitKind::kZero, false);
  return l;
}

const TensorSpec* ParamLayout::Find(const std::string& name) const {
  for (const TensorSpec& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<float> InitParameters(const ParamLayout& layout, const ModelConfig& model, uint64_t seed) {
  std::vector<float> params(layout.total(), 0.0f);
  // Each tensor draws from its own stream, so adding a tensor does not shift the others.
  for (size_t ti = 0; ti < layout.tensors().size(); ++ti) {
    const TensorSpec& t = layout.tensors()[ti];
    Rng rng(MixSeed(seed, 0x1417 /* init stream */, ti));
    float* p = params.data() + t.offset;
    switch (t.init) {
      case InitKind::kZero:
        break;
      case InitKind::kOne:
        for (size_t i = 0; i < t.size; ++i) p[i] = 1.0f;
        break;
      case InitKind::kEmbedding: {
        const double stddev = 1.0 / std::sqrt(static_cast<double>(model.d_model));
        for (size_t i = 0; i < t.size; ++i) p[i] = static_cast<float>(stddev * rng.Normal());
        break;
      }
      case InitKind::kXavier:
      case InitKind::kXavierPerThird: {
        // fan_out of a q/k/v block is d, not 3d: the paper's d x d matrices.
        const bool per_third = t.init == InitKind::kXavierPerThird;
        const double rows = per_third ? t.shape[0] / 3.0 : t.shape[0];
        const double a = std::sqrt(6.0 / (rows + static_cast<double>(t.shape[1])));
        // The gain scales the v block of qkv (its last third), or all of another matrix.
        const size_t gain_from = per_third ? t.size / 3 * 2 : 0;
        for (size_t i = 0; i < t.size; ++i) {
          const double g = i >= gain_from ? t.gain : 1.0;
          p[i] = static_cast<float>(rng.Uniform(-a * g, a * g));
        }
        break;
      }
    }
  }
  return params;
}

}  // namespace normsweep::trainer
