// Resolved trainer settings: TrainConfig (proto/normsweep/v1/train.proto) with
// every default applied. The trainer core takes these plain structs so that it
// does not depend on protobuf; proto/schema/train_config.h converts.
#ifndef NORMSWEEP_TRAINER_SETTINGS_CONFIG_H_
#define NORMSWEEP_TRAINER_SETTINGS_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "trainer/settings/status.h"

namespace normsweep::trainer {

// Where the normalisation sits (proto/normsweep/v1/train.proto, TrainConfig.placement).
// kMix is resolved per block by BlockPlacement: Post-LN, then Pre-LN.
enum class Placement { kPostLN, kPreLN, kPeriLN, kDeepNorm, kMix };
// Every normalisation of the model: LayerNorm or RMSNorm (weight only).
enum class NormKind { kLayerNorm, kRmsNorm };
enum class Positions { kSinusoidal, kLearned };
enum class OptimizerKind { kAdam, kAdamW, kSgd, kRAdam };
enum class ScheduleKind { kConstant, kInverseSqrt, kLinear, kCosine };
// Arithmetic of the matrix products: fp32 everywhere (the default, and all
// the CPU backend does), or on the GPU's tensor cores with inputs rounded to
// TF32 or bf16 and fp32 accumulation; weights, optimizer state and every
// other op stay fp32.
enum class Precision { kFp32, kTf32, kBf16 };

inline constexpr int kVocabSize = 256;  // byte-level

// d_ff when not given: kFfnPerDModel * d_model, as in the paper's model.
inline constexpr int kFfnPerDModel = 4;
// The default divergence threshold, 1.5 * ln(256): a loss this far above a
// uniform guess over the bytes is not training. The report's curves are
// capped here (client/report/figures.h).
inline constexpr double kDefaultDivergenceLoss = 8.317766166719343;
// Mix-LN's alpha (Li et al. 2024): the share of blocks, from the first, that are Post-LN.
inline constexpr double kDefaultMixPostFraction = 0.25;

struct ModelConfig {
  Placement placement = Placement::kPostLN;
  int layers = 6;
  int d_model = 128;
  int heads = 4;
  int d_ff = kFfnPerDModel * d_model;  // from d_model as initialised: set d_ff too when assigning d_model later
  int seq_len = 64;
  float dropout = 0.0f;
  Positions positions = Positions::kSinusoidal;
  double mix_post_fraction = kDefaultMixPostFraction;  // kMix only
  bool qk_norm = false;  // normalise q and k over the head dimension, per head
  NormKind norm = NormKind::kLayerNorm;

  int head_dim() const { return d_model / heads; }
  // How block `layer` is built: kPostLN, kPreLN, kPeriLN or kDeepNorm (a
  // kMix model's first floor(mix_post_fraction * layers) blocks are Post-LN,
  // the rest Pre-LN).
  Placement BlockPlacement(int layer) const;
  // Whether a final norm ln_f sits before the head: when the last block is
  // Pre-LN or Peri-LN.
  bool HasFinalNorm() const;
  // Whether ln_emb normalises the embedding (Peri-LN).
  bool HasEmbeddingNorm() const;
  // DeepNorm's residual scale alpha = (2N)^(1/4) and init gain beta =
  // (8N)^(-1/4), N = layers (Wang et al. 2022, decoder-only); 1 otherwise.
  double ResidualAlpha() const;
  double DeepNormBeta() const;
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdam;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-8;
  double weight_decay = 0.0;
  double momentum = 0.0;
  double grad_clip = 0.0;  // 0 = off
};

struct ScheduleConfig {
  double peak_lr = 0.0;
  int warmup_steps = 0;
  ScheduleKind kind = ScheduleKind::kConstant;
  int total_steps = 1000;
};

struct DataConfig {
  std::string task = "translate";  // used when data_file is empty
  std::string data_file;
};

struct TrainSettings {
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  DataConfig data;
  int batch_size = 32;
  int steps = 1000;
  int eval_every = 100;
  int eval_batches = 8;
  uint64_t seed = 0;
  double divergence_loss = kDefaultDivergenceLoss;
  int divergence_patience = 50;
  int threads = 1;
  std::string device = "cpu";
  Precision precision = Precision::kFp32;
  int checkpoint_every = 0;
  // Coefficient of the auxiliary z-loss, z_loss * mean (log Z)^2, added to
  // the training loss (Wortsman et al. 2023); 0 = off.
  double z_loss = 0.0;
};

// Limits that keep a single run sane on one machine. kMaxLayers is also the
// API's bound on layer indexes in progress (proto/schema/api_limits.h).
inline constexpr int kMaxLayers = 256;
inline constexpr int kMaxDModel = 16384;
inline constexpr int kMaxSeqLen = 1 << 16;
inline constexpr int kMaxBatchSize = 1 << 16;

// Checks every field; the message names the offending field (TrainConfig's
// snake_case name) and the allowed values.
Status ValidateModelConfig(const ModelConfig& model);
Status ValidateTrainSettings(const TrainSettings& settings);

// Settings that ValidateTrainSettings accepted. Only Check makes one, so a
// function that takes one (RunTraining) does not check again: a process
// validates its settings once, at its entry (normsweep-train as it parses
// its configs, through schema::SettingsFromProto).
class ValidTrainSettings {
 public:
  static StatusOr<ValidTrainSettings> Check(TrainSettings settings) {
    TRAINER_RETURN_IF_ERROR(ValidateTrainSettings(settings));
    return ValidTrainSettings(std::move(settings));
  }
  const TrainSettings& get() const { return settings_; }
  const TrainSettings* operator->() const { return &settings_; }

 private:
  explicit ValidTrainSettings(TrainSettings settings) : settings_(std::move(settings)) {}
  TrainSettings settings_;
};

// Names used in configs, events and checkpoint metadata.
const char* PlacementName(Placement p);       // the canonical name (trainer/settings/schemes.h)
const char* NormName(NormKind k);             // "layernorm" / "rmsnorm"
const char* PositionsName(Positions p);       // "sinusoidal" / "learned"
const char* OptimizerName(OptimizerKind k);   // "adam" / "adamw" / "sgd" / "radam"
const char* ScheduleName(ScheduleKind k);     // "constant" / ...
const char* PrecisionName(Precision p);       // "fp32" / "tf32" / "bf16"

// Fused trials (HFTA): what the trials of one fused run must share, by name,
// as text: every setting except the schedule (peak lr, warm-up, kind), the
// seed, the optimizer's coefficients (beta1, beta2, eps, weight decay,
// momentum), grad clip, z_loss and the divergence settings. The one
// definition of "fusable": the trainer's CheckFusable compares these, and
// the scheduler's schema::FusionKey is these less threads and device.
std::vector<std::pair<const char*, std::string>> FusionSettings(const TrainSettings& s);
StatusOr<Placement> ParsePlacement(const std::string& s);  // canonical names, aliases and spellings
StatusOr<NormKind> ParseNorm(const std::string& s);
StatusOr<Positions> ParsePositions(const std::string& s);
StatusOr<OptimizerKind> ParseOptimizer(const std::string& s);
StatusOr<ScheduleKind> ParseSchedule(const std::string& s);
StatusOr<Precision> ParsePrecision(const std::string& s);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_SETTINGS_CONFIG_H_
