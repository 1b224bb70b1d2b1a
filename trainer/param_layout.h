// Where every parameter lives in one flat float buffer. Gradients and
// optimizer moments use the same layout, so the optimizer, the gradient norms
// and the checkpoint code treat the model as one array. Names and shapes are
// PyTorch's (nn.Linear weight is [out, in]); see README "Checkpoints".
#ifndef NORMSWEEP_TRAINER_PARAM_LAYOUT_H_
#define NORMSWEEP_TRAINER_PARAM_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer/settings/config.h"

namespace normsweep::trainer {

enum class InitKind { kXavier, kXavierPerThird, kZero, kOne, kEmbedding };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats
  size_t size = 0;    // in floats
  InitKind init = InitKind::kZero;
  bool decay = false;  // weight decay applies (matrices only)
  // Xavier gain (DeepNorm's beta); for kXavierPerThird (qkv) it scales the v
  // block only, q and k keep gain 1 (Wang et al. 2022).
  double gain = 1.0;
};

// Offsets (in floats) of one block's tensors. A norm's bias offset is
// meaningless under RMSNorm (no bias: ParamLayout::norm_bias() is false);
// ln1_out/ln2_out exist for Peri-LN blocks only, q_norm/k_norm with qk_norm only.
struct BlockOffsets {
  size_t ln1_w = 0, ln1_b = 0, qkv_w = 0, qkv_b = 0, proj_w = 0, proj_b = 0, ln2_w = 0, ln2_b = 0;
  size_t fc1_w = 0, fc1_b = 0, fc2_w = 0, fc2_b = 0;
  size_t ln1o_w = 0, ln1o_b = 0, ln2o_w = 0, ln2o_b = 0;  // Peri-LN's output norms
  size_t qn_w = 0, qn_b = 0, kn_w = 0, kn_b = 0;          // qk_norm: over head_dim, shared by the heads
  int fc1_w_index = 0, fc2_w_index = 0;  // indices into tensors()
};

class ParamLayout {
 public:
  static ParamLayout ForModel(const ModelConfig& model);

  const std::vector<TensorSpec>& tensors() const { return tensors_; }
  size_t total() const { return total_; }
  const TensorSpec* Find(const std::string& name) const;

  size_t tok_emb() const { return tok_emb_; }
  bool has_pos_emb() const { return has_pos_emb_; }
  size_t pos_emb() const { return pos_emb_; }
  const std::vector<BlockOffsets>& blocks() const { return blocks_; }
  bool has_final_ln() const { return has_final_ln_; }
  // Whether the norms have a bias (LayerNorm) or not (RMSNorm).
  bool norm_bias() const { return norm_bias_; }
  bool has_emb_ln() const { return has_emb_ln_; }  // Peri-LN: ln_emb on the embedding
  size_t lnemb_w() const { return lnemb_w_; }
  size_t lnemb_b() const { return lnemb_b_; }
  size_t lnf_w() const { return lnf_w_; }
  size_t lnf_b() const { return lnf_b_; }
  size_t head_w() const { return head_w_; }
  size_t head_b() const { return head_b_; }

 private:
  size_t Add(std::string name, std::vector<int64_t> shape, InitKind init, bool decay, double gain = 1.0);
  // A norm's weight (and bias under LayerNorm): name.weight, name.bias; *b
  // is left alone without a bias.
  void AddNorm(const std::string& name, int64_t size, size_t* w, size_t* b);

  std::vector<TensorSpec> tensors_;
  size_t total_ = 0;
  size_t tok_emb_ = 0, pos_emb_ = 0, lnf_w_ = 0, lnf_b_ = 0, head_w_ = 0, head_b_ = 0;
  size_t lnemb_w_ = 0, lnemb_b_ = 0;
  bool has_pos_emb_ = false, has_final_ln_ = false, norm_bias_ = true, has_emb_ln_ = false;
  std::vector<BlockOffsets> blocks_;
};

// Fresh weights: Xavier-uniform matrices (q, k and v as three d x d blocks),
// zero biases, LayerNorm weight 1 / bias 0, embeddings N(0, 1/d) so that the
// sqrt(d)-scaled token embedding has unit variance. DeepNorm: v, proj, fc1
// and fc2 with Xavier gain beta. Deterministic in seed.
std::vector<float> InitParameters(const ParamLayout& layout, const ModelConfig& model, uint64_t seed);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PARAM_LAYOUT_H_
