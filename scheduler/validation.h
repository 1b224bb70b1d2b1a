// Every check the scheduler makes on a request before the store sees it,
// one function per request. Each error is INVALID_ARGUMENT naming the field
// ("points[2].step: must be >= 0"); the first one wins. A SubmitSweep's spec
// is parsed by sweep_spec.h, the API's limits are proto/schema/api_limits.h.
// Pure functions; no I/O.
#ifndef NORMSWEEP_SCHEDULER_VALIDATION_H_
#define NORMSWEEP_SCHEDULER_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/sweep_service.pb.h"
#include "normsweep/v1/worker_service.pb.h"
#include "scheduler/field_errors.h"
#include "scheduler/sweep_spec.h"

namespace normsweep::scheduler {

// An id the client must give: positive.
absl::Status CheckId(const std::string& field, int64_t id);

// A list request's page: its size (the default for 0) and its token's value
// (0 for none).
struct Page {
  int size = 0;
  int64_t token = 0;
};
absl::StatusOr<Page> ValidateListSweeps(const v1::ListSweepsRequest& request);
absl::StatusOr<Page> ValidateListTrials(const v1::ListTrialsRequest& request);

// request_id, then the spec (ValidSpec::Parse): the sweep to expand.
absl::StatusOr<ValidSpec> ValidateSubmitSweep(const v1::SubmitSweepRequest& request);

// The near-best tolerance to use (the request's, or the default for 0).
absl::StatusOr<double> ValidateGetSweepAnalysis(const v1::GetSweepAnalysisRequest& request);

absl::Status ValidateRegisterWorker(const v1::RegisterWorkerRequest& request);
// worker_id, and max_trials in [0, kMaxFusedTrials].
absl::Status ValidateLeaseTrial(const v1::LeaseTrialRequest& request);
absl::Status ValidateHeartbeat(const v1::HeartbeatRequest& request);
// The number of layer gradient norms in the request.
absl::StatusOr<int> ValidateProgress(const v1::ReportProgressRequest& request);
absl::Status ValidateFinish(const v1::FinishTrialRequest& request);

}  // namespace normsweep::scheduler

#endif  // NORMSWEEP_SCHEDULER_VALIDATION_H_
