#include "worker/worker_metrics.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "proto/schema/interruptions.h"
#include "proto/schema/state_names.h"
#include "trainer/settings/config.h"

namespace normsweep::worker {

namespace {

prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const std::string& name,
                                              const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

// LayerGauges::update_ratio's matrices, in order.
constexpr const char* kUpdateMatrices[] = {"qkv", "proj", "fc1", "fc2"};

prometheus::Labels With(prometheus::Labels labels, const char* key, std::string value) {
  labels[key] = std::move(value);
  return labels;
}

// RenamedTrialGauges()'s entries, in order.
enum RenamedIndex { kStep, kTrainLoss, kValLoss, kGradNorm, kLearningRate };

}  // namespace

const std::vector<RenamedMetric>& RenamedTrialGauges() {
  static const auto* const kRenamed = new std::vector<RenamedMetric>{
      {"normsweep_worker_trial_step", "normsweep_trial_step", "Optimizer steps completed by a running trial"},
      {"normsweep_worker_trial_train_loss", "normsweep_trial_train_loss", "Latest training loss of a running trial"},
      {"normsweep_worker_trial_val_loss", "normsweep_trial_val_loss",
       "Latest validation loss of a running trial (NaN before its first evaluation)"},
      {"normsweep_worker_trial_grad_norm", "normsweep_trial_grad_norm",
       "Latest global gradient norm of a running trial"},
      {"normsweep_worker_trial_learning_rate", "normsweep_trial_learning_rate",
       "Current learning rate of a running trial"},
  };
  return *kRenamed;
}

WorkerMetrics::RenamedFamily WorkerMetrics::Register(prometheus::Registry& registry, const RenamedMetric& m) {
  return {&Gauge(registry, m.name, m.help),
          &Gauge(registry, m.deprecated_name,
                 absl::StrCat("Deprecated, removed in the next release: read ", m.name,
                              " (which has a variant label). ", m.help))};
}

WorkerMetrics::RenamedGauge WorkerMetrics::Add(const RenamedFamily& f, const prometheus::Labels& labels,
                                               const prometheus::Labels& deprecated_labels) {
  return {&f.current->Add(labels), &f.deprecated->Add(deprecated_labels)};
}

void WorkerMetrics::Remove(const RenamedFamily& f, const RenamedGauge& g) {
  f.current->Remove(g.current);
  f.deprecated->Remove(g.deprecated);
}

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry)
    : train_loss_(Register(registry, RenamedTrialGauges()[kTrainLoss])),
      val_loss_(Register(registry, RenamedTrialGauges()[kValLoss])),
      lr_(Register(registry, RenamedTrialGauges()[kLearningRate])),
      grad_norm_(Register(registry, RenamedTrialGauges()[kGradNorm])),
      step_(Register(registry, RenamedTrialGauges()[kStep])),
      output_log_z_(Gauge(registry, "normsweep_worker_trial_output_log_z",
                          "Mean log-sum-exp of the output logits at a running trial's latest evaluation")),
      max_attn_logit_(Gauge(registry, "normsweep_worker_trial_max_attn_logit",
                            "Largest attention logit of a block at a running trial's latest evaluation")),
      update_ratio_(Gauge(registry, "normsweep_worker_trial_update_ratio",
                          "RMS(update) / RMS(weight) of a block's matrix at a running trial's latest evaluation")),
      tokens_per_s_(Gauge(registry, "normsweep_worker_tokens_per_second", "Training throughput per device")),
      busy_slots_(Gauge(registry, "normsweep_worker_busy_slots", "Slots running a trial, per device")),
      finished_(prometheus::BuildCounter()
                    .Name("normsweep_worker_trials_finished_total")
                    .Help("Trials this worker finished, by outcome")
                    .Register(registry)),
      interruptions_(prometheus::BuildCounter()
                         .Name("normsweep_worker_interruptions_total")
                         .Help("Trial attempts this worker ended as interruptions (not the trial's fault), by cause")
                         .Register(registry)),
      idle_family_(prometheus::BuildHistogram()
                       .Name("normsweep_worker_slot_idle_seconds")
                       .Help("Gap on a slot between one trial's process ending and the next starting")
                       .Register(registry)),
      idle_(idle_family_.Add({}, prometheus::Histogram::BucketBoundaries{0.001, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                                          0.25, 0.5, 1, 2.5, 5})) {
  for (v1::TrialState s : {v1::TRIAL_SUCCEEDED, v1::TRIAL_DIVERGED, v1::TRIAL_FAILED, v1::TRIAL_CANCELLED}) {
    finished_.Add({{"outcome", schema::TrialStateName(s)}});
  }
  // The causes a worker reports (worker_lost is the scheduler's finding).
  for (absl::string_view cause : schema::kInterruptionCauses) {
    if (cause != schema::kWorkerLost) interruptions_.Add({{"cause", std::string(cause)}});
  }
}

void WorkerMetrics::AddDevice(const std::string& device) {
  tokens_per_s_.Add({{"device", device}});
  busy_slots_.Add({{"device", device}});
}

