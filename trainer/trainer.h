// The training loop, independent of the backend and of the event format:
// batches from a Dataset, the schedule, clipping, divergence detection,
// evaluation, checkpoints, and events to an EventSink.
#ifndef NORMSWEEP_TRAINER_TRAINER_H_
#define NORMSWEEP_TRAINER_TRAINER_H_

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config.h"
#include "trainer/status.h"

namespace normsweep::trainer {

struct StepEvent {
  int step = 0;  // 1-based
  double train_loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, elapsed_s = 0;
};

struct EvalEvent {
  int step = 0;
  double val_loss = 0;
  std::optional<double> val_accuracy;
  double elapsed_s = 0;
};

struct LayerGradNormValue {
  int layer = 0;
  std::string matrix;  // "ffn.fc1" (W1) or "ffn.fc2" (W2)
  double norm = 0;
};

// Gradients at initialization: the first batch, before any update.
struct GradNormsEvent {
  std::vector<LayerGradNormValue> norms;
  double elapsed_s = 0;
};

enum class Outcome { kSucceeded, kDiverged, kFailed, kCancelled };
const char* OutcomeName(Outcome outcome);  // "SUCCEEDED", ...

struct FinalEvent {
  Outcome outcome = Outcome::kSucceeded;
  std::string error;
  int step = 0;  // steps completed
  std::optional<double> final_train_loss, final_val_loss, best_val_loss, final_val_accuracy;
  std::optional<int> diverged_step;
  double mean_tokens_per_s = 0;
  std::string backend, precision;
  int64_t parameters = 0;
  double elapsed_s = 0;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void OnStep(const StepEvent& e) = 0;
  virtual void OnEval(const EvalEvent& e) = 0;
  virtual void OnGradNorms(const GradNormsEvent& e) = 0;
  virtual void OnFinal(const FinalEvent& e) = 0;
};

struct RunOptions {
  std::string checkpoint_out;  // empty: no checkpoint
  std::string resume_from;     // empty: fresh weights from the seed
  const std::atomic<bool>* cancel = nullptr;  // set to stop with CANCELLED
  std::map<std::string, std::string> checkpoint_metadata;  // e.g. the config as JSON
};

// Runs one training run to its end and returns the final event (also sent
// to sink). Errors of any kind end as outcome FAILED with the message; bad
// settings should be rejected earlier by ValidateTrainSettings.
FinalEvent RunTraining(const TrainSettings& settings, const RunOptions& options, EventSink& sink);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_TRAINER_H_
