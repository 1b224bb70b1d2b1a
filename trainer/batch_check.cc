// Kept apart from backend.cc so that the CUDA module, which links the
// trainer core, does not pull in the CPU backend and the module loader.
#include "trainer/backend.h"

namespace normsweep::trainer {

Status CheckBatch(const Batch& batch, const ModelConfig& model) {
  if (batch.batch_size < 1) return InvalidArgument("batch_size: must be >= 1");
  if (batch.seq_len < 1 || batch.seq_len > model.seq_len) {
    return InvalidArgument("seq_len: batch windows of " + std::to_string(batch.seq_len) +
                           " tokens do not fit the model's seq_len " + std::to_string(model.seq_len));
  }
  const size_t n = static_cast<size_t>(batch.batch_size) * batch.seq_len;
  if (batch.inputs.size() != n || batch.targets.size() != n) return InvalidArgument("batch: wrong size");
  for (size_t i = 0; i < n; ++i) {
    if (batch.inputs[i] < 0 || batch.inputs[i] >= kVocabSize) return InvalidArgument("batch: bad token");
    if (batch.targets[i] < -1 || batch.targets[i] >= kVocabSize) return InvalidArgument("batch: bad target");
  }
  return OkStatus();
}

}  // namespace normsweep::trainer
