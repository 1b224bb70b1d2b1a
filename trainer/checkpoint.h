// Checkpoints: the model's parameters (and optionally the optimizer state) in
// safetensors, under PyTorch-style names (README "Checkpoints"). The model's
// hyper-parameters are metadata strings, so a checkpoint written by another
// tool with the same names and keys loads here.
//   metadata: placement, layers, d_model, heads, d_ff, seq_len, positions
//             (required); step, optimizer, config (normsweep-train's own)
//   tensors:  every parameter; with optimizer state also
//             optimizer.m.<name> and optimizer.v.<name>
#ifndef NORMSWEEP_TRAINER_CHECKPOINT_H_
#define NORMSWEEP_TRAINER_CHECKPOINT_H_

#include <map>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/param_layout.h"
#include "trainer/settings/status.h"

namespace normsweep::trainer {

struct Checkpoint {
  ModelConfig model;
  std::vector<float> params;  // ParamLayout::ForModel(model) order
  bool has_optimizer_state = false;
  std::vector<float> m, v;
  int step = 0;  // optimizer steps completed
  std::map<std::string, std::string> metadata;
};

Status SaveCheckpoint(const std::string& path, const Checkpoint& checkpoint);
// DATA_LOSS (naming the file and what is wrong) for a corrupt, truncated or
// inconsistent file; NOT_FOUND when it cannot be opened.
StatusOr<Checkpoint> LoadCheckpoint(const std::string& path);

// Writes a safetensors file with one tensor per parameter name (used for the
// `grads` mode's output).
Status SaveNamedTensors(const std::string& path, const ParamLayout& layout, const std::vector<float>& values,
                        const std::map<std::string, std::string>& metadata);

// The metadata strings describing model.
std::map<std::string, std::string> ModelMetadata(const ModelConfig& model);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_CHECKPOINT_H_
