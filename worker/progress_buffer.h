// One trial's progress not yet acknowledged by the scheduler: metric points,
// per-layer gradient norms and per-layer diagnostics, turned from the
// trainer's events and sent in batches. A batch stays in the buffer until the
// scheduler acknowledges it (Peek, then Ack), so a failed call re-sends
// exactly what it lost and an acknowledged item is never sent again.
//
// Not thread-safe: the LeaseTable's mutex (lease.h) guards each buffer.
#ifndef NORMSWEEP_WORKER_PROGRESS_BUFFER_H_
#define NORMSWEEP_WORKER_PROGRESS_BUFFER_H_

#include <deque>
#include <vector>

#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"
#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::worker {

// How much of each kind one ReportProgress may carry (proto/schema/api_limits.h
// by default; tests pass smaller ones).
struct BatchLimits {
  int points;             // metric points
  int norms;              // LayerGradNorm entries over all the batch's steps
  int diagnostic_steps;   // StepDiagnostics
  int diagnostic_layers;  // LayerDiagnostics over all of them
  static BatchLimits Api(int points);  // the API's limits, at most `points` points
};

// What one Peek put into the request, for its Ack.
struct PeekedBatch {
  int points = 0;
  int norms = 0;        // LayerGradNorms (steps)
  int diagnostics = 0;  // StepDiagnostics (steps)
};

class ProgressBuffer {
 public:
  // Step: train_loss, lr, grad_norm, tokens_per_s, z_term at its step.
  // Eval: val_loss, val_accuracy, output_log_z (merged into the step's point
  // while that is still waiting; step 0 is the evaluation before the first
  // update), and its layer_diagnostics as one StepDiagnostics. grad_norms:
  // one LayerGradNorms at the event's step. Non-finite z_term, output_log_z
  // and diagnostic values (a diverging run's) are left out: the API takes
  // them finite or absent. Other events carry no progress. `now` starts the
  // flush timer.
  void Add(const v1::TrainEvent& event, absl::Time now);

  bool empty() const { return points_.empty() && norms_.empty() && diagnostics_.empty(); }
  int pending_points() const { return static_cast<int>(points_.size()); }

  // Time to send: flush_points or more are waiting, or the oldest unsent
  // item has waited flush_interval.
  bool ShouldFlush(absl::Time now, absl::Duration flush_interval, int flush_points) const;

  // The next batch into request: the oldest points, grad norms and
  // diagnostics within limits (whole steps of norms and diagnostics; always
  // at least one of each kind that waits). Nothing is removed, but those
  // points are frozen (an eval no longer merges into them) until the next
  // Peek or Ack.
  PeekedBatch Peek(const BatchLimits& limits, v1::ReportProgressRequest* request);
  // The scheduler stored the batch Peek returned: drop it.
  void Ack(const PeekedBatch& batch);

 private:
  std::deque<v1::MetricPoint> points_;
  std::deque<v1::LayerGradNorms> norms_;
  std::deque<v1::StepDiagnostics> diagnostics_;
  size_t in_flight_ = 0;  // points_[0, in_flight_) went out with the last Peek
  absl::Time oldest_ = absl::InfiniteFuture();  // when the oldest waiting item arrived
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_PROGRESS_BUFFER_H_
