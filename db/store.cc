#include "db/store.h"

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace normsweep::db {

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
