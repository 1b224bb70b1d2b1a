#include "proto/schema/train_config.h"

#include "proto/schema/json.h"
#include "trainer/settings/schemes.h"

#include <string>
#include <string_view>

namespace normsweep::schema {

// The trainer core's plain settings, which this file converts to.
using trainer::Status;
using trainer::StatusOr;
using trainer::StatusCode;
using trainer::TrainSettings;
using trainer::ModelConfig;
using trainer::OptimizerConfig;
using trainer::ScheduleConfig;
using trainer::ParsePlacement;
using trainer::ParsePositions;
using trainer::ParseOptimizer;
using trainer::ParseSchedule;
using trainer::ParsePrecision;
using trainer::ParseNorm;
using trainer::NormName;
using trainer::PlacementName;
using trainer::PositionsName;
using trainer::OptimizerName;
using trainer::ScheduleName;
using trainer::PrecisionName;
using trainer::ValidateTrainSettings;

namespace {

absl::StatusCode ToAbslCode(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return absl::StatusCode::kOk;
    case StatusCode::kInvalidArgument: return absl::StatusCode::kInvalidArgument;
    case StatusCode::kNotFound: return absl::StatusCode::kNotFound;
    case StatusCode::kDataLoss: return absl::StatusCode::kDataLoss;
    case StatusCode::kInternal: return absl::StatusCode::kInternal;
    case StatusCode::kCancelled: return absl::StatusCode::kCancelled;
  }
  return absl::StatusCode::kUnknown;
}

template <typename T>
absl::StatusOr<T> Convert(StatusOr<T> v) {
  if (!v.ok()) return ToAbslStatus(v.status());
  return std::move(v.value());
}

}  // namespace

absl::Status ToAbslStatus(const Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(ToAbslCode(status.code()), status.message());
}

absl::StatusOr<trainer::ValidTrainSettings> SettingsFromProto(const v1::TrainConfig& c) {
  TrainSettings s;
  ModelConfig& m = s.model;
  if (!c.placement().empty()) {
    auto p = Convert(ParsePlacement(c.placement()));
    if (!p.ok()) return p.status();
    m.placement = *p;
  }
  if (c.layers() != 0) m.layers = c.layers();
  if (c.d_model() != 0) m.d_model = c.d_model();
  if (c.heads() != 0) m.heads = c.heads();
  m.d_ff = c.d_ff() != 0 ? c.d_ff() : trainer::kFfnPerDModel * m.d_model;
  if (c.seq_len() != 0) m.seq_len = c.seq_len();
  m.dropout = static_cast<float>(c.dropout());
  if (!c.positions().empty()) {
    auto p = Convert(ParsePositions(c.positions()));
    if (!p.ok()) return p.status();
    m.positions = *p;
  }
  if (c.has_mix_post_fraction()) m.mix_post_fraction = c.mix_post_fraction();
  m.qk_norm = c.qk_norm();
  if (!c.norm().empty()) {
    auto n = Convert(ParseNorm(c.norm()));
    if (!n.ok()) return n.status();
    m.norm = *n;
  }
  if (c.layers() < 0 || c.d_model() < 0 || c.heads() < 0 || c.d_ff() < 0 || c.seq_len() < 0) {
    // Negative values must not be mistaken for "unset": report the first one.
    const char* field = c.layers() < 0 ? "layers" : c.d_model() < 0 ? "d_model" : c.heads() < 0 ? "heads"
                        : c.d_ff() < 0 ? "d_ff" : "seq_len";
    return absl::InvalidArgumentError(std::string(field) + ": must be positive");
  }

  if (c.batch_size() != 0) s.batch_size = c.batch_size();
  if (c.steps() != 0) s.steps = c.steps();
  if (c.batch_size() < 0) return absl::InvalidArgumentError("batch_size: must be positive");
  if (c.steps() < 0) return absl::InvalidArgumentError("steps: must be positive");
  OptimizerConfig& o = s.optimizer;
  if (!c.optimizer().empty()) {
    auto k = Convert(ParseOptimizer(c.optimizer()));
    if (!k.ok()) return k.status();
    o.kind = *k;
  }
  if (c.has_beta1()) o.beta1 = c.beta1();
  if (c.has_beta2()) o.beta2 = c.beta2();
  if (c.has_eps()) o.eps = c.eps();
  o.weight_decay = c.weight_decay();
  o.momentum = c.momentum();
  o.grad_clip = c.grad_clip();
  ScheduleConfig& sc = s.schedule;
  sc.peak_lr = c.lr();
  sc.warmup_steps = c.warmup_steps();
  if (!c.schedule().empty()) {
    auto k = Convert(ParseSchedule(c.schedule()));
    if (!k.ok()) return k.status();
    sc.kind = *k;
  }
  sc.total_steps = s.steps;

  if (!c.task().empty()) s.data.task = c.task();
  s.data.data_file = c.data_file();
  if (c.eval_every() != 0) s.eval_every = c.eval_every();
  if (c.eval_every() < 0) return absl::InvalidArgumentError("eval_every: must be >= 0");
  if (c.eval_batches() != 0) s.eval_batches = c.eval_batches();
  if (c.seed() < 0) return absl::InvalidArgumentError("seed: must be >= 0");
  s.seed = static_cast<uint64_t>(c.seed());
  if (c.divergence_loss() != 0) s.divergence_loss = c.divergence_loss();
  if (c.divergence_patience() != 0) s.divergence_patience = c.divergence_patience();
  if (c.threads() != 0) s.threads = c.threads();
  if (!c.device().empty()) s.device = c.device();
  if (!c.precision().empty()) {
    auto p = Convert(ParsePrecision(c.precision()));
    if (!p.ok()) return p.status();
    s.precision = *p;
  }
  s.checkpoint_every = c.checkpoint_every();
  s.z_loss = c.z_loss();

  trainer::StatusOr<trainer::ValidTrainSettings> valid = trainer::ValidTrainSettings::Check(std::move(s));
  if (!valid.ok()) return ToAbslStatus(valid.status());
  return std::move(*valid);
}

