#include "trainer/settings/config.h"

#include <cmath>
#include <cstdio>
#include <type_traits>
#include <string>

#include "common/quote.h"
#include "trainer/settings/schemes.h"

namespace normsweep::trainer {
namespace {

Status FieldError(const char* field, const std::string& what) {
  return InvalidArgument(std::string(field) + ": " + what);
}

Status CheckRange(const char* field, long long value, long long lo, long long hi) {
  if (value < lo || value > hi) {
    return FieldError(field, "must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                 ", got " + std::to_string(value));
  }
  return OkStatus();
}

Status CheckFinite(const char* field, double value) {
  if (!std::isfinite(value)) return FieldError(field, "must be a finite number");
  return OkStatus();
}

}  // namespace

const char* PlacementName(Placement p) { return SchemeOf(p).name; }
const char* NormName(NormKind k) { return k == NormKind::kRmsNorm ? "rmsnorm" : "layernorm"; }

Placement ModelConfig::BlockPlacement(int layer) const {
  if (!SchemeOf(placement).per_block) return placement;
  const int post_blocks = static_cast<int>(std::floor(mix_post_fraction * layers));
  return layer < post_blocks ? Placement::kPostLN : Placement::kPreLN;
}

bool ModelConfig::HasFinalNorm() const {
  if (layers < 1) return false;
  return SchemeOf(BlockPlacement(layers - 1)).final_norm;
}

bool ModelConfig::HasEmbeddingNorm() const { return SchemeOf(placement).embedding_norm; }

double ModelConfig::ResidualAlpha() const {
  return SchemeOf(placement).deepnorm_residual ? std::pow(2.0 * layers, 0.25) : 1.0;
}

double ModelConfig::DeepNormBeta() const {
  return SchemeOf(placement).deepnorm_residual ? std::pow(8.0 * layers, -0.25) : 1.0;
}
const char* PositionsName(Positions p) { return p == Positions::kLearned ? "learned" : "sinusoidal"; }
const char* OptimizerName(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kAdam: return "adam";
    case OptimizerKind::kAdamW: return "adamw";
    case OptimizerKind::kSgd: return "sgd";
    case OptimizerKind::kRAdam: return "radam";
  }
  return "?";
}
const char* ScheduleName(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kConstant: return "constant";
    case ScheduleKind::kInverseSqrt: return "inverse_sqrt";
    case ScheduleKind::kLinear: return "linear";
    case ScheduleKind::kCosine: return "cosine";
  }
  return "?";
}

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kFp32: return "fp32";
    case Precision::kTf32: return "tf32";
    case Precision::kBf16: return "bf16";
  }
  return "?";
}

StatusOr<Precision> ParsePrecision(const std::string& s) {
  if (s == "fp32") return Precision::kFp32;
  if (s == "tf32") return Precision::kTf32;
  if (s == "bf16") return Precision::kBf16;
  return FieldError("precision", "unknown precision " + normsweep::QuoteForError(s) + " (expected fp32, tf32 or bf16)");
}

