// The schema's TrainConfig rules, shared by normsweep-train, the scheduler,
// the worker and the CLI: conversion to the trainer core's plain settings
// (trainer/settings/config.h: defaults and validation in standard C++, no BLAS, no
// OpenMP), the resolved config, and the JSON forms of TrainConfig and
// TrainEvent (proto/schema/json.h).
#ifndef NORMSWEEP_PROTO_SCHEMA_TRAIN_CONFIG_H_
#define NORMSWEEP_PROTO_SCHEMA_TRAIN_CONFIG_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "normsweep/v1/train.pb.h"
#include "trainer/settings/config.h"
#include "trainer/settings/status.h"

namespace normsweep::schema {

// The trainer core's Status as an absl::Status (same code, same message).
absl::Status ToAbslStatus(const trainer::Status& status);

// Applies defaults and validates; INVALID_ARGUMENT names the field.
absl::StatusOr<trainer::ValidTrainSettings> SettingsFromProto(const v1::TrainConfig& config);

// Validation only (what the scheduler checks before storing a sweep).
absl::Status ValidateTrainConfig(const v1::TrainConfig& config);

// The config with every default filled in, as the trainer will run it.
absl::StatusOr<v1::TrainConfig> ResolvedTrainConfig(const v1::TrainConfig& config);

// Fused trials (HFTA, Wang et al. 2021): trials whose configs have the same
// key train in one fused trainer process. The key is the trainer's
// trainer::FusionSettings of the resolved settings (what fused trials must
// share: the model's shape, norm settings, optimizer kind, dropout, data,
// steps, evaluation, checkpoint and precision settings) without what the
// worker sets (threads, device); lr, warm-up, schedule, seed, the
// optimizer's coefficients, grad clip, z_loss and the divergence settings
// are free. INVALID_ARGUMENT as SettingsFromProto's.
absl::StatusOr<std::string> FusionKey(const v1::TrainConfig& config);
// Whether two configs train fused: FusionKey equal (false if either is invalid).
bool FusionCompatible(const v1::TrainConfig& a, const v1::TrainConfig& b);

// Protobuf JSON (snake_case names). Parsing rejects unknown fields.
absl::StatusOr<v1::TrainConfig> TrainConfigFromJson(const std::string& json);
std::string TrainConfigToJson(const v1::TrainConfig& config);
std::string TrainEventToJson(const v1::TrainEvent& event);  // one line, no newline
absl::StatusOr<v1::TrainEvent> TrainEventFromJson(const std::string& line);

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_TRAIN_CONFIG_H_
