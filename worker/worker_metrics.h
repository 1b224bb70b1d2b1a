// The worker's Prometheus metrics, on a registry the caller owns (worker_main
// exposes it on /metrics; tests serialise it).
//   normsweep_trial_{train_loss,val_loss,learning_rate,grad_norm,step}
//       per live trial, labels sweep, trial, placement, warmup_steps, peak_lr,
//       seed; removed when the trial ends
//   normsweep_worker_tokens_per_second{device}   summed over the device's slots
//   normsweep_worker_busy_slots{device}
//   normsweep_worker_trials_finished_total{outcome}
//   normsweep_worker_slot_idle_seconds            histogram: a slot's gap between
//       one trial's process ending and the next one starting
// Thread-safe: mu_ guards the per-trial and per-slot bookkeeping; the
// prometheus-cpp families synchronise themselves.
#ifndef NORMSWEEP_WORKER_WORKER_METRICS_H_
#define NORMSWEEP_WORKER_WORKER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"

namespace normsweep::worker {

class WorkerMetrics {
 public:
  explicit WorkerMetrics(prometheus::Registry& registry);

  void AddDevice(const std::string& device);  // so that idle devices show 0
  // A trial started on slot `slot` of `device`.
  void TrialStarted(const v1::Trial& trial, int slot, const std::string& device);
  void OnEvent(int64_t trial_id, const v1::TrainEvent& event);
  // Removes the trial's series; outcome counted unless UNSPECIFIED (lost or
  // handed back).
  void TrialEnded(int64_t trial_id, v1::TrialState outcome);
  void SlotIdle(absl::Duration gap);

 private:
  struct Live {
    prometheus::Gauge* train_loss;
    prometheus::Gauge* val_loss;
    prometheus::Gauge* lr;
    prometheus::Gauge* grad_norm;
    prometheus::Gauge* step;
    std::string device;
    double tokens_per_s = 0;
  };
  void UpdateDeviceThroughput(const std::string& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Gauge>& train_loss_;
  prometheus::Family<prometheus::Gauge>& val_loss_;
  prometheus::Family<prometheus::Gauge>& lr_;
  prometheus::Family<prometheus::Gauge>& grad_norm_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& tokens_per_s_;
  prometheus::Family<prometheus::Gauge>& busy_slots_;
  prometheus::Family<prometheus::Counter>& finished_;
  prometheus::Family<prometheus::Histogram>& idle_family_;
  prometheus::Histogram& idle_;

  absl::Mutex mu_;
  std::map<int64_t, Live> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_WORKER_METRICS_H_
