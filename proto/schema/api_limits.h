// The API's limits, as the protos document them: the scheduler enforces them
// (INVALID_ARGUMENT naming the field), the store relies on them, and the
// worker keeps what it sends inside them. One definition each.
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
inline constexpr int kMaxPriority = 1000;         // SweepSpec.priority in [-kMaxPriority, kMaxPriority]

// ---- requests ----
inline constexpr int kMaxPageSizeSweeps = 1000;
inline constexpr int kMaxPageSizeTrials = 10000;
inline constexpr int kMaxPointsPerReport = 10000;  // ReportProgressRequest points, and layer norms
inline constexpr int kMaxDiagnosticStepsPerReport = 10000;   // ReportProgressRequest.diagnostics
inline constexpr int kMaxDiagnosticLayersPerReport = 10000;  // LayerDiagnostics over all of them
// Layer indexes in progress (LayerGradNorm.layer, LayerDiagnostics.layer) are
// below this: the bound of TrainConfig.layers (the trainer's kMaxLayers,
// trainer/config.h). The trial's own layer count is not at hand where
// progress is checked.
inline constexpr int kMaxLayers = 256;
inline constexpr int kMaxLeasesPerHeartbeat = 1024;
inline constexpr int kMaxDevicesPerWorker = 64;

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_API_LIMITS_H_
