// The training loop, independent of the backend and of the event format:
// batches from a Dataset, the schedule, clipping, divergence detection,
// evaluation, checkpoints, and events to an EventSink.
//
// A fresh run evaluates once before the first update (an EvalEvent with
// step 0, whose val_loss is l0, also carried by the final event as
// init_val_loss); a run resumed from a checkpoint does not (its step 0 is
// long gone), so its final event has no init_val_loss. Every evaluation
// carries the instability diagnostics (Wortsman et al. 2023): per block the
// largest attention logit, the output logits' mean log-sum-exp, and (from
// step 1) the update-to-weight RMS ratios of the step that produced the
// evaluated weights; every evaluation at a step s >= 1 is preceded by a
// GradNormsEvent of step s's gradients.
#ifndef NORMSWEEP_TRAINER_TRAINER_H_
#define NORMSWEEP_TRAINER_TRAINER_H_

#include <atomic>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "trainer/settings/config.h"
#include "trainer/settings/status.h"

namespace normsweep::trainer {

struct StepEvent {
  int step = 0;  // 1-based
  // train_loss includes the z term when z_loss > 0 (z_term then set).
  double train_loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, elapsed_s = 0;
  std::optional<double> z_term;
};

// Instability diagnostics of one block at one evaluation.
struct LayerDiagnosticsValue {
  int layer = 0;
  // max over the validation batches, heads and causally visible (query, key)
  // pairs of q.k / sqrt(d_head); absent when no batch was evaluated.
  std::optional<double> max_attn_logit;
  // RMS(update) / RMS(weight before it) of each weight matrix for the
  // optimizer step that produced the evaluated weights; absent at step 0.
  std::optional<double> update_ratio_qkv, update_ratio_proj, update_ratio_fc1, update_ratio_fc2;
};

struct EvalEvent {
  int step = 0;  // 0: before the first update (val_loss is l0)
  double val_loss = 0;
  std::optional<double> val_accuracy;
  // Mean over the counted validation positions of log sum_j exp(logit_j).
  std::optional<double> output_log_z;
  std::vector<LayerDiagnosticsValue> layers;  // one per block; empty without diagnostics
  double elapsed_s = 0;
};

struct LayerGradNormValue {
  int layer = 0;
  std::string matrix;  // "ffn.fc1" (W1) or "ffn.fc2" (W2)
  double norm = 0;
};

// Step 0: the gradients at initialization (the first batch, before any
// update). Step s >= 1 (an evaluation step): the gradients of step s's batch.
struct GradNormsEvent {
  int step = 0;
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
  std::optional<double> init_val_loss;  // l0: the step-0 evaluation's loss (fresh runs only)
  std::optional<double> unigram_loss;   // the data's (UnigramLoss, trainer/data.h); every run
  // SUCCEEDED runs with 3 or more evaluations: the fall of the validation
  // loss over the last quarter (trainer/settings/val_loss_progress.h)
  std::optional<double> val_loss_progress;
  double mean_tokens_per_s = 0;
  std::string backend, precision;
  std::string kernels;  // Backend::kernels()
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
  // Off: no step-0 evaluation, no diagnostics in the eval events and no
  // grad_norms events after step 0 (for measuring what they cost).
  bool diagnostics = true;
};

// Runs one training run to its end and returns the final event (also sent
// to sink). Errors of any kind end as outcome FAILED with the message. The
// settings were validated where they entered the process
// (ValidTrainSettings::Check); they are not checked again here.
FinalEvent RunTraining(const ValidTrainSettings& settings, const RunOptions& options, EventSink& sink);

// Fused trials (HFTA, Wang et al., MLSys 2021): K runs in one process, which
// may differ only in the schedule (peak lr, warm-up, kind), the seed, the
// optimizer's coefficients (beta1, beta2, eps, weight decay, momentum), grad
// clip, z_loss and the divergence settings; everything else, threads and
// device included, must be equal (CheckFusable). Each trial keeps its own
// data order, schedule, optimizer state, divergence, cancel flag, events
// (its own sink), checkpoint and final event: a trial that diverges or is
// cancelled stops and the others go on. The trials step in lock step, whole
// trials per thread when K >= threads (trainer.cc says why): each trial's
// numbers are then bit for bit those of a solo run with one thread; with
// K < threads, those of a solo run with `threads` threads.
inline constexpr int kMaxFusedTrials = 64;  // schema::kMaxFusedTrials
struct FusedTrial {
  ValidTrainSettings settings;
  RunOptions options;
  EventSink* sink = nullptr;
};
// INVALID_ARGUMENT naming the first setting a trial does not share with
// trial 0.
Status CheckFusable(const std::vector<TrainSettings>& trials);
// One final event per trial, in order (each also sent to its sink).
std::vector<FinalEvent> RunFusedTraining(const std::vector<FusedTrial>& trials);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_TRAINER_H_
