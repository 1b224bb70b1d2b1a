#include "trainer/settings/flops.h"

namespace normsweep::trainer {

int64_t MatmulParams(const ModelConfig& m) {
  const int64_t d = m.d_model, f = m.d_ff;
  const int64_t per_layer = 4 * d * d + 2 * d * f;  // qkv (3 d^2), proj (d^2), fc1, fc2
  return m.layers * per_layer + int64_t{kVocabSize} * d;
}

int64_t TrainingFlopsPerToken(const ModelConfig& m) {
  return 6 * MatmulParams(m) + 12 * int64_t{m.layers} * m.seq_len * m.d_model;
}

int64_t ForwardFlopsPerToken(const ModelConfig& m) { return TrainingFlopsPerToken(m) / 3; }

int64_t TrainingTokens(const TrainSettings& s) { return int64_t{s.steps} * s.batch_size * s.model.seq_len; }

int64_t EvaluationCount(const TrainSettings& s) {
  // Step 0, the multiples of eval_every in [1, steps - 1], the last step.
  const int64_t periodic = s.eval_every > 0 ? (int64_t{s.steps} - 1) / s.eval_every : 0;
  return 1 + periodic + 1;
}

double TrialFlops(const TrainSettings& s) {
  const double eval_tokens = static_cast<double>(s.eval_batches) * s.batch_size * s.model.seq_len;
  return static_cast<double>(TrainingTokens(s)) * static_cast<double>(TrainingFlopsPerToken(s.model)) +
         static_cast<double>(EvaluationCount(s)) * eval_tokens * static_cast<double>(ForwardFlopsPerToken(s.model));
}

}  // namespace normsweep::trainer