StatusOr<Placement> ParsePlacement(const std::string& s) {
  if (const SchemeInfo* scheme = FindScheme(s)) return scheme->placement;
  return FieldError("placement",
                    "unknown placement " + normsweep::QuoteForError(s) + " (expected " + SchemeNames() + ")");
}
StatusOr<NormKind> ParseNorm(const std::string& s) {
  if (s == "layernorm") return NormKind::kLayerNorm;
  if (s == "rmsnorm") return NormKind::kRmsNorm;
  return FieldError("norm", "unknown norm " + normsweep::QuoteForError(s) + " (expected layernorm or rmsnorm)");
}
StatusOr<Positions> ParsePositions(const std::string& s) {
  if (s == "sinusoidal") return Positions::kSinusoidal;
  if (s == "learned") return Positions::kLearned;
  return FieldError("positions", "unknown positions " + normsweep::QuoteForError(s) + " (expected sinusoidal or learned)");
}
StatusOr<OptimizerKind> ParseOptimizer(const std::string& s) {
  if (s == "adam") return OptimizerKind::kAdam;
  if (s == "adamw") return OptimizerKind::kAdamW;
  if (s == "sgd") return OptimizerKind::kSgd;
  if (s == "radam") return OptimizerKind::kRAdam;
  return FieldError("optimizer",
                    "unknown optimizer " + normsweep::QuoteForError(s) + " (expected adam, adamw, radam or sgd)");
}
StatusOr<ScheduleKind> ParseSchedule(const std::string& s) {
  if (s == "constant") return ScheduleKind::kConstant;
  if (s == "inverse_sqrt") return ScheduleKind::kInverseSqrt;
  if (s == "linear") return ScheduleKind::kLinear;
  if (s == "cosine") return ScheduleKind::kCosine;
  return FieldError("schedule",
                    "unknown schedule " + normsweep::QuoteForError(s) + " (expected constant, inverse_sqrt, linear or cosine)");
}

Status ValidateModelConfig(const ModelConfig& m) {
  TRAINER_RETURN_IF_ERROR(CheckRange("layers", m.layers, 1, kMaxLayers));
  TRAINER_RETURN_IF_ERROR(CheckRange("d_model", m.d_model, 1, kMaxDModel));
  TRAINER_RETURN_IF_ERROR(CheckRange("heads", m.heads, 1, m.d_model));
  if (m.d_model % m.heads != 0) {
    return FieldError("heads", "must divide d_model (" + std::to_string(m.d_model) + "), got " +
                                   std::to_string(m.heads));
  }
  TRAINER_RETURN_IF_ERROR(CheckRange("d_ff", m.d_ff, 1, 8 * kMaxDModel));
  TRAINER_RETURN_IF_ERROR(CheckRange("seq_len", m.seq_len, 1, kMaxSeqLen));
  if (!(m.dropout >= 0.0f && m.dropout < 1.0f)) return FieldError("dropout", "must be in [0, 1)");
  TRAINER_RETURN_IF_ERROR(CheckFinite("mix_post_fraction", m.mix_post_fraction));
  if (!(m.mix_post_fraction >= 0.0 && m.mix_post_fraction <= 1.0)) {
    return FieldError("mix_post_fraction", "must be in [0, 1], got " + std::to_string(m.mix_post_fraction));
  }
  return OkStatus();
}

