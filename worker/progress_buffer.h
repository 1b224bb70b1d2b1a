// One trial's progress not yet acknowledged by the scheduler: metric points
// and per-layer gradient norms, turned from the trainer's events and sent in
// batches. A batch stays in the buffer until the scheduler acknowledges it
// (Peek, then Ack), so a failed call re-sends exactly what it lost and an
// acknowledged point is never sent again.
//
// Not thread-safe: the Worker guards each buffer with its mutex.
#ifndef NORMSWEEP_WORKER_PROGRESS_BUFFER_H_
#define NORMSWEEP_WORKER_PROGRESS_BUFFER_H_

#include <deque>
#include <vector>

#include "absl/time/time.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"
#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::worker {

class ProgressBuffer {
 public:
  // Step: train_loss, lr, grad_norm, tokens_per_s at its step. Eval:
  // val_loss, val_accuracy (merged into the step's point while that is
  // still waiting). grad_norms: one LayerGradNorms at the event's step.
  // Other events carry no progress. `now` starts the flush timer.
  void Add(const v1::TrainEvent& event, absl::Time now);

  bool empty() const { return points_.empty() && norms_.empty(); }
  int pending_points() const { return static_cast<int>(points_.size()); }

  // Time to send: flush_points or more are waiting, or the oldest unsent
  // item has waited flush_interval.
  bool ShouldFlush(absl::Time now, absl::Duration flush_interval, int flush_points) const;

  // The next batch (at most max_points points, and all waiting grad norms)
  // into request; returns how many points it holds. Nothing is removed,
  // but those points are frozen (an eval no longer merges into them) until
  // the next Peek or Ack.
  int Peek(int max_points, v1::ReportProgressRequest* request);
  // The scheduler stored the batch Peek returned (points, and the grad
  // norms Peek included): drop them.
  void Ack(int points, int norms);

 private:
  std::deque<v1::MetricPoint> points_;
  std::vector<v1::LayerGradNorms> norms_;
  size_t in_flight_ = 0;  // points_[0, in_flight_) went out with the last Peek
  absl::Time oldest_ = absl::InfiniteFuture();  // when the oldest waiting item arrived
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_PROGRESS_BUFFER_H_
