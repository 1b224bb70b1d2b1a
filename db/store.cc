#include "db/store.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace normsweep::db {

std::string TrialStateName(v1::TrialState state) {
  switch (state) {
    case v1::TRIAL_PENDING: return "PENDING";
    case v1::TRIAL_RUNNING: return "RUNNING";
    case v1::TRIAL_SUCCEEDED: return "SUCCEEDED";
    case v1::TRIAL_DIVERGED: return "DIVERGED";
    case v1::TRIAL_FAILED: return "FAILED";
    case v1::TRIAL_CANCELLED: return "CANCELLED";
    default: return "UNSPECIFIED";
  }
}

v1::TrialState TrialStateFromName(const std::string& name) {
  if (name == "PENDING") return v1::TRIAL_PENDING;
  if (name == "RUNNING") return v1::TRIAL_RUNNING;
  if (name == "SUCCEEDED") return v1::TRIAL_SUCCEEDED;
  if (name == "DIVERGED") return v1::TRIAL_DIVERGED;
  if (name == "FAILED") return v1::TRIAL_FAILED;
  if (name == "CANCELLED") return v1::TRIAL_CANCELLED;
  return v1::TRIAL_STATE_UNSPECIFIED;
}

std::string SweepStateName(v1::SweepState state) {
  switch (state) {
    case v1::SWEEP_RUNNING: return "RUNNING";
    case v1::SWEEP_COMPLETED: return "COMPLETED";
    case v1::SWEEP_CANCELLED: return "CANCELLED";
    default: return "UNSPECIFIED";
  }
}

v1::SweepState SweepStateFromName(const std::string& name) {
  if (name == "RUNNING") return v1::SWEEP_RUNNING;
  if (name == "COMPLETED") return v1::SWEEP_COMPLETED;
  if (name == "CANCELLED") return v1::SWEEP_CANCELLED;
  return v1::SWEEP_STATE_UNSPECIFIED;
}

namespace {
constexpr char kDatabaseErrorPayload[] = "type.normsweep/database_error";
}  // namespace

absl::Status MarkDatabaseError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kDatabaseErrorPayload, absl::Cord("1"));
  return status;
}

bool IsDatabaseError(const absl::Status& status) { return status.GetPayload(kDatabaseErrorPayload).has_value(); }

std::string RetriedAttemptError(const std::string& reason, int attempts) {
  return absl::StrCat(reason, " after ", attempts, attempts == 1 ? " attempt" : " attempts");
}

bool IsFinal(v1::TrialState state) {
  return state == v1::TRIAL_SUCCEEDED || state == v1::TRIAL_DIVERGED ||
         state == v1::TRIAL_FAILED || state == v1::TRIAL_CANCELLED;
}

void AddToCounts(v1::TrialState state, v1::TrialCounts* c, int64_t n) {
  switch (state) {
    case v1::TRIAL_PENDING: c->set_pending(c->pending() + n); break;
    case v1::TRIAL_RUNNING: c->set_running(c->running() + n); break;
    case v1::TRIAL_SUCCEEDED: c->set_succeeded(c->succeeded() + n); break;
    case v1::TRIAL_DIVERGED: c->set_diverged(c->diverged() + n); break;
    case v1::TRIAL_FAILED: c->set_failed(c->failed() + n); break;
    case v1::TRIAL_CANCELLED: c->set_cancelled(c->cancelled() + n); break;
    default: break;
  }
}

}  // namespace normsweep::db
