// The worker's Prometheus metrics (every series is listed in
// worker/README.md, "Metrics"; names are normsweep_worker_*), on a registry
// the caller owns: worker_main exposes it on /metrics, tests serialise it.
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
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"

namespace normsweep::worker {

// A per-trial gauge renamed to the normsweep_worker_ pattern, whose old name
// is still exported, with the same value and the old labels (no `variant`),
// for one release (docs/cluster.md#metrics).
struct RenamedMetric {
  const char* name;
  const char* deprecated_name;
  const char* help;
};
const std::vector<RenamedMetric>& RenamedTrialGauges();

class WorkerMetrics {
 public:
  explicit WorkerMetrics(prometheus::Registry& registry);

  void AddDevice(const std::string& device);  // so that idle devices show 0
  // A slot of `device` started (busy) or ended (!busy) a trainer process,
  // which trains one trial or several fused.
  void SlotBusy(const std::string& device, bool busy);
  // A trial started on slot `slot` of `device`. Its series are labelled
  // sweep, trial, placement, variant (Trial.variant, "" without extra
  // axes), warmup_steps, peak_lr, seed.
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
  // One of RenamedTrialGauges(): a trial's series under both names.
  struct RenamedGauge {
    prometheus::Gauge* current = nullptr;
    prometheus::Gauge* deprecated = nullptr;
    void Set(double v) {
      current->Set(v);
      deprecated->Set(v);
    }
  };
  struct RenamedFamily {
    prometheus::Family<prometheus::Gauge>* current = nullptr;
    prometheus::Family<prometheus::Gauge>* deprecated = nullptr;
  };
  struct Live {
    RenamedGauge train_loss, val_loss, lr, grad_norm, step;
    prometheus::Gauge* output_log_z = nullptr;
    std::string device;
    double tokens_per_s = 0;
    prometheus::Labels labels;  // the trial's, variant included, for the per-layer gauges
    int layers = 0;             // diagnostics of blocks [0, layers) are exported
    std::map<int, LayerGauges> layer_gauges;
  };
  void UpdateDeviceThroughput(const std::string& device) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnDiagnostics(Live& live, const v1::TrainEvent& eval) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Both families of one of RenamedTrialGauges().
  static RenamedFamily Register(prometheus::Registry& registry, const RenamedMetric& m);
  static RenamedGauge Add(const RenamedFamily& f, const prometheus::Labels& labels,
                          const prometheus::Labels& deprecated_labels);
  static void Remove(const RenamedFamily& f, const RenamedGauge& g);

  RenamedFamily train_loss_, val_loss_, lr_, grad_norm_, step_;
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
