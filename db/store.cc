#include "db/store.h"

#include <cmath>

#include "absl/strings/cord.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "absl/strings/str_cat.h"
#include "proto/schema/api_limits.h"

namespace normsweep::db {

namespace {
constexpr char kDatabaseErrorPayload[] = "type.normsweep/database_error";
}  // namespace

absl::Status NoSweep(int64_t id) { return absl::NotFoundError(absl::StrCat("sweep_id ", id, ": no such sweep")); }
absl::Status NoTrial(int64_t id) { return absl::NotFoundError(absl::StrCat("trial_id ", id, ": no such trial")); }
absl::Status NoWorker(int64_t id) {
  return absl::NotFoundError(absl::StrCat("worker_id ", id, ": no such worker (register first)"));
}

absl::Status MarkDatabaseError(absl::Status status) {
  if (!status.ok()) status.SetPayload(kDatabaseErrorPayload, absl::Cord("1"));
  return status;
}

bool IsDatabaseError(const absl::Status& status) { return status.GetPayload(kDatabaseErrorPayload).has_value(); }

absl::StatusOr<v1::GetSweepAnalysisResponse> Store::GetSweepAnalysis(int64_t sweep_id, double tolerance) {
  return absl::UnimplementedError(
      "sweep analysis: the views that define it are SQL (db/views); this store has none (use PostgreSQL)");
}

absl::StatusOr<std::vector<v1::Trial>> Store::LeaseFitting(int64_t worker_id, int64_t sweep_id, int max,
                                                           const TrialFilter& fits, absl::Time now,
                                                           absl::Duration lease) {
  // Candidates a page at a time: a sweep holds up to kMaxTrialsPerSweep
  // trials, and the first page usually has all that are wanted.
  constexpr int kPage = 256;
  std::vector<v1::Trial> leased;
  int32_t after_index = -1;
  while (static_cast<int>(leased.size()) < max) {
    absl::StatusOr<std::vector<v1::Trial>> page = ListTrials(sweep_id, v1::TRIAL_PENDING, after_index, kPage);
    // Trials leased on an earlier page are this worker's now: an error
    // after them ends the search, not their leases (the worker must hear of
    // them, or they would sit unheartbeated until they expired).
    if (!page.ok()) {
      if (leased.empty()) return page.status();
      break;
    }
    if (page->empty()) break;
    after_index = page->back().index();
    std::vector<int64_t> ids;
    for (const v1::Trial& t : *page) {
      if (static_cast<int>(leased.size() + ids.size()) == max) break;
      if (fits(t)) ids.push_back(t.id());
    }
    if (!ids.empty()) {
      absl::StatusOr<std::vector<v1::Trial>> got = LeaseTrialsById(worker_id, sweep_id, ids, now, lease);
      if (!got.ok()) {
        if (leased.empty()) return got.status();
        break;  // as above: keep what is leased
      }
      const bool short_of_ids = got->size() < ids.size();
      for (v1::Trial& t : *got) leased.push_back(std::move(t));
      // Fewer than asked: the sweep reached max_concurrent_trials, or others
      // are leasing it too. Either way its fused run is as large as it gets
      // without waiting, and the next page would cost another transaction.
      if (short_of_ids) break;
    }
    if (static_cast<int>(page->size()) < kPage) break;
  }
  return leased;
}

void MergeMetricPoint(const v1::MetricPoint& from, v1::MetricPoint* into) {
  // By reflection over the fields with presence, so that a new metric is
  // merged by the same rule without another line here.
  const google::protobuf::Descriptor* d = v1::MetricPoint::descriptor();
  const google::protobuf::Reflection* r = v1::MetricPoint::GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (!f->has_presence() || r->HasField(*into, f) || !r->HasField(from, f)) continue;
    switch (f->cpp_type()) {
      case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(into, f, r->GetDouble(from, f)); break;
      case google::protobuf::FieldDescriptor::CPPTYPE_INT32: r->SetInt32(into, f, r->GetInt32(from, f)); break;
      default: break;  // MetricPoint has only doubles besides its step
    }
  }
}

std::optional<v1::TrialAttempt> FinishingAttempt(const v1::Trial& t, int32_t last_recorded) {
  if (!IsFinal(t.state()) || t.attempts() <= 0 || last_recorded == t.attempts()) return std::nullopt;
  v1::TrialAttempt last;
  last.set_attempt(t.attempts());
  last.set_worker_id(t.worker_id());
  if (t.has_finished_at()) *last.mutable_ended_at() = t.finished_at();
  last.set_outcome(t.state());
  last.set_reason(t.result().error());
  return last;
}

std::optional<double> TrialL0(std::optional<double> init_val_loss, std::optional<double> step0_val_loss) {
  if (init_val_loss.has_value() && std::isfinite(*init_val_loss)) return init_val_loss;
  if (step0_val_loss.has_value() && std::isfinite(*step0_val_loss)) return step0_val_loss;
  return std::nullopt;
}

std::string RetriedAttemptError(const std::string& reason, int attempts) {
  return absl::StrCat(reason, " after ", attempts, attempts == 1 ? " attempt" : " attempts");
}

v1::SweepSpec StoredSpec(const v1::SweepSpec& spec) {
  v1::SweepSpec s = spec;
  if (s.max_interruptions() == 0) s.set_max_interruptions(schema::kDefaultMaxInterruptions);
  return s;
}

std::string InterruptedError(const std::string& cause, int interruptions) {
  return absl::StrCat("interrupted ", interruptions, interruptions == 1 ? " time" : " times",
                      " (max_interruptions), the last by ", cause);
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
