#include "trainer/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/quote.h"
#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/rng.h"
#include "trainer/schedule.h"
#include "trainer/settings/val_loss_progress.h"
#include "trainer/settings/schemes.h"

namespace normsweep::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

struct Evaluation {
  double loss = 0;
  std::optional<double> accuracy;
  std::optional<double> log_z;         // with diagnostics, when a position counted
  std::vector<double> max_attn_logit;  // with diagnostics: per block, -inf when none seen
};

StatusOr<Evaluation> Evaluate(Backend& backend, const Dataset& data, const TrainSettings& s, bool diagnostics) {
  const int batches = std::min(s.eval_batches, data.ValidationBatchCount(s.batch_size, s.model.seq_len));
  LossStats total;
  for (int i = 0; i < batches; ++i) {
    StatusOr<LossStats> r = backend.Evaluate(data.ValidationBatch(i, s.batch_size, s.model.seq_len));
    if (!r.ok()) return r.status();
    total += *r;
  }
  Evaluation e;
  e.loss = total.mean();
  if (data.has_accuracy() && total.count > 0) e.accuracy = static_cast<double>(total.correct) / total.count;
  if (diagnostics) {
    if (total.count > 0) e.log_z = total.mean_log_z();
    TRAINER_ASSIGN_OR_RETURN(e.max_attn_logit, backend.TakeMaxAttentionLogits());
  }
  return e;
}

// RMS(update) / RMS(weight) of one tensor from its squared norms (the
// element counts cancel); absent for an all-zero weight.
std::optional<double> UpdateRatio(const UpdateSquaredNorms& u, size_t tensor) {
  if (!(u.weight[tensor] > 0)) return std::nullopt;
  return std::sqrt(u.update[tensor] / u.weight[tensor]);
}

// The index in layout.tensors() of the tensor that starts at offset.
size_t TensorAt(const ParamLayout& layout, size_t offset) {
  const std::vector<TensorSpec>& t = layout.tensors();
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i].offset == offset) return i;
  }
  return t.size();  // not reached: every BlockOffsets entry starts a tensor
}

// The checkpoint metadata that carries a run's evaluations
// ("0:5.4123,100:3.2",  each loss with 17 significant digits).
constexpr char kValLossesKey[] = "val_losses";

std::string FormatEvals(const std::vector<std::pair<int, double>>& evals) {
  std::string out;
  char buf[64];
  for (const auto& [step, loss] : evals) {
    std::snprintf(buf, sizeof(buf), "%s%d:%.17g", out.empty() ? "" : ",", step, loss);
    out += buf;
  }
  return out;
}

// The evaluations up to step `up_to`; none when the text is not
// FormatEvals's (a checkpoint from elsewhere: only the evaluations after the
// resume count then, and with fewer than 3 the progress is not judged).
std::vector<std::pair<int, double>> ParseEvals(const std::string& text, int up_to) {
  std::vector<std::pair<int, double>> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(pos, end - pos);
    const size_t colon = item.find(':');
    char* rest = nullptr;
    if (colon == std::string::npos) return {};
    const long step = std::strtol(item.c_str(), &rest, 10);
    if (rest != item.c_str() + colon || step < 0 || step > up_to) return {};
    const double loss = std::strtod(item.c_str() + colon + 1, &rest);
    if (rest != item.c_str() + item.size() || (!out.empty() && step <= out.back().first)) return {};
    out.emplace_back(static_cast<int>(step), loss);
    pos = end + 1;
  }
  return out;
}

class Run {
 public:
  // backend_threads: the backend's thread count (settings.threads for a
  // solo run; a fused run shares its threads among its trials).
  // fused: the run is one trial of a fused run, whose tokens/s count the
  // wall time since its previous step (its share of the machine) rather
  // than its own step's time alone, so that its trials' figures add up to
  // the process's.
  Run(const TrainSettings& s, const RunOptions& o, EventSink& sink, int backend_threads, bool fused = false)
      : s_(s), o_(o), sink_(sink), backend_threads_(backend_threads), fused_(fused) {}

