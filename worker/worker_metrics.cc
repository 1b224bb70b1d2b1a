#include "worker/worker_metrics.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "proto/schema/state_names.h"

namespace normsweep::worker {

namespace {

prometheus::Family<prometheus::Gauge>& Gauge(prometheus::Registry& r, const char* name, const char* help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(r);
}

}  // namespace

WorkerMetrics::WorkerMetrics(prometheus::Registry& registry)
    : train_loss_(Gauge(registry, "normsweep_trial_train_loss", "Latest training loss of a running trial")),
      val_loss_(Gauge(registry, "normsweep_trial_val_loss", "Latest validation loss of a running trial")),
      lr_(Gauge(registry, "normsweep_trial_learning_rate", "Current learning rate of a running trial")),
      grad_norm_(Gauge(registry, "normsweep_trial_grad_norm", "Latest global gradient norm of a running trial")),
      step_(Gauge(registry, "normsweep_trial_step", "Optimizer steps completed by a running trial")),
      tokens_per_s_(Gauge(registry, "normsweep_worker_tokens_per_second", "Training throughput per device")),
      busy_slots_(Gauge(registry, "normsweep_worker_busy_slots", "Slots running a trial, per device")),
      finished_(prometheus::BuildCounter()
                    .Name("normsweep_worker_trials_finished_total")
                    .Help("Trials this worker finished, by outcome")
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
}

void WorkerMetrics::AddDevice(const std::string& device) {
  tokens_per_s_.Add({{"device", device}});
  busy_slots_.Add({{"device", device}});
}

void WorkerMetrics::TrialStarted(const v1::Trial& trial, int slot, const std::string& device) {
  const v1::TrainConfig& c = trial.config();
  const prometheus::Labels labels = {{"sweep", absl::StrCat(trial.sweep_id())},
                                     {"trial", absl::StrCat(trial.id())},
                                     {"placement", c.placement()},
                                     {"warmup_steps", absl::StrCat(c.warmup_steps())},
                                     {"peak_lr", absl::StrCat(c.lr())},
                                     {"seed", absl::StrCat(c.seed())}};
  absl::MutexLock lock(&mu_);
  Live live{&train_loss_.Add(labels), &val_loss_.Add(labels), &lr_.Add(labels), &grad_norm_.Add(labels),
            &step_.Add(labels), device};
  live.val_loss->Set(std::numeric_limits<double>::quiet_NaN());  // no evaluation yet
  live_[trial.id()] = live;
  busy_slots_.Add({{"device", device}}).Increment();
}

void WorkerMetrics::OnEvent(int64_t trial_id, const v1::TrainEvent& e) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(trial_id);
  if (it == live_.end()) return;
  Live& l = it->second;
  if (e.type() == "step") {
    l.step->Set(e.step());
    if (e.has_train_loss()) l.train_loss->Set(e.train_loss());
    if (e.has_lr()) l.lr->Set(e.lr());
    if (e.has_grad_norm()) l.grad_norm->Set(e.grad_norm());
    if (e.has_tokens_per_s()) {
      l.tokens_per_s = e.tokens_per_s();
      UpdateDeviceThroughput(l.device);
    }
  } else if (e.type() == "eval") {
    if (e.has_val_loss()) l.val_loss->Set(e.val_loss());
  }
}

void WorkerMetrics::UpdateDeviceThroughput(const std::string& device) {
  double sum = 0;
  for (const auto& [id, l] : live_) {
    if (l.device == device) sum += l.tokens_per_s;
  }
  tokens_per_s_.Add({{"device", device}}).Set(sum);
}

void WorkerMetrics::TrialEnded(int64_t trial_id, v1::TrialState outcome) {
  if (outcome != v1::TRIAL_STATE_UNSPECIFIED) finished_.Add({{"outcome", schema::TrialStateName(outcome)}}).Increment();
  absl::MutexLock lock(&mu_);
  auto it = live_.find(trial_id);
  if (it == live_.end()) return;
  Live l = it->second;
  live_.erase(it);
  train_loss_.Remove(l.train_loss);
  val_loss_.Remove(l.val_loss);
  lr_.Remove(l.lr);
  grad_norm_.Remove(l.grad_norm);
  step_.Remove(l.step);
  busy_slots_.Add({{"device", l.device}}).Decrement();
  UpdateDeviceThroughput(l.device);
}

void WorkerMetrics::SlotIdle(absl::Duration gap) { idle_.Observe(absl::ToDoubleSeconds(gap)); }

}  // namespace normsweep::worker
