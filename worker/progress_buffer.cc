#include "worker/progress_buffer.h"

#include <algorithm>
#include <cmath>

#include "normsweep/v1/worker_service.pb.h"
#include "proto/schema/api_limits.h"

namespace normsweep::worker {

namespace {

// The block's diagnostics with its non-finite values left out.
v1::LayerDiagnostics FiniteOnly(const v1::LayerDiagnostics& d) {
  v1::LayerDiagnostics out;
  out.set_layer(d.layer());
  if (d.has_max_attn_logit() && std::isfinite(d.max_attn_logit())) out.set_max_attn_logit(d.max_attn_logit());
  if (d.has_update_ratio_qkv() && std::isfinite(d.update_ratio_qkv())) out.set_update_ratio_qkv(d.update_ratio_qkv());
  if (d.has_update_ratio_proj() && std::isfinite(d.update_ratio_proj())) {
    out.set_update_ratio_proj(d.update_ratio_proj());
  }
  if (d.has_update_ratio_fc1() && std::isfinite(d.update_ratio_fc1())) out.set_update_ratio_fc1(d.update_ratio_fc1());
  if (d.has_update_ratio_fc2() && std::isfinite(d.update_ratio_fc2())) out.set_update_ratio_fc2(d.update_ratio_fc2());
  return out;
}

}  // namespace

BatchLimits BatchLimits::Api(int points) {
  return BatchLimits{std::min(points, schema::kMaxPointsPerReport), schema::kMaxPointsPerReport,
                     schema::kMaxDiagnosticStepsPerReport, schema::kMaxDiagnosticLayersPerReport};
}

void ProgressBuffer::Add(const v1::TrainEvent& event, absl::Time now) {
  const bool was_empty = empty();
  if (event.type() == "step") {
    v1::MetricPoint p;
    p.set_step(event.step());
    if (event.has_train_loss()) p.set_train_loss(event.train_loss());
    if (event.has_lr()) p.set_lr(event.lr());
    if (event.has_grad_norm()) p.set_grad_norm(event.grad_norm());
    if (event.has_tokens_per_s()) p.set_tokens_per_s(event.tokens_per_s());
    if (event.has_z_term() && std::isfinite(event.z_term())) p.set_z_term(event.z_term());
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
    if (event.has_output_log_z() && std::isfinite(event.output_log_z())) p->set_output_log_z(event.output_log_z());
    if (!event.layer_diagnostics().empty()) {
      v1::StepDiagnostics& d = diagnostics_.emplace_back();
      d.set_step(event.step());
      for (const v1::LayerDiagnostics& l : event.layer_diagnostics()) *d.add_layers() = FiniteOnly(l);
    }
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

PeekedBatch ProgressBuffer::Peek(const BatchLimits& limits, v1::ReportProgressRequest* request) {
  PeekedBatch batch;
  batch.points = std::min(limits.points, pending_points());
  in_flight_ = batch.points;
  for (int i = 0; i < batch.points; ++i) *request->add_points() = points_[i];
  int entries = 0;
  for (const v1::LayerGradNorms& g : norms_) {
    entries += g.norms_size();
    if (batch.norms > 0 && entries > limits.norms) break;
    *request->add_layer_grad_norms() = g;
    ++batch.norms;
  }
  entries = 0;
  for (const v1::StepDiagnostics& d : diagnostics_) {
    entries += d.layers_size();
    if (batch.diagnostics > 0 && (batch.diagnostics >= limits.diagnostic_steps || entries > limits.diagnostic_layers)) {
      break;
    }
    *request->add_diagnostics() = d;
    ++batch.diagnostics;
  }
  return batch;
}

void ProgressBuffer::Ack(const PeekedBatch& batch) {
  const int points = std::min(batch.points, pending_points());
  points_.erase(points_.begin(), points_.begin() + points);
  in_flight_ = 0;
  norms_.erase(norms_.begin(), norms_.begin() + std::min<size_t>(batch.norms, norms_.size()));
  diagnostics_.erase(diagnostics_.begin(),
                     diagnostics_.begin() + std::min<size_t>(batch.diagnostics, diagnostics_.size()));
  // Whatever is left has waited since before the batch went out: send it
  // with the next flush rather than restarting its timer.
  if (empty()) oldest_ = absl::InfiniteFuture();
}

}  // namespace normsweep::worker
