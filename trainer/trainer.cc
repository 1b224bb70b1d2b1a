#include "trainer/trainer.h"

#include <chrono>
#include <cmath>
#include <memory>

#include "trainer/backend.h"
#include "trainer/checkpoint.h"
#include "trainer/data.h"
#include "trainer/param_layout.h"
#include "trainer/rng.h"
#include "trainer/schedule.h"

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

class Run {
 public:
  Run(const TrainSettings& s, const RunOptions& o, EventSink& sink) : s_(s), o_(o), sink_(sink) {}

  FinalEvent Go() {
    start_ = Clock::now();
    Status st = Loop();
    if (!st.ok()) {
      final_.outcome = Outcome::kFailed;
      final_.error = st.message();
    }
    final_.step = step_done_;
    final_.elapsed_s = Seconds(start_, Clock::now());
    final_.mean_tokens_per_s = train_seconds_ > 0 ? tokens_ / train_seconds_ : 0.0;
    sink_.OnFinal(final_);
    return final_;
  }

 private:
  Status Loop() {
    TRAINER_ASSIGN_OR_RETURN(data_, MakeDataset(s_.data, s_.model.seq_len, s_.batch_size));
    if (const double u = UnigramLoss(*data_, s_.batch_size, s_.model.seq_len, s_.eval_batches); std::isfinite(u)) {
      final_.unigram_loss = u;
    }
    BackendOptions bo;
    bo.device = s_.device;
    bo.precision = s_.precision;
    bo.threads = s_.threads;
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

    int first_step = 1;
    if (!o_.resume_from.empty()) {
      TRAINER_ASSIGN_OR_RETURN(Checkpoint c, LoadCheckpoint(o_.resume_from));
      TRAINER_RETURN_IF_ERROR(CheckSameModel(c.model));
      TRAINER_RETURN_IF_ERROR(backend_->SetParameters(c.params));
      if (c.has_optimizer_state) TRAINER_RETURN_IF_ERROR(backend_->SetOptimizerState(c.m, c.v));
      first_step = c.step + 1;
      step_done_ = c.step;
    } else {
      TRAINER_RETURN_IF_ERROR(backend_->SetParameters(InitParameters(backend_->layout(), s_.model, s_.seed)));
      // l0, the loss at initialisation (step 0); a resumed run has none.
      if (o_.diagnostics) TRAINER_RETURN_IF_ERROR(EvaluateNow());
    }

    int above_threshold = 0;
    for (int step = first_step; step <= s_.steps; ++step) {
      if (o_.cancel != nullptr && o_.cancel->load()) {
        final_.outcome = Outcome::kCancelled;
        break;
      }
      const Clock::time_point t0 = Clock::now();
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

      above_threshold = train_loss > s_.divergence_loss ? above_threshold + 1 : 0;
      if (above_threshold >= s_.divergence_patience) return Diverge(step);

      if (s_.eval_every > 0 && step % s_.eval_every == 0 && step < s_.steps) {
        TRAINER_RETURN_IF_ERROR(EvaluateNow());
        if (final_.outcome == Outcome::kDiverged) return OkStatus();
      }
      if (s_.checkpoint_every > 0 && step % s_.checkpoint_every == 0 && !o_.checkpoint_out.empty()) {
        TRAINER_RETURN_IF_ERROR(Save());
      }
    }
    if (final_.outcome == Outcome::kSucceeded && (step_done_ > last_eval_step_ || !final_.final_val_loss)) {
      TRAINER_RETURN_IF_ERROR(EvaluateNow());
      if (final_.outcome == Outcome::kDiverged) return OkStatus();
    }
    if (!o_.checkpoint_out.empty()) TRAINER_RETURN_IF_ERROR(Save());
    return OkStatus();
  }

  Status CheckSameModel(const ModelConfig& m) const {
    const ModelConfig& want = s_.model;
    const bool same_mix = m.placement != Placement::kMix || m.mix_post_fraction == want.mix_post_fraction;
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
    TRAINER_RETURN_IF_ERROR(backend_->GetParameters(&c.params));
    TRAINER_RETURN_IF_ERROR(backend_->GetOptimizerState(&c.m, &c.v));
    c.has_optimizer_state = true;
    return SaveCheckpoint(o_.checkpoint_out, c);
  }

  const TrainSettings& s_;
  const RunOptions& o_;
  EventSink& sink_;
  std::unique_ptr<Dataset> data_;
  std::unique_ptr<Backend> backend_;
  FinalEvent final_;
  Clock::time_point start_;
  int step_done_ = 0;
  int last_eval_step_ = -1;
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

FinalEvent RunTraining(const TrainSettings& settings, const RunOptions& options, EventSink& sink) {
  Status valid = ValidateTrainSettings(settings);
  if (!valid.ok()) {
    FinalEvent f;
    f.outcome = Outcome::kFailed;
    f.error = valid.message();
    sink.OnFinal(f);
    return f;
  }
  return Run(settings, options, sink).Go();
}

}  // namespace normsweep::trainer