absl::Status ValidateTrainConfig(const v1::TrainConfig& config) {
  return SettingsFromProto(config).status();
}

absl::StatusOr<v1::TrainConfig> ResolvedTrainConfig(const v1::TrainConfig& config) {
  absl::StatusOr<trainer::ValidTrainSettings> valid = SettingsFromProto(config);
  if (!valid.ok()) return valid.status();
  const TrainSettings* s = &valid->get();
  v1::TrainConfig c;
  c.set_placement(PlacementName(s->model.placement));
  c.set_layers(s->model.layers);
  c.set_d_model(s->model.d_model);
  c.set_heads(s->model.heads);
  c.set_d_ff(s->model.d_ff);
  c.set_seq_len(s->model.seq_len);
  c.set_dropout(s->model.dropout);
  c.set_positions(PositionsName(s->model.positions));
  if (trainer::SchemeOf(s->model.placement).per_block) c.set_mix_post_fraction(s->model.mix_post_fraction);
  c.set_qk_norm(s->model.qk_norm);
  c.set_norm(NormName(s->model.norm));
  c.set_z_loss(s->z_loss);
  c.set_batch_size(s->batch_size);
  c.set_steps(s->steps);
  c.set_optimizer(OptimizerName(s->optimizer.kind));
  c.set_lr(s->schedule.peak_lr);
  c.set_beta1(s->optimizer.beta1);
  c.set_beta2(s->optimizer.beta2);
  c.set_eps(s->optimizer.eps);
  c.set_weight_decay(s->optimizer.weight_decay);
  c.set_momentum(s->optimizer.momentum);
  c.set_grad_clip(s->optimizer.grad_clip);
  c.set_warmup_steps(s->schedule.warmup_steps);
  c.set_schedule(ScheduleName(s->schedule.kind));
  if (s->data.data_file.empty()) c.set_task(s->data.task);
  c.set_data_file(s->data.data_file);
  c.set_eval_every(s->eval_every);
  c.set_eval_batches(s->eval_batches);
  c.set_seed(static_cast<int32_t>(s->seed));
  c.set_divergence_loss(s->divergence_loss);
  c.set_divergence_patience(s->divergence_patience);
  c.set_threads(s->threads);
  c.set_device(s->device);
  c.set_precision(PrecisionName(s->precision));
  c.set_checkpoint_every(s->checkpoint_every);
  return c;
}

absl::StatusOr<std::string> FusionKey(const v1::TrainConfig& config) {
  absl::StatusOr<trainer::ValidTrainSettings> s = SettingsFromProto(config);
  if (!s.ok()) return s.status();
  // The trainer's own list of what fused trials share (trainer::CheckFusable
  // compares the same), less what the worker sets.
  std::string key;
  for (const auto& [name, value] : trainer::FusionSettings(s->get())) {
    if (std::string_view(name) == "threads" || std::string_view(name) == "device") continue;
    key.append(name).append("=").append(value).append("\n");
  }
  return key;
}

bool FusionCompatible(const v1::TrainConfig& a, const v1::TrainConfig& b) {
  absl::StatusOr<std::string> ka = FusionKey(a), kb = FusionKey(b);
  return ka.ok() && kb.ok() && *ka == *kb;
}

absl::StatusOr<v1::TrainConfig> TrainConfigFromJson(const std::string& json) {
  v1::TrainConfig config;
  if (absl::Status st = FromJson(json, UnknownFields::kReject, &config); !st.ok()) {
    return absl::InvalidArgumentError("config: " + std::string(st.message()));
  }
  return config;
}

std::string TrainConfigToJson(const v1::TrainConfig& config) { return ToJson(config); }
std::string TrainEventToJson(const v1::TrainEvent& event) { return ToJson(event); }

absl::StatusOr<v1::TrainEvent> TrainEventFromJson(const std::string& line) {
  v1::TrainEvent event;
  // Newer trainers may add fields.
  if (absl::Status st = FromJson(line, UnknownFields::kIgnore, &event); !st.ok()) {
    return absl::InvalidArgumentError("event: " + std::string(st.message()));
  }
  return event;
}

}  // namespace normsweep::schema
