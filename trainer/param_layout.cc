#include "trainer/param_layout.h"

#include <cmath>

#include "trainer/rng.h"

namespace normsweep::trainer {

size_t ParamLayout::Add(std::string name, std::vector<int64_t> shape, InitKind init, bool decay) {
  TensorSpec t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.size = 1;
  for (int64_t d : t.shape) t.size *= static_cast<size_t>(d);
  t.offset = total_;
  t.init = init;
  t.decay = decay;
  total_ += t.size;
  tensors_.push_back(std::move(t));
  return tensors_.back().offset;
}

ParamLayout ParamLayout::ForModel(const ModelConfig& m) {
  ParamLayout l;
  const int64_t d = m.d_model, f = m.d_ff;
  l.tok_emb_ = l.Add("tok_emb.weight", {kVocabSize, d}, InitKind::kEmbedding, false);
  if (m.positions == Positions::kLearned) {
    l.has_pos_emb_ = true;
    l.pos_emb_ = l.Add("pos_emb.weight", {m.seq_len, d}, InitKind::kEmbedding, false);
  }
  for (int i = 0; i < m.layers; ++i) {
    const std::string p = "blocks." + std::to_string(i) + ".";
    BlockOffsets b;
    b.ln1_w = l.Add(p + "ln1.weight", {d}, InitKind::kOne, false);
    b.ln1_b = l.Add(p + "ln1.bias", {d}, InitKind::kZero, false);
    b.qkv_w = l.Add(p + "attn.qkv.weight", {3 * d, d}, InitKind::kXavierPerThird, true);
    b.qkv_b = l.Add(p + "attn.qkv.bias", {3 * d}, InitKind::kZero, false);
    b.proj_w = l.Add(p + "attn.proj.weight", {d, d}, InitKind::kXavier, true);
    b.proj_b = l.Add(p + "attn.proj.bias", {d}, InitKind::kZero, false);
    b.ln2_w = l.Add(p + "ln2.weight", {d}, InitKind::kOne, false);
    b.ln2_b = l.Add(p + "ln2.bias", {d}, InitKind::kZero, false);
    b.fc1_w_index = static_cast<int>(l.tensors_.size());
    b.fc1_w = l.Add(p + "ffn.fc1.weight", {f, d}, InitKind::kXavier, true);
    b.fc1_b = l.Add(p + "ffn.fc1.bias", {f}, InitKind::kZero, false);
    b.fc2_w_index = static_cast<int>(l.tensors_.size());
    b.fc2_w = l.Add(p + "ffn.fc2.weight", {d, f}, InitKind::kXavier, true);
    b.fc2_b = l.Add(p + "ffn.fc2.bias", {d}, InitKind::kZero, false);
    l.blocks_.push_back(b);
  }
  if (m.placement == Placement::kPreLN) {
    l.has_final_ln_ = true;
    l.lnf_w_ = l.Add("ln_f.weight", {d}, InitKind::kOne, false);
    l.lnf_b_ = l.Add("ln_f.bias", {d}, InitKind::kZero, false);
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
        const double rows = t.init == InitKind::kXavierPerThird ? t.shape[0] / 3.0 : t.shape[0];
        const double a = std::sqrt(6.0 / (rows + static_cast<double>(t.shape[1])));
        for (size_t i = 0; i < t.size; ++i) p[i] = static_cast<float>(rng.Uniform(-a, a));
        break;
      }
    }
  }
  return params;
}

}  // namespace normsweep::trainer
