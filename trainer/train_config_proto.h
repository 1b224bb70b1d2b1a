// Conversion between the schema (normsweep.v1.TrainConfig, protobuf) and the
// trainer core's plain settings, plus the JSON I/O that normsweep-train, the
// scheduler and the worker share. This is the only trainer library that
// depends on protobuf and Abseil.
#ifndef NORMSWEEP_TRAINER_TRAIN_CONFIG_PROTO_H_
#define NORMSWEEP_TRAINER_TRAIN_CONFIG_PROTO_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "normsweep/v1/train.pb.h"
#include "trainer/config.h"
#include "trainer/status.h"

namespace normsweep::trainer {

// The trainer core's Status as an absl::Status (same code, same message).
absl::Status ToAbslStatus(const Status& status);

// Applies defaults and validates; INVALID_ARGUMENT names the field.
absl::StatusOr<TrainSettings> SettingsFromProto(const v1::TrainConfig& config);

// Validation only (what the scheduler checks before storing a sweep).
absl::Status ValidateTrainConfig(const v1::TrainConfig& config);

// The config with every default filled in, as the trainer will run it.
absl::StatusOr<v1::TrainConfig> ResolvedTrainConfig(const v1::TrainConfig& config);

// Protobuf JSON (snake_case names). Parsing rejects unknown fields.
absl::StatusOr<v1::TrainConfig> TrainConfigFromJson(const std::string& json);
std::string TrainConfigToJson(const v1::TrainConfig& config);
std::string TrainEventToJson(const v1::TrainEvent& event);  // one line, no newline
absl::StatusOr<v1::TrainEvent> TrainEventFromJson(const std::string& line);

}  // namespace normsweep::trainer

#endif  // NORMSWEEP_TRAINER_TRAIN_CONFIG_PROTO_H_
