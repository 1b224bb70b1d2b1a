// The scheduler's Prometheus metrics (prefix normsweep_scheduler_). Registered
// on a registry the caller owns (the server exposes it on /metrics).
// Thread-safe: prometheus-cpp families and metrics synchronise internally.
#ifndef NORMSWEEP_SCHEDULER_SCHEDULER_METRICS_H_
#define NORMSWEEP_SCHEDULER_SCHEDULER_METRICS_H_

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "db/store.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::scheduler {

class SchedulerMetrics {
 public:
  explicit SchedulerMetrics(prometheus::Registry& registry);

  void ObserveLeaseLatency(absl::Duration latency);
  // Trials that reached a final state (trials_completed_total{outcome}).
  void TrialsCompleted(v1::TrialState outcome, int n = 1);
  // The PENDING trials a CancelSweep took to CANCELLED: completed with
  // outcome CANCELLED, as normsweep_scheduler_trials{state="CANCELLED"}
  // counts them. (Its RUNNING trials are counted by TrialsCompleted when
  // they end.)
  void TrialsCancelled(int n);
  // Trials a LeaseTrial leased as fused_trials (beyond its first).
  void TrialsLeasedFused(int n);
  // Attempts that ended without finishing their trial, which went back to
  // the queue: reason "lease_expired", "interrupted" or "failed"
  // (FinishTrialRequest.retry with or without an interruption).
  void AttemptsRequeued(const char* reason, int n = 1);
  // Interruptions recorded, by cause (proto/schema/interruptions.h).
  void Interrupted(const std::string& cause, int n = 1);
  void RpcError(const std::string& method, absl::StatusCode code);
  // Progress accepted by ReportProgress: metric points and step-0 layer
  // gradient norms (a re-sent batch counts again; the store writes it once).
  void ProgressReported(int points, int layer_grad_norms);
  // One ExportSweep chunk sent, with its rows.
  void ExportChunkSent(int rows);
  // Gauges from the database (shared by all replicas, so every replica
  // reports the same totals).
  void SetStats(const db::StoreStats& stats);

 private:
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Family<prometheus::Gauge>& sweeps_;
  prometheus::Family<prometheus::Histogram>& lease_latency_family_;
  prometheus::Histogram& lease_latency_;
  prometheus::Family<prometheus::Counter>& completed_;
  prometheus::Family<prometheus::Counter>& requeued_;
  prometheus::Family<prometheus::Counter>& interruptions_;
  prometheus::Family<prometheus::Gauge>& live_workers_family_;
  prometheus::Gauge& live_workers_;
  prometheus::Family<prometheus::Counter>& rpc_errors_;
  prometheus::Family<prometheus::Counter>& progress_family_;
  prometheus::Counter& progress_points_;
  prometheus::Counter& progress_grad_norms_;
  prometheus::Family<prometheus::Counter>& export_family_;
  prometheus::Counter& export_rows_;
  prometheus::Counter& export_chunks_;
  prometheus::Family<prometheus::Counter>& fused_family_;
  prometheus::Counter& leased_fused_;
};

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_SCHEDULER_METRICS_H_