Status ValidateTrainSettings(const TrainSettings& s) {
  TRAINER_RETURN_IF_ERROR(ValidateModelConfig(s.model));
  TRAINER_RETURN_IF_ERROR(CheckRange("batch_size", s.batch_size, 1, kMaxBatchSize));
  TRAINER_RETURN_IF_ERROR(CheckRange("steps", s.steps, 1, 1 << 30));
  const ScheduleConfig& sc = s.schedule;
  TRAINER_RETURN_IF_ERROR(CheckFinite("lr", sc.peak_lr));
  if (!(sc.peak_lr > 0.0)) return FieldError("lr", "must be > 0");
  if (sc.peak_lr > 100.0) return FieldError("lr", "must be <= 100");
  if (sc.warmup_steps < 0) return FieldError("warmup_steps", "must be >= 0");
  const OptimizerConfig& o = s.optimizer;
  TRAINER_RETURN_IF_ERROR(CheckFinite("beta1", o.beta1));
  TRAINER_RETURN_IF_ERROR(CheckFinite("beta2", o.beta2));
  TRAINER_RETURN_IF_ERROR(CheckFinite("eps", o.eps));
  TRAINER_RETURN_IF_ERROR(CheckFinite("weight_decay", o.weight_decay));
  TRAINER_RETURN_IF_ERROR(CheckFinite("momentum", o.momentum));
  TRAINER_RETURN_IF_ERROR(CheckFinite("grad_clip", o.grad_clip));
  if (!(o.beta1 >= 0.0 && o.beta1 < 1.0)) return FieldError("beta1", "must be in [0, 1)");
  if (!(o.beta2 >= 0.0 && o.beta2 < 1.0)) return FieldError("beta2", "must be in [0, 1)");
  if (!(o.eps > 0.0)) return FieldError("eps", "must be > 0");
  if (o.weight_decay < 0.0) return FieldError("weight_decay", "must be >= 0");
  if (!(o.momentum >= 0.0 && o.momentum < 1.0)) return FieldError("momentum", "must be in [0, 1)");
  if (o.grad_clip < 0.0) return FieldError("grad_clip", "must be >= 0 (0 disables clipping)");
  if (s.data.data_file.empty() && s.data.task != "translate") {
    return FieldError("task", "unknown task " + normsweep::QuoteForError(s.data.task) + " (expected translate, or set data_file)");
  }
  if (s.eval_every < 0) return FieldError("eval_every", "must be >= 0");
  TRAINER_RETURN_IF_ERROR(CheckRange("eval_batches", s.eval_batches, 1, 1 << 20));
  TRAINER_RETURN_IF_ERROR(CheckFinite("divergence_loss", s.divergence_loss));
  if (!(s.divergence_loss > 0.0)) return FieldError("divergence_loss", "must be > 0");
  TRAINER_RETURN_IF_ERROR(CheckRange("divergence_patience", s.divergence_patience, 1, 1 << 30));
  TRAINER_RETURN_IF_ERROR(CheckRange("threads", s.threads, 1, 1024));
  if (s.checkpoint_every < 0) return FieldError("checkpoint_every", "must be >= 0");
  TRAINER_RETURN_IF_ERROR(CheckFinite("z_loss", s.z_loss));
  if (!(s.z_loss >= 0.0)) return FieldError("z_loss", "must be >= 0 (0 turns the z-loss off)");
  if (s.device != "cpu" && s.device.rfind("cuda", 0) != 0) {
    return FieldError("device", "unknown device " + normsweep::QuoteForError(s.device) + " (expected cpu or cuda:N)");
  }
  if (s.device == "cpu" && s.precision != Precision::kFp32) {
    return FieldError("precision", std::string(PrecisionName(s.precision)) +
                                       " needs a CUDA device (device cuda:N); the cpu backend computes in fp32");
  }
  return OkStatus();
}

}  // namespace normsweep::trainer

namespace normsweep::trainer {

std::vector<std::pair<const char*, std::string>> FusionSettings(const TrainSettings& s) {
  const ModelConfig& m = s.model;
  auto str = [](auto v) {
    if constexpr (std::is_floating_point_v<decltype(v)>) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(v));
      return std::string(buf);
    } else {
      return std::to_string(v);
    }
  };
  return {
      {"placement", PlacementName(m.placement)},
      {"mix_post_fraction", SchemeOf(m.placement).per_block ? str(m.mix_post_fraction) : ""},
      {"layers", str(m.layers)},
      {"d_model", str(m.d_model)},
      {"heads", str(m.heads)},
      {"d_ff", str(m.d_ff)},
      {"seq_len", str(m.seq_len)},
      {"dropout", str(m.dropout)},
      {"positions", PositionsName(m.positions)},
      {"qk_norm", m.qk_norm ? "on" : "off"},
      {"norm", NormName(m.norm)},
      {"optimizer", OptimizerName(s.optimizer.kind)},
      {"data_file", s.data.data_file},
      {"task", s.data.data_file.empty() ? s.data.task : ""},
      {"batch_size", str(s.batch_size)},
      {"steps", str(s.steps)},
      {"eval_every", str(s.eval_every)},
      {"eval_batches", str(s.eval_batches)},
      {"checkpoint_every", str(s.checkpoint_every)},
      {"precision", PrecisionName(s.precision)},
      {"threads", str(s.threads)},
      {"device", s.device},
  };
}

}  // namespace normsweep::trainer
