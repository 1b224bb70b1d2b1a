#include "worker/progress_buffer.h"

#include <algorithm>

#include "normsweep/v1/worker_service.pb.h"

namespace normsweep::worker {

void ProgressBuffer::Add(const v1::TrainEvent& event, absl::Time now) {
  const bool was_empty = empty();
  if (event.type() == "step") {
    v1::MetricPoint p;
    p.set_step(event.step());
    if (event.has_train_loss()) p.set_train_loss(event.train_loss());
    if (event.has_lr()) p.set_lr(event.lr());
    if (event.has_grad_norm()) p.set_grad_norm(event.grad_norm());
    if (event.has_tokens_per_s()) p.set_tokens_per_s(event.tokens_per_s());
    points_.push_back(std::move(p));
  } else if (event.type() == "eval") {
    v1::MetricPoint* p = nullptr;
    if (points_.size() > in_flight_ && points_.back().step() == event.step() && !points_.back().has_val_loss()) {
      p = &points_.back();
    } else {
      points_.emplace_back();
      p = &points_.back();
      p->set_step(event.step());
    }
    if (event.has_val_loss()) p->set_val_loss(event.val_loss());
    if (event.has_val_accuracy()) p->set_val_accuracy(event.val_accuracy());
  } else if (event.type() == "grad_norms") {
    v1::LayerGradNorms g;
    g.set_step(event.step());
    *g.mutable_norms() = event.layer_grad_norms();
    norms_.push_back(std::move(g));
  } else {
    return;
  }
  if (was_empty) oldest_ = now;
}

bool ProgressBuffer::ShouldFlush(absl::Time now, absl::Duration flush_interval, int flush_points) const {
  if (empty()) return false;
  return pending_points() >= flush_points || now - oldest_ >= flush_interval;
}

int ProgressBuffer::Peek(int max_points, v1::ReportProgressRequest* request) {
  const int n = std::min(max_points, pending_points());
  in_flight_ = n;
  for (int i = 0; i < n; ++i) *request->add_points() = points_[i];
  for (const v1::LayerGradNorms& g : norms_) *request->add_layer_grad_norms() = g;
  return n;
}

void ProgressBuffer::Ack(int points, int norms) {
  points = std::min(points, pending_points());
  points_.erase(points_.begin(), points_.begin() + points);
  in_flight_ = 0;
  norms = std::min<int>(norms, norms_.size());
  norms_.erase(norms_.begin(), norms_.begin() + norms);
  // Whatever is left has waited since before the batch went out: send it
  // with the next flush rather than restarting its timer.
  if (empty()) oldest_ = absl::InfiniteFuture();
}

}  // namespace normsweep::worker