void WorkerMetrics::TrialStarted(const v1::Trial& trial, int slot, const std::string& device) {
  const v1::TrainConfig& c = trial.config();
  // The deprecated names keep the labels they had; the variant tells apart
  // the trials of one cell that differ in an extra axis (QK-norm on and off).
  const prometheus::Labels deprecated_labels = {{"sweep", absl::StrCat(trial.sweep_id())},
                                                {"trial", absl::StrCat(trial.id())},
                                                {"placement", c.placement()},
                                                {"warmup_steps", absl::StrCat(c.warmup_steps())},
                                                {"peak_lr", absl::StrCat(c.lr())},
                                                {"seed", absl::StrCat(c.seed())}};
  const prometheus::Labels labels = With(deprecated_labels, "variant", trial.variant());
  absl::MutexLock lock(&mu_);
  Live live;
  live.train_loss = Add(train_loss_, labels, deprecated_labels);
  live.val_loss = Add(val_loss_, labels, deprecated_labels);
  live.lr = Add(lr_, labels, deprecated_labels);
  live.grad_norm = Add(grad_norm_, labels, deprecated_labels);
  live.step = Add(step_, labels, deprecated_labels);
  live.output_log_z = &output_log_z_.Add(labels);
  live.device = device;
  live.val_loss.Set(std::numeric_limits<double>::quiet_NaN());  // no evaluation yet
  live.output_log_z->Set(std::numeric_limits<double>::quiet_NaN());
  live.labels = labels;
  live.layers = c.layers() > 0 ? std::min(c.layers(), trainer::kMaxLayers) : trainer::kMaxLayers;
  live_[trial.id()] = live;
}

void WorkerMetrics::SlotBusy(const std::string& device, bool busy) {
  prometheus::Gauge& g = busy_slots_.Add({{"device", device}});
  if (busy) {
    g.Increment();
  } else {
    g.Decrement();
  }
}

void WorkerMetrics::OnEvent(int64_t trial_id, const v1::TrainEvent& e) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(trial_id);
  if (it == live_.end()) return;
  Live& l = it->second;
  if (e.type() == "step") {
    l.step.Set(e.step());
    if (e.has_train_loss()) l.train_loss.Set(e.train_loss());
    if (e.has_lr()) l.lr.Set(e.lr());
    if (e.has_grad_norm()) l.grad_norm.Set(e.grad_norm());
    if (e.has_tokens_per_s()) {
      l.tokens_per_s = e.tokens_per_s();
      UpdateDeviceThroughput(l.device);
    }
  } else if (e.type() == "eval") {
    if (e.has_val_loss()) l.val_loss.Set(e.val_loss());
    if (e.has_output_log_z()) l.output_log_z->Set(e.output_log_z());
    OnDiagnostics(l, e);
  }
}

void WorkerMetrics::OnDiagnostics(Live& l, const v1::TrainEvent& e) {
  for (const v1::LayerDiagnostics& d : e.layer_diagnostics()) {
    if (d.layer() < 0 || d.layer() >= l.layers) continue;  // bounded series, whatever the trainer says
    LayerGauges& g = l.layer_gauges[d.layer()];
    const prometheus::Labels layer = With(l.labels, "layer", absl::StrCat(d.layer()));
    if (d.has_max_attn_logit()) {
      if (g.max_attn_logit == nullptr) g.max_attn_logit = &max_attn_logit_.Add(layer);
      g.max_attn_logit->Set(d.max_attn_logit());
    }
    const bool has[4] = {d.has_update_ratio_qkv(), d.has_update_ratio_proj(), d.has_update_ratio_fc1(),
                         d.has_update_ratio_fc2()};
    const double value[4] = {d.update_ratio_qkv(), d.update_ratio_proj(), d.update_ratio_fc1(),
                             d.update_ratio_fc2()};
    for (int m = 0; m < 4; ++m) {
      if (!has[m]) continue;
      if (g.update_ratio[m] == nullptr) g.update_ratio[m] = &update_ratio_.Add(With(layer, "matrix", kUpdateMatrices[m]));
      g.update_ratio[m]->Set(value[m]);
    }
  }
}

void WorkerMetrics::UpdateDeviceThroughput(const std::string& device) {
  double sum = 0;
  for (const auto& [id, l] : live_) {
    if (l.device == device) sum += l.tokens_per_s;
  }
  tokens_per_s_.Add({{"device", device}}).Set(sum);
}

void WorkerMetrics::Interrupted(const std::string& cause) { interruptions_.Add({{"cause", cause}}).Increment(); }

void WorkerMetrics::TrialEnded(int64_t trial_id, v1::TrialState outcome) {
  if (outcome != v1::TRIAL_STATE_UNSPECIFIED) finished_.Add({{"outcome", schema::TrialStateName(outcome)}}).Increment();
  absl::MutexLock lock(&mu_);
  auto it = live_.find(trial_id);
  if (it == live_.end()) return;
  Live l = it->second;
  live_.erase(it);
  Remove(train_loss_, l.train_loss);
  Remove(val_loss_, l.val_loss);
  Remove(lr_, l.lr);
  Remove(grad_norm_, l.grad_norm);
  Remove(step_, l.step);
  output_log_z_.Remove(l.output_log_z);
  for (const auto& [layer, g] : l.layer_gauges) {
    if (g.max_attn_logit != nullptr) max_attn_logit_.Remove(g.max_attn_logit);
    for (prometheus::Gauge* r : g.update_ratio) {
      if (r != nullptr) update_ratio_.Remove(r);
    }
  }
  UpdateDeviceThroughput(l.device);
}

void WorkerMetrics::SlotIdle(absl::Duration gap) { idle_.Observe(absl::ToDoubleSeconds(gap)); }

}  // namespace normsweep::worker
