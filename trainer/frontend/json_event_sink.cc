#include "trainer/frontend/json_event_sink.h"

#include "proto/schema/train_config.h"

namespace normsweep::trainer {

v1::TrainEvent ToProto(const StepEvent& e) {
  v1::TrainEvent p;
  p.set_type("step");
  p.set_step(e.step);
  p.set_elapsed_s(e.elapsed_s);
  p.set_train_loss(e.train_loss);
  if (e.z_term) p.set_z_term(*e.z_term);
  p.set_lr(e.lr);
  p.set_grad_norm(e.grad_norm);
  p.set_tokens_per_s(e.tokens_per_s);
  return p;
}

v1::TrainEvent ToProto(const EvalEvent& e) {
  v1::TrainEvent p;
  p.set_type("eval");
  p.set_step(e.step);
  p.set_elapsed_s(e.elapsed_s);
  p.set_val_loss(e.val_loss);
  if (e.val_accuracy) p.set_val_accuracy(*e.val_accuracy);
  if (e.output_log_z) p.set_output_log_z(*e.output_log_z);
  for (const LayerDiagnosticsValue& l : e.layers) {
    v1::LayerDiagnostics* d = p.add_layer_diagnostics();
    d->set_layer(l.layer);
    if (l.max_attn_logit) d->set_max_attn_logit(*l.max_attn_logit);
    if (l.update_ratio_qkv) d->set_update_ratio_qkv(*l.update_ratio_qkv);
    if (l.update_ratio_proj) d->set_update_ratio_proj(*l.update_ratio_proj);
    if (l.update_ratio_fc1) d->set_update_ratio_fc1(*l.update_ratio_fc1);
    if (l.update_ratio_fc2) d->set_update_ratio_fc2(*l.update_ratio_fc2);
  }
  return p;
}

v1::TrainEvent ToProto(const GradNormsEvent& e) {
  v1::TrainEvent p;
  p.set_type("grad_norms");
  p.set_step(e.step);
  p.set_elapsed_s(e.elapsed_s);
  for (const LayerGradNormValue& n : e.norms) {
    v1::LayerGradNorm* g = p.add_layer_grad_norms();
    g->set_layer(n.layer);
    g->set_matrix(n.matrix);
    g->set_norm(n.norm);
  }
  return p;
}

v1::TrainEvent ToProto(const FinalEvent& e) {
  v1::TrainEvent p;
  p.set_type("final");
  p.set_step(e.step);
  p.set_elapsed_s(e.elapsed_s);
  p.set_outcome(OutcomeName(e.outcome));
  p.set_error(e.error);
  if (e.final_train_loss) p.set_final_train_loss(*e.final_train_loss);
  if (e.final_val_loss) p.set_final_val_loss(*e.final_val_loss);
  if (e.best_val_loss) p.set_best_val_loss(*e.best_val_loss);
  if (e.final_val_accuracy) p.set_final_val_accuracy(*e.final_val_accuracy);
  if (e.diverged_step) p.set_diverged_step(*e.diverged_step);
  if (e.init_val_loss) p.set_init_val_loss(*e.init_val_loss);
  if (e.unigram_loss) p.set_unigram_loss(*e.unigram_loss);
  if (e.val_loss_progress) p.set_val_loss_progress(*e.val_loss_progress);
  p.set_mean_tokens_per_s(e.mean_tokens_per_s);
  p.set_backend(e.backend);
  p.set_precision(e.precision);
  p.set_kernels(e.kernels);
  p.set_parameters(static_cast<int32_t>(e.parameters));
  return p;
}

void JsonLinesEventSink::Write(const v1::TrainEvent& event) {
  std::string line;
  if (fused_index_ >= 0) {
    v1::TrainEvent e = event;
    e.set_fused_index(fused_index_);
    line = schema::TrainEventToJson(e);
  } else {
    line = schema::TrainEventToJson(event);
  }
  line += '\n';
  // One write per line: the sinks of a fused run's trials share the stream
  // from several threads.
  std::fwrite(line.data(), 1, line.size(), out_);
  std::fflush(out_);
}

}  // namespace normsweep::trainer
