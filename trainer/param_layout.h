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

#include "trainer/config.h"

namespace normsweep::trainer {

enum class InitKind { kXavier, kXavierPerThird, kZero, kOne, kEmbedding };

struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats
  size_t size = 0;    // in floats
  InitKind init = InitKind::kZero;
  bool decay = false;  // weight decay applies (matrices only)
};

// Offsets (in floats) of one block's tensors.
struct BlockOffsets {
  size_t ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc1_w, fc1_b, fc2_w, fc2_b;
  int fc1_w_index, fc2_w_index;  // indices into tensors()
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
  size_t lnf_w() const { return lnf_w_; }
  size_t lnf_b() const { return lnf_b_; }
  size_t head_w() const { return head_w_; }
  size_t head_b() const { return head_b_; }

 private:
  size_t Add(std::string name, std::vector<int64_t> shape, InitKind init, bool decay);

  std::vector<TensorSpec> tensors_;
  size_t total_ = 0;
  size_t tok_emb_ = 0, pos_emb_ = 0, lnf_w_ = 0, lnf_b_ = 0, head_w_ = 0, head_b_ = 0;
  bool has_pos_emb_ = false, has_final_ln_ = false;
  std::vector<BlockOffsets> blocks_;
};

// Fresh weights: Xavier-uniform matrices (q, k and v as three d x d blocks),
// zero biases, LayerNorm weight 1 / bias 0, embeddings N(0, 1/d) so that the
// sqrt(d)-scaled token embedding has unit variance. Deterministic in seed.
std::vector<float> InitParameters(const ParamLayout& layout, const ModelConfig& model, uint64_t seed);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_PARAM_LAYOUT_H_
