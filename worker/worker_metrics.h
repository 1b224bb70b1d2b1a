// The worker's Prometheus metrics (every series is listed in
// worker/README.md, "Metrics"), on a registry the caller owns: worker_main
// exposes it on /metrics, tests serialise it.
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
  // A slot of `device` started (busy) or ended (!busy) a trainer process,
  // which trains one trial or several fused.
  void SlotBusy(const std::string& device, bool busy);
  // A trial started on slot `slot` of `device`.
  void TrialStarted(const v1::Trial& trial, int slot, const std::string& device);
  void OnEvent(int64_t trial_id, const v1::TrainEvent& event);
  // Removes the trial's series; outcome counted unless UNSPECIFIED (lost or
  // handed back).
  void TrialEnded(int64_t trial_id, v1::TrialState outcome);
  void SlotIdle(absl::Duration gap);
  // An attempt this worker ended as an interruption, with its cause.
  void Interrupted(const std::string& cause);

 private:
  // One block's diagnostic gauges, made at its first evaluation.
  struct LayerGauges {
    prometheus::Gauge* max_attn_logit = nullptr;
    prometheus::Gauge* update_ratio[4] = {};  // qkv, proj, fc1, fc2; made when first reported
  };
  struct Live {
    prometheus::Gauge* train_loss = nullptr;
    prometheus::Gauge* val_loss = nullptr;
    prometheus::Gauge* lr = nullptr;
    prometheus::Gauge* grad_norm = nullptr;
    prometheus::Gauge* step = nullptr;
    prometheus::Gauge* output_log_z = nullptr;
    std::string device;
    double tokens_per_s = 0;
    prometheus::Labels labels;  // the trial's, for the per-layer gauges
    int layers = 0;             // diagnostics of blocks [0, layers) are exported
    std::map<int, LayerGauges> layer_gauges;
  };
  void UpdateDeviceThroughput(const std::string& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDiagnostics(Live& live, const v1::TrainEvent& eval) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  prometheus::Family<prometheus::Gauge>& train_loss_;
  prometheus::Family<prometheus::Gauge>& val_loss_;
  prometheus::Family<prometheus::Gauge>& lr_;
  prometheus::Family<prometheus::Gauge>& grad_norm_;
  prometheus::Family<prometheus::Gauge>& step_;
  prometheus::Family<prometheus::Gauge>& output_log_z_;
  prometheus::Family<prometheus::Gauge>& max_attn_logit_;
  prometheus::Family<prometheus::Gauge>& update_ratio_;
  prometheus::Family<prometheus::Gauge>& tokens_per_s_;
  prometheus::Family<prometheus::Gauge>& busy_slots_;
  prometheus::Family<prometheus::Counter>& finished_;
  prometheus::Family<prometheus::Counter>& interruptions_;
  prometheus::Family<prometheus::Histogram>& idle_family_;
  prometheus::Histogram& idle_;

  absl::Mutex mu_;
  std::map<int64_t, Live> live_ ABSL_GUARDED_BY(mu_);
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_WORKER_METRICS_H_