  // A solo run, start to end.
  FinalEvent Go() {
    Status st = Prepare();
    if (st.ok()) st = Start();
    while (st.ok() && active()) st = StepOnce();
    if (st.ok()) st = Finish();
    return Conclude(st);
  }

  // The phases Go runs, which a fused run interleaves with its other trials'
  // (trainer.h, RunFusedTraining). Prepare loads the data and makes the
  // backend and the weights; Start evaluates at step 0 (a fresh run).
  Status Prepare() {
    start_ = Clock::now();
    TRAINER_ASSIGN_OR_RETURN(data_, MakeDataset(s_.data, s_.model.seq_len, s_.batch_size));
    if (const double u = UnigramLoss(*data_, s_.batch_size, s_.model.seq_len, s_.eval_batches); std::isfinite(u)) {
      final_.unigram_loss = u;
    }
    BackendOptions bo;
    bo.device = s_.device;
    bo.precision = s_.precision;
    bo.threads = backend_threads_;
    bo.model = s_.model;
    bo.optimizer = s_.optimizer;
    bo.max_batch_size = s_.batch_size;
    bo.diagnostics = o_.diagnostics;
    bo.z_loss = s_.z_loss;
    TRAINER_ASSIGN_OR_RETURN(backend_, MakeBackend(bo));
    final_.backend = backend_->name();
    final_.precision = backend_->precision();
    final_.kernels = backend_->kernels();
    final_.parameters = static_cast<int64_t>(backend_->layout().total());

    if (!o_.resume_from.empty()) {
      TRAINER_ASSIGN_OR_RETURN(Checkpoint c, LoadCheckpoint(o_.resume_from));
      TRAINER_RETURN_IF_ERROR(CheckSameModel(c.model));
      TRAINER_RETURN_IF_ERROR(backend_->SetParameters(c.params));
      if (c.has_optimizer_state) TRAINER_RETURN_IF_ERROR(backend_->SetOptimizerState(c.m, c.v));
      next_step_ = c.step + 1;
      step_done_ = c.step;
      resumed_ = true;
      if (auto it = c.metadata.find(kValLossesKey); it != c.metadata.end()) evals_ = ParseEvals(it->second, c.step);
    } else {
      TRAINER_RETURN_IF_ERROR(backend_->SetParameters(InitParameters(backend_->layout(), s_.model, s_.seed)));
    }
    return OkStatus();
  }

  Status Start() {
    // l0, the loss at initialisation (step 0); a resumed run has none.
    if (!resumed_ && o_.diagnostics) TRAINER_RETURN_IF_ERROR(EvaluateNow());
    if (final_.outcome == Outcome::kDiverged) stop_ = Stop::kEnded;
    last_step_end_ = Clock::now();
    return OkStatus();
  }

  // Steps remain and the run has not stopped.
  bool active() const { return stop_ == Stop::kNone && next_step_ <= s_.steps; }

