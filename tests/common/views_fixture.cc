#include "tests/common/views_fixture.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "tests/common/fresh_database.h"
#include "tests/common/test_time.h"

namespace normsweep::testing {

absl::StatusOr<v1::GetSweepAnalysisResponse> AnalysisFromViews(const std::vector<v1::Trial>& trials,
                                                               double tolerance) {
  ViewsFixtureOptions options;
  options.tolerance = tolerance;
  return AnalysisFromViews(trials, options);
}

absl::StatusOr<v1::GetSweepAnalysisResponse> AnalysisFromViews(const std::vector<v1::Trial>& trials,
                                                               const ViewsFixtureOptions& fixture) {
  ASSIGN_OR_RETURN(std::string conninfo, FreshDatabase("views_fixture"));
  ASSIGN_OR_RETURN(std::unique_ptr<db::Store> opened, OpenStore(conninfo));
  db::Store& store = *opened;

  const absl::Time now = kT0;
  v1::SweepSpec spec = fixture.spec;
  if (spec.name().empty()) spec.set_name("views-fixture");
  spec.set_max_attempts(100);
  std::vector<db::NewTrial> news;
  for (size_t i = 0; i < trials.size(); ++i) {
    db::NewTrial& n = news.emplace_back();
    n.index = static_cast<int32_t>(i);
    n.config = trials[i].config();
    n.variant = trials[i].variant();
  }
  ASSIGN_OR_RETURN(db::CreateSweepResult created, store.CreateSweep("", spec, news, now));
  v1::RegisterWorkerRequest worker;
  worker.set_name("views-fixture");
  ASSIGN_OR_RETURN(int64_t worker_id, store.RegisterWorker(worker, now));
  // Trials are leased in index order; each is taken to its state. PENDING
  // ones stay in the queue, so they must come last.
  bool pending_seen = false;
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& want = trials[i];
    if (want.state() == v1::TRIAL_PENDING) {
      pending_seen = true;
      continue;
    }
    if (pending_seen) return absl::InvalidArgumentError("views fixture: put the PENDING trials last");
    ASSIGN_OR_RETURN(std::optional<v1::Trial> leased, store.LeaseTrial(worker_id, now, absl::Hours(1)));
    if (!leased.has_value() || leased->index() != static_cast<int32_t>(i)) {
      return absl::InternalError(absl::StrCat("views fixture: expected to lease trial index ", i));
    }
    if (want.result().has_init_val_loss()) {
      v1::ReportProgressRequest progress;
      progress.set_worker_id(worker_id);
      progress.set_trial_id(leased->id());
      progress.set_attempt(leased->attempts());
      v1::MetricPoint& step0 = *progress.add_points();
      step0.set_step(0);
      step0.set_val_loss(want.result().init_val_loss());
      RETURN_IF_ERROR(store.ReportProgress(progress, now).status());
    }
    if (want.state() == v1::TRIAL_RUNNING) continue;
    v1::FinishTrialRequest finish;
    finish.set_worker_id(worker_id);
    finish.set_trial_id(leased->id());
    finish.set_attempt(leased->attempts());
    finish.set_outcome(want.state());
    *finish.mutable_result() = want.result();
    RETURN_IF_ERROR(store.FinishTrial(finish, now).status());
  }
  return store.GetSweepAnalysis(created.sweep.id(), fixture.tolerance);
}

}  // namespace normsweep::testing
