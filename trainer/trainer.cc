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
};

StatusOr<Evaluation> Evaluate(Backend& backend, const Dataset& data, const TrainSettings& s) {
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
  return e;
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
    BackendOptions bo;
    bo.device = s_.device;
    bo.precision = s_.precision;
    bo.threads = s_.threads;
    bo.model = s_.model;
    bo.optimizer = s_.optimizer;
    bo.max_batch_size = s_.batch_size;
    TRAINER_ASSIGN_OR_RETURN(backend_, MakeBackend(bo));
    final_.backend = backend_->name();
    final_.precision = backend_->precision();
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
      if (step == 1) EmitGradNorms(sq);

      const double train_loss = loss.mean();
      final_.final_train_loss = train_loss;
      OptimizerStepArgs args;
      args.step = step;
      args.lr = LearningRate(s_.schedule, step);
      if (!std::isfinite(train_loss) || !std::isfinite(grad_norm)) {
        EmitStep(step, train_loss, args.lr, grad_norm, 0.0);
        return Diverge(step);
      }
      if (s_.optimizer.grad_clip > 0 && grad_norm > s_.optimizer.grad_clip) {
        args.grad_scale = s_.optimizer.grad_clip / grad_norm;
      }
      TRAINER_RETURN_IF_ERROR(backend_->OptimizerStep(args));
      step_done_ = step;
      const double dt = Seconds(t0, Clock::now());
      const double tokens = static_cast<double>(s_.batch_size) * s_.model.seq_len;
      tokens_ += tokens;
      train_seconds_ += dt;

      EmitStep(step, train_loss, args.lr, grad_norm, dt > 0 ? tokens / dt : 0);

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
    if (m.placement != want.placement || m.layers != want.layers || m.d_model != want.d_model ||
        m.heads != want.heads || m.d_ff != want.d_ff || m.seq_len != want.seq_len || m.positions != want.positions) {
      return InvalidArgument("resume: the checkpoint's model (placement " + std::string(PlacementName(m.placement)) +
                             ", layers " + std::to_string(m.layers) + ", d_model " + std::to_string(m.d_model) +
                             ", heads " + std::to_string(m.heads) + ", d_ff " + std::to_string(m.d_ff) +
                             ", seq_len " + std::to_string(m.seq_len) + ") differs from the config's");
    }
    return OkStatus();
  }

  void EmitGradNorms(const std::vector<double>& sq) {
    GradNormsEvent g;
    for (int l = 0; l < s_.model.layers; ++l) {
      const BlockOffsets& b = backend_->layout().blocks()[static_cast<size_t>(l)];
      g.norms.push_back({l, "ffn.fc1", std::sqrt(sq[static_cast<size_t>(b.fc1_w_index)])});
      g.norms.push_back({l, "ffn.fc2", std::sqrt(sq[static_cast<size_t>(b.fc2_w_index)])});
    }
    g.elapsed_s = Seconds(start_, Clock::now());
    sink_.OnGradNorms(g);
  }

  void EmitStep(int step, double train_loss, double lr, double grad_norm, double tokens_per_s) {
    StepEvent e;
    e.step = step;
    e.train_loss = train_loss;
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

  Status EvaluateNow() {
    TRAINER_ASSIGN_OR_RETURN(Evaluation ev, Evaluate(*backend_, *data_, s_));
    last_eval_step_ = step_done_;
    EvalEvent e;
    e.step = step_done_;
    e.val_loss = ev.loss;
    e.val_accuracy = ev.accuracy;
    e.elapsed_s = Seconds(start_, Clock::now());
    sink_.OnEval(e);
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