  // One optimizer step (next_step_), with its events, evaluation and
  // checkpoint when due; a cancellation, a divergence or an error stops the
  // run.
  Status StepOnce() {
    const int step = next_step_++;
    if (o_.cancel != nullptr && o_.cancel->load()) {
      final_.outcome = Outcome::kCancelled;
      stop_ = Stop::kCancelled;
      return OkStatus();
    }
    const Clock::time_point t0 = fused_ ? last_step_end_ : Clock::now();
    const Batch batch = data_->TrainBatch(s_.seed, step, s_.batch_size, s_.model.seq_len);
    TRAINER_ASSIGN_OR_RETURN(LossStats loss, backend_->ForwardBackward(batch, MixSeed(s_.seed, 0xd0, step)));
    TRAINER_ASSIGN_OR_RETURN(std::vector<double> sq, backend_->GradientSquaredNorms());
    double total_sq = 0;
    for (double v : sq) total_sq += v;
    const double grad_norm = std::sqrt(total_sq);
    if (step == 1) EmitGradNorms(0, sq);

    // The objective: cross-entropy plus the z term (Wortsman et al. 2023).
    const std::optional<double> z_term =
        s_.z_loss > 0 ? std::optional<double>(loss.z_term(s_.z_loss)) : std::nullopt;
    const double train_loss = loss.mean() + z_term.value_or(0.0);
    final_.final_train_loss = train_loss;
    OptimizerStepArgs args;
    args.step = step;
    args.lr = LearningRate(s_.schedule, step);
    if (!std::isfinite(train_loss) || !std::isfinite(grad_norm)) {
      EmitStep(step, train_loss, z_term, args.lr, grad_norm, 0.0);
      return Diverge(step);
    }
    if (s_.optimizer.grad_clip > 0 && grad_norm > s_.optimizer.grad_clip) {
      args.grad_scale = s_.optimizer.grad_clip / grad_norm;
    }
    // The diagnostics of an evaluation at this step: this step's gradient
    // norms and its update, measured only here (the update costs a copy).
    args.measure_update = o_.diagnostics && EvaluatesAfter(step);
    TRAINER_RETURN_IF_ERROR(backend_->OptimizerStep(args));
    if (args.measure_update) {
      TRAINER_ASSIGN_OR_RETURN(update_sq_, backend_->LastUpdateSquaredNorms());
      update_step_ = step;
      eval_grad_sq_ = std::move(sq);
      eval_grad_step_ = step;
    }
    step_done_ = step;
    const double dt = Seconds(t0, Clock::now());
    const double tokens = static_cast<double>(s_.batch_size) * s_.model.seq_len;
    tokens_ += tokens;
    train_seconds_ += dt;

    EmitStep(step, train_loss, z_term, args.lr, grad_norm, dt > 0 ? tokens / dt : 0);

    above_threshold_ = train_loss > s_.divergence_loss ? above_threshold_ + 1 : 0;
    if (above_threshold_ >= s_.divergence_patience) return Diverge(step);

    if (s_.eval_every > 0 && step % s_.eval_every == 0 && step < s_.steps) {
      TRAINER_RETURN_IF_ERROR(EvaluateNow());
      if (final_.outcome == Outcome::kDiverged) {
        stop_ = Stop::kEnded;
        return OkStatus();
      }
    }
    if (s_.checkpoint_every > 0 && step % s_.checkpoint_every == 0 && !o_.checkpoint_out.empty()) {
      TRAINER_RETURN_IF_ERROR(Save());
    }
    last_step_end_ = Clock::now();
    return OkStatus();
  }

  // After the last step (or a cancellation): the final evaluation and the
  // checkpoint; nothing after a divergence.
  Status Finish() {
    if (stop_ == Stop::kEnded) return OkStatus();
    if (final_.outcome == Outcome::kSucceeded && (step_done_ > last_eval_step_ || !final_.final_val_loss)) {
      TRAINER_RETURN_IF_ERROR(EvaluateNow());
      if (final_.outcome == Outcome::kDiverged) return OkStatus();
    }
    if (!o_.checkpoint_out.empty()) TRAINER_RETURN_IF_ERROR(Save());
    return OkStatus();
  }

  // The final event (FAILED with st's message when st is an error), sent.
  FinalEvent Conclude(const Status& st) {
    if (!st.ok()) {
      final_.outcome = Outcome::kFailed;
      final_.error = st.message();
    }
    final_.step = step_done_;
    if (final_.outcome == Outcome::kSucceeded && last_eval_step_ == s_.steps) {
      final_.val_loss_progress = ValLossProgress(evals_, s_.steps);
    }
    final_.elapsed_s = Seconds(start_, Clock::now());
    final_.mean_tokens_per_s = train_seconds_ > 0 ? tokens_ / train_seconds_ : 0.0;
    sink_.OnFinal(final_);
    return final_;
  }

 private:
  enum class Stop {
    kNone,
    kCancelled,  // no more steps; Finish still writes the checkpoint
    kEnded,      // diverged: nothing more
  };

