#include "scheduler/scheduler_metrics.h"

#include "absl/status/status.h"
#include "proto/schema/interruptions.h"

namespace normsweep::scheduler {

SchedulerMetrics::SchedulerMetrics(prometheus::Registry& registry)
    : trials_(prometheus::BuildGauge()
                  .Name("normsweep_scheduler_trials")
                  .Help("Trials by state, all sweeps")
                  .Register(registry)),
      sweeps_(prometheus::BuildGauge()
                  .Name("normsweep_scheduler_sweeps")
                  .Help("Sweeps by state")
                  .Register(registry)),
      lease_latency_family_(prometheus::BuildHistogram()
                                .Name("normsweep_scheduler_lease_latency_seconds")
                                .Help("Time to lease a trial (LeaseTrial in the scheduler)")
                                .Register(registry)),
      lease_latency_(lease_latency_family_.Add(
          {}, prometheus::Histogram::BucketBoundaries{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1,
                                                      0.25, 0.5, 1, 2.5})),
      completed_(prometheus::BuildCounter()
                     .Name("normsweep_scheduler_trials_completed_total")
                     .Help("Trials that reached a final state through this scheduler, by outcome (CANCELLED: "
                           "the pending trials a CancelSweep cancelled, and running trials that ended cancelled)")
                     .Register(registry)),
      requeued_(prometheus::BuildCounter()
                    .Name("normsweep_scheduler_attempts_requeued_total")
                    .Help("Attempts that ended without finishing their trial and were queued again, by reason: "
                          "lease_expired; interrupted (the worker reported an interruption: a signal from "
                          "outside, a lease it could not renew, a drain); failed (the trial's own failure, "
                          "retried while max_attempts allows)")
                    .Register(registry)),
      interruptions_(prometheus::BuildCounter()
                         .Name("normsweep_scheduler_interruptions_total")
                         .Help("Attempts ended through no fault of their trial, by cause (worker_lost, "
                               "lease_lost, scheduler_restart, external_signal, worker_drained), as this "
                               "scheduler recorded them; never counted against max_attempts")
                         .Register(registry)),
      live_workers_family_(prometheus::BuildGauge()
                               .Name("normsweep_scheduler_live_workers")
                               .Help("Workers that heartbeated recently")
                               .Register(registry)),
      live_workers_(live_workers_family_.Add({})),
      rpc_errors_(prometheus::BuildCounter()
                      .Name("normsweep_scheduler_rpc_errors_total")
                      .Help("Failed RPCs by method and gRPC code")
                      .Register(registry)),
      progress_family_(prometheus::BuildCounter()
                           .Name("normsweep_scheduler_progress_points_total")
                           .Help("Progress accepted by ReportProgress, by kind: metric (one step's point) or "
                                 "layer_grad_norm (one layer's matrix norm)")
                           .Register(registry)),
      progress_points_(progress_family_.Add({{"kind", "metric"}})),
      progress_grad_norms_(progress_family_.Add({{"kind", "layer_grad_norm"}})),
      export_family_(prometheus::BuildCounter()
                         .Name("normsweep_scheduler_export_total")
                         .Help("What ExportSweep sent, by kind: row or chunk")
                         .Register(registry)),
      export_rows_(export_family_.Add({{"kind", "row"}})),
      export_chunks_(export_family_.Add({{"kind", "chunk"}})),
      fused_family_(prometheus::BuildCounter()
                        .Name("normsweep_scheduler_trials_leased_fused_total")
                        .Help("Trials leased as fused_trials of a LeaseTrial (max_trials > 1), beyond its "
                              "first trial")
                        .Register(registry)),
      leased_fused_(fused_family_.Add({})) {
  // Present from the start, so that dashboards show zeros rather than gaps.
  for (const char* s : {"PENDING", "RUNNING", "SUCCEEDED", "DIVERGED", "FAILED", "CANCELLED"}) {
    trials_.Add({{"state", s}});
  }
  for (const char* s : {"SUCCEEDED", "DIVERGED", "FAILED", "CANCELLED"}) completed_.Add({{"outcome", s}});
  for (const char* s : {"RUNNING", "COMPLETED", "CANCELLED"}) sweeps_.Add({{"state", s}});
  for (const char* r : {"lease_expired", "interrupted", "failed"}) requeued_.Add({{"reason", r}});
  for (absl::string_view c : schema::kInterruptionCauses) interruptions_.Add({{"cause", std::string(c)}});
}

void SchedulerMetrics::ObserveLeaseLatency(absl::Duration latency) {
  lease_latency_.Observe(absl::ToDoubleSeconds(latency));
}

void SchedulerMetrics::TrialsLeasedFused(int n) {
  if (n > 0) leased_fused_.Increment(n);
}

void SchedulerMetrics::TrialsCompleted(v1::TrialState outcome, int n) {
  if (n > 0) completed_.Add({{"outcome", db::TrialStateName(outcome)}}).Increment(n);
}

void SchedulerMetrics::TrialsCancelled(int n) { TrialsCompleted(v1::TRIAL_CANCELLED, n); }

void SchedulerMetrics::AttemptsRequeued(const char* reason, int n) {
  if (n > 0) requeued_.Add({{"reason", reason}}).Increment(n);
}

void SchedulerMetrics::Interrupted(const std::string& cause, int n) {
  if (n > 0) interruptions_.Add({{"cause", cause}}).Increment(n);
}

void SchedulerMetrics::RpcError(const std::string& method, absl::StatusCode code) {
  rpc_errors_.Add({{"method", method}, {"code", absl::StatusCodeToString(code)}}).Increment();
}

void SchedulerMetrics::ProgressReported(int points, int layer_grad_norms) {
  progress_points_.Increment(points);
  progress_grad_norms_.Increment(layer_grad_norms);
}

void SchedulerMetrics::ExportChunkSent(int rows) {
  export_rows_.Increment(rows);
  export_chunks_.Increment();
}

void SchedulerMetrics::SetStats(const db::StoreStats& stats) {
  const v1::TrialCounts& c = stats.trials;
  trials_.Add({{"state", "PENDING"}}).Set(c.pending());
  trials_.Add({{"state", "RUNNING"}}).Set(c.running());
  trials_.Add({{"state", "SUCCEEDED"}}).Set(c.succeeded());
  trials_.Add({{"state", "DIVERGED"}}).Set(c.diverged());
  trials_.Add({{"state", "FAILED"}}).Set(c.failed());
  trials_.Add({{"state", "CANCELLED"}}).Set(c.cancelled());
  sweeps_.Add({{"state", "RUNNING"}}).Set(stats.sweeps_running);
  sweeps_.Add({{"state", "COMPLETED"}}).Set(stats.sweeps_completed);
  sweeps_.Add({{"state", "CANCELLED"}}).Set(stats.sweeps_cancelled);
  live_workers_.Set(stats.live_workers);
}

}  // namespace normsweep::scheduler
