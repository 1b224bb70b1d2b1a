// Resolved trainer settings: TrainConfig (proto/normsweep/v1/train.proto) with
// every default applied. The trainer core takes these plain structs so that it
// does not depend on protobuf; proto/schema/train_config.h converts.
#ifndef NORMSWEEP_TRAINER_CONFIG_H_
#define NORMSWEEP_TRAINER_CONFIG_H_

#include <cstdint>
#include <string>

#include "trainer/status.h"

namespace normsweep::trainer {

enum class Placement { kPostLN, kPreLN };
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

struct ModelConfig {
  Placement placement = Placement::kPostLN;
  int layers = 6;
  int d_model = 128;
  int heads = 4;
  int d_ff = kFfnPerDModel * d_model;  // from d_model as initialised: set d_ff too when assigning d_model later
  int seq_len = 64;
  float dropout = 0.0f;
  Positions positions = Positions::kSinusoidal;

  int head_dim() const { return d_model / heads; }
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

// Names used in configs, events and checkpoint metadata.
const char* PlacementName(Placement p);       // "post" / "pre"
const char* PositionsName(Positions p);       // "sinusoidal" / "learned"
const char* OptimizerName(OptimizerKind k);   // "adam" / "adamw" / "sgd" / "radam"
const char* ScheduleName(ScheduleKind k);     // "constant" / ...
const char* PrecisionName(Precision p);       // "fp32" / "tf32" / "bf16"
StatusOr<Placement> ParsePlacement(const std::string& s);
StatusOr<Positions> ParsePositions(const std::string& s);
StatusOr<OptimizerKind> ParseOptimizer(const std::string& s);
StatusOr<ScheduleKind> ParseSchedule(const std::string& s);
StatusOr<Precision> ParsePrecision(const std::string& s);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_CONFIG_H_