  Status CheckSameModel(const ModelConfig& m) const {
    const ModelConfig& want = s_.model;
    const bool same_mix = !SchemeOf(m.placement).per_block || m.mix_post_fraction == want.mix_post_fraction;
    if (m.placement != want.placement || m.layers != want.layers || m.d_model != want.d_model ||
        m.heads != want.heads || m.d_ff != want.d_ff || m.seq_len != want.seq_len || m.positions != want.positions ||
        !same_mix || m.qk_norm != want.qk_norm || m.norm != want.norm) {
      return InvalidArgument("resume: the checkpoint's model (placement " + std::string(PlacementName(m.placement)) +
                             ", layers " + std::to_string(m.layers) + ", d_model " + std::to_string(m.d_model) +
                             ", heads " + std::to_string(m.heads) + ", d_ff " + std::to_string(m.d_ff) +
                             ", seq_len " + std::to_string(m.seq_len) + ", qk_norm " + (m.qk_norm ? "on" : "off") +
                             ", norm " + NormName(m.norm) + ") differs from the config's");
    }
    return OkStatus();
  }

  // Whether the loop evaluates after step (a step that ends the run
  // evaluates unless it diverged or was cancelled).
  bool EvaluatesAfter(int step) const {
    return (s_.eval_every > 0 && step % s_.eval_every == 0) || step == s_.steps;
  }

  void EmitGradNorms(int step, const std::vector<double>& sq) {
    GradNormsEvent g;
    g.step = step;
    for (int l = 0; l < s_.model.layers; ++l) {
      const BlockOffsets& b = backend_->layout().blocks()[static_cast<size_t>(l)];
      g.norms.push_back({l, "ffn.fc1", std::sqrt(sq[static_cast<size_t>(b.fc1_w_index)])});
      g.norms.push_back({l, "ffn.fc2", std::sqrt(sq[static_cast<size_t>(b.fc2_w_index)])});
    }
    g.elapsed_s = Seconds(start_, Clock::now());
    sink_.OnGradNorms(g);
  }

  void EmitStep(int step, double train_loss, std::optional<double> z_term, double lr, double grad_norm,
                double tokens_per_s) {
    StepEvent e;
    e.step = step;
    e.train_loss = train_loss;
    e.z_term = z_term;
    e.lr = lr;
    e.grad_norm = grad_norm;
    e.tokens_per_s = tokens_per_s;
    e.elapsed_s = Seconds(start_, Clock::now());
    sink_.OnStep(e);
  }

  // The run stops here; no checkpoint of the diverged weights is written.
  Status Diverge(int step) {
    final_.outcome = Outcome::kDiverged;
    final_.diverged_step = step;
    stop_ = Stop::kEnded;
    return OkStatus();
  }

  // Evaluates the current weights (step_done_ updates): an eval event, with
  // the diagnostics unless they are off. At step 0 that is l0, which is
  // neither the final nor the best validation loss.
  Status EvaluateNow() {
    if (o_.diagnostics && step_done_ > 0 && eval_grad_step_ == step_done_) EmitGradNorms(step_done_, eval_grad_sq_);
    TRAINER_ASSIGN_OR_RETURN(Evaluation ev, Evaluate(*backend_, *data_, s_, o_.diagnostics));
    EvalEvent e;
    e.step = step_done_;
    e.val_loss = ev.loss;
    e.val_accuracy = ev.accuracy;
    e.output_log_z = ev.log_z;
    if (o_.diagnostics) e.layers = LayerDiagnostics(ev);
    e.elapsed_s = Seconds(start_, Clock::now());
    sink_.OnEval(e);
    // A run resumed from its final checkpoint evaluates that step again.
    if (!evals_.empty() && evals_.back().first == step_done_) evals_.pop_back();
    evals_.emplace_back(step_done_, ev.loss);
    if (step_done_ == 0) {
      final_.init_val_loss = ev.loss;
      return OkStatus();
    }
    last_eval_step_ = step_done_;
    final_.final_val_loss = ev.loss;
    final_.final_val_accuracy = ev.accuracy;
    if (std::isfinite(ev.loss) && (!final_.best_val_loss || ev.loss < *final_.best_val_loss)) {
      final_.best_val_loss = ev.loss;
    }
    if (!std::isfinite(ev.loss)) {
      final_.outcome = Outcome::kDiverged;
      final_.diverged_step = step_done_;
    }
    return OkStatus();
  }

