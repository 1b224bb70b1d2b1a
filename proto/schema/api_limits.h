// The API's limits and defaults, as the protos document them: the scheduler
// enforces them (INVALID_ARGUMENT naming the field), the store relies on
// them, and the worker and the CLI keep what they send inside them. One
// definition each.
#ifndef NORMSWEEP_PROTO_SCHEMA_API_LIMITS_H_
#define NORMSWEEP_PROTO_SCHEMA_API_LIMITS_H_

namespace normsweep::schema {

// ---- strings (characters = bytes) ----
inline constexpr int kMaxNameLength = 200;          // SweepSpec.name, RegisterWorkerRequest.name
inline constexpr int kMaxRequestIdLength = 128;     // SubmitSweepRequest.request_id
inline constexpr int kMaxStringFieldLength = 1024;  // base config strings, extra-axis values
inline constexpr int kMaxPlacementLength = 64;      // SweepSpec.placements values
inline constexpr int kMaxErrorLength = 4096;        // TrialResult.error
inline constexpr int kMaxHostnameLength = 255;      // RegisterWorkerRequest.hostname
inline constexpr int kMaxDeviceLength = 64;         // RegisterWorkerRequest.devices values
inline constexpr int kMaxMatrixNameLength = 64;     // LayerGradNorm.matrix

// ---- sweeps ----
inline constexpr int kMaxTrialsPerSweep = 10000;  // the grid's size (random_search.samples too)
inline constexpr int kMaxAxisValues = 1000;       // values per axis
inline constexpr int kDefaultMaxAttempts = 3;     // SweepSpec.max_attempts 0
inline constexpr int kMaxMaxAttempts = 100;
inline constexpr int kDefaultMaxInterruptions = 20;  // SweepSpec.max_interruptions 0
inline constexpr int kMaxMaxInterruptions = 1000;
inline constexpr int kMaxPriority = 1000;         // SweepSpec.priority in [-kMaxPriority, kMaxPriority]

// ---- requests ----
inline constexpr int kMaxPageSizeSweeps = 1000;
inline constexpr int kMaxPageSizeTrials = 10000;
inline constexpr int kMaxPointsPerReport = 10000;  // ReportProgressRequest points, and layer norms
inline constexpr int kMaxDiagnosticStepsPerReport = 10000;   // ReportProgressRequest.diagnostics
inline constexpr int kMaxDiagnosticLayersPerReport = 10000;  // LayerDiagnostics over all of them
// Layer indexes in progress (LayerGradNorm.layer, LayerDiagnostics.layer) are
// below trainer::kMaxLayers (trainer/settings/config.h), the bound of
// TrainConfig.layers: the trial's own layer count is not at hand where
// progress is checked.
inline constexpr int kMaxLeasesPerHeartbeat = 1024;
inline constexpr int kMaxDevicesPerWorker = 64;
// LeaseTrialRequest.max_trials: trials one fused trainer process may train.
inline constexpr int kMaxFusedTrials = 64;

// ---- analysis ----
// "Near the best" (GetSweepAnalysisRequest.near_best_tolerance 0): a grid
// cell whose mean final validation loss is at most (1 + this) times the best
// cell of its variant. The scheduler applies it as the request's default, the
// report asks for it and says it. Its SQL twin, which C++ cannot reach, is
// the placement_sensitivity view's `placement_sensitivity_at(0.05)`
// (db/views/25_placement_sensitivity.sql); tests/db/near_best_tolerance_test.cc
// holds the two together.
inline constexpr double kDefaultNearBestTolerance = 0.05;

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_API_LIMITS_H_