  std::vector<LayerDiagnosticsValue> LayerDiagnostics(const Evaluation& ev) const {
    const ParamLayout& layout = backend_->layout();
    const bool updated = step_done_ > 0 && update_step_ == step_done_;
    std::vector<LayerDiagnosticsValue> out;
    for (int l = 0; l < s_.model.layers; ++l) {
      LayerDiagnosticsValue d;
      d.layer = l;
      const double m = static_cast<size_t>(l) < ev.max_attn_logit.size() ? ev.max_attn_logit[static_cast<size_t>(l)]
                                                                          : -INFINITY;
      if (m != -INFINITY) d.max_attn_logit = m;
      if (updated) {
        const BlockOffsets& b = layout.blocks()[static_cast<size_t>(l)];
        d.update_ratio_qkv = UpdateRatio(update_sq_, TensorAt(layout, b.qkv_w));
        d.update_ratio_proj = UpdateRatio(update_sq_, TensorAt(layout, b.proj_w));
        d.update_ratio_fc1 = UpdateRatio(update_sq_, static_cast<size_t>(b.fc1_w_index));
        d.update_ratio_fc2 = UpdateRatio(update_sq_, static_cast<size_t>(b.fc2_w_index));
      }
      out.push_back(d);
    }
    return out;
  }

  Status Save() {
    Checkpoint c;
    c.model = s_.model;
    c.step = step_done_;
    c.metadata = o_.checkpoint_metadata;
    c.metadata["optimizer"] = OptimizerName(s_.optimizer.kind);
    c.metadata[kValLossesKey] = FormatEvals(evals_);  // a resumed run's val_loss_progress needs them
    TRAINER_RETURN_IF_ERROR(backend_->GetParameters(&c.params));
    TRAINER_RETURN_IF_ERROR(backend_->GetOptimizerState(&c.m, &c.v));
    c.has_optimizer_state = true;
    return SaveCheckpoint(o_.checkpoint_out, c);
  }

  const TrainSettings& s_;
  const RunOptions& o_;
  EventSink& sink_;
  const int backend_threads_;
  const bool fused_;
  Clock::time_point last_step_end_;
  Stop stop_ = Stop::kNone;
  bool resumed_ = false;
  int next_step_ = 1;
  int above_threshold_ = 0;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Backend> backend_;
  FinalEvent final_;
  Clock::time_point start_;
  int step_done_ = 0;
  int last_eval_step_ = -1;
  // Every evaluation's (step, val_loss), step 0 included, carried across a
  // resume in the checkpoint's metadata: val_loss_progress reads them.
  std::vector<std::pair<int, double>> evals_;
  // The diagnostics of the last step followed by an evaluation.
  std::vector<double> eval_grad_sq_;
  int eval_grad_step_ = -1;
  UpdateSquaredNorms update_sq_;
  int update_step_ = -1;
  double tokens_ = 0, train_seconds_ = 0;
};

}  // namespace

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kSucceeded: return "SUCCEEDED";
    case Outcome::kDiverged: return "DIVERGED";
    case Outcome::kFailed: return "FAILED";
    case Outcome::kCancelled: return "CANCELLED";
  }
  return "FAILED";
}

FinalEvent RunTraining(const ValidTrainSettings& settings, const RunOptions& options, EventSink& sink) {
  return Run(settings.get(), options, sink, settings->threads).Go();
}

Status CheckFusable(const std::vector<TrainSettings>& trials) {
  if (trials.empty()) return InvalidArgument("fused run: no trials");
  if (trials.size() > static_cast<size_t>(kMaxFusedTrials)) {
    return InvalidArgument("fused run: " + std::to_string(trials.size()) + " trials; at most " +
                           std::to_string(kMaxFusedTrials));
  }
  const auto first = FusionSettings(trials[0]);
  for (size_t k = 1; k < trials.size(); ++k) {
    const auto other = FusionSettings(trials[k]);
    for (size_t i = 0; i < first.size(); ++i) {
      if (first[i].second != other[i].second) {
        return InvalidArgument("config " + std::to_string(k) + ": " + first[i].first + " " +
                               QuoteForError(other[i].second) + " differs from config 0's " +
                               QuoteForError(first[i].second) +
                               " (fused trials differ only in lr, warm-up, schedule, seed, optimizer "
                               "coefficients, grad clip, z_loss and the divergence settings)");
      }
    }
  }
  return OkStatus();
}

std::vector<FinalEvent> RunFusedTraining(const std::vector<FusedTrial>& trials) {
  const size_t K = trials.size();
  std::vector<TrainSettings> settings;
  for (const FusedTrial& t : trials) settings.push_back(t.settings.get());
  std::vector<Status> st(K, CheckFusable(settings));
  const int threads = K > 0 ? std::max(1, settings[0].threads) : 1;
  // CPU, K >= threads: whole trials per thread. Each trial's backend has
  // one thread, so a fused trial computes exactly what a solo run with one
  // thread does, and `threads` trials run at once, each on one thread from
  // its forward pass to its optimizer step. A per-op batched product over
  // the K trials would put K-way barriers between ~100 short kernels a step
  // for no gain on a CPU core, which one trial already keeps busy.
  // CPU, K < threads: the trials take their steps in turn, each with all the
  // threads (its batch cut into parts, as a solo run with `threads` threads):
  // a trial's parts inside a region of trials would not be parallel (the
  // kernels allow one active level) and leave cores idle.
  // CUDA: every trial has its own backend, buffers and stream (its CUDA
  // graph captured thread-locally), and its own host thread, so the K
  // trials' kernels overlap on the device: a small model leaves most of a
  // large GPU idle. (HFTA's other form, one strided-batched product per op
  // over the K trials, is not built: trainer/cuda has no trial dimension.)
  const bool gpu = K > 0 && settings[0].device.rfind("cuda", 0) == 0;
  const bool whole_trials = static_cast<size_t>(threads) <= K;
  const int per_trial = gpu || whole_trials ? 1 : threads;
  const int pool = gpu ? static_cast<int>(K) : whole_trials ? threads : 1;
  std::vector<std::unique_ptr<Run>> runs;
  for (size_t k = 0; k < K; ++k) {
    runs.push_back(std::make_unique<Run>(trials[k].settings.get(), trials[k].options, *trials[k].sink, per_trial, true));
  }
  std::vector<FinalEvent> finals(K);
  std::vector<char> done(K, 0);  // not vector<bool>: threads write neighbours
  // A trial that stops (its steps done, diverged, cancelled or failed) ends
  // at once: its final evaluation, checkpoint and final event come now, not
  // when the others are done.
  auto end = [&](size_t k) {
    if (st[k].ok()) st[k] = runs[k]->Finish();
    finals[k] = runs[k]->Conclude(st[k]);
    done[k] = 1;
  };
  // Serial: backends set the process's thread counts as they are made.
  for (size_t k = 0; k < K; ++k) {
    if (st[k].ok()) st[k] = runs[k]->Prepare();
    if (!st[k].ok()) end(k);
  }
  auto each = [&](auto phase) {
    std::vector<int> ks;
    for (size_t k = 0; k < K; ++k) {
      if (!done[k]) ks.push_back(static_cast<int>(k));
    }
    const int n = static_cast<int>(ks.size());
#pragma omp parallel for num_threads(std::max(1, std::min(pool, n))) schedule(dynamic, 1) if (pool > 1)
    for (int i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(ks[static_cast<size_t>(i)]);
      phase(k);
      if (!st[k].ok() || !runs[k]->active()) end(k);
    }
    return n;
  };
  each([&](size_t k) { st[k] = runs[k]->Start(); });
  // In lock step: every trial still running takes its next step.
  while (each([&](size_t k) { st[k] = runs[k]->StepOnce(); }) > 0) {
  }
  return finals;
}

}  // namespace normsweep::trainer
