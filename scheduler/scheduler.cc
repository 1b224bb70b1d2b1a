#include "scheduler/scheduler.h"

#include <algorithm>
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/wait_for.h"
#include "google/protobuf/util/message_differencer.h"
#include "google/protobuf/util/time_util.h"
#include "proto/schema/train_config.h"
#include "scheduler/cost_estimate.h"
#include "scheduler/sweep_expander.h"
#include "scheduler/sweep_preview.h"
#include "scheduler/validation.h"

namespace normsweep::scheduler {
namespace {

using google::protobuf::util::TimeUtil;

google::protobuf::Timestamp ToProto(absl::Time t) {
  return TimeUtil::MicrosecondsToTimestamp(absl::ToUnixMicros(t));
}

bool SweepDone(const v1::Sweep& s) {
  return s.state() != v1::SWEEP_RUNNING && s.counts().pending() == 0 && s.counts().running() == 0;
}

}  // namespace

Scheduler::Scheduler(db::Store& store, Clock& clock, SchedulerMetrics& metrics, SchedulerOptions options)
    : store_(store), clock_(clock), metrics_(metrics), options_(options) {}

void Scheduler::NotifyChange() {
  absl::MutexLock lock(&watch_mu_);
  ++changes_;
}

absl::StatusOr<v1::SubmitSweepResponse> Scheduler::SubmitSweep(const v1::SubmitSweepRequest& request,
                                                               const std::string& submitted_by) {
  ASSIGN_OR_RETURN(const ValidSpec valid, ValidateSubmitSweep(request));
  ASSIGN_OR_RETURN(std::vector<db::NewTrial> trials, ExpandSweep(valid));
  const v1::SweepSpec& spec = valid.spec();
  std::vector<std::string> warnings = SweepWarnings(valid, trials);
  if (!request.validate_only() && !request.allow_warnings() && !warnings.empty()) return RefuseWarnings(warnings);
  v1::SubmitSweepResponse response;
  for (v1::GridAxis& axis : GridAxes(valid)) *response.add_axes() = std::move(axis);
  for (v1::GridGroup& group : GridGroups(trials)) *response.add_groups() = std::move(group);
  for (std::string& w : warnings) response.add_warnings(std::move(w));
  ASSIGN_OR_RETURN(*response.mutable_estimate(), Estimate(valid, trials));
  if (request.validate_only()) {
    v1::Sweep* sweep = response.mutable_sweep();
    sweep->set_name(spec.name());
    *sweep->mutable_spec() = spec;
    sweep->set_trial_count(static_cast<int32_t>(trials.size()));
    sweep->mutable_counts()->set_pending(static_cast<int32_t>(trials.size()));
    sweep->set_submitted_by(submitted_by);
    return response;
  }
  ASSIGN_OR_RETURN(db::CreateSweepResult created,
                   store_.CreateSweep(request.request_id(), spec, trials, clock_.Now(), submitted_by));
  *response.mutable_sweep() = std::move(created.sweep);
  response.set_created(created.created);
  if (created.created) NotifyChange();
  return response;
}

absl::StatusOr<v1::CostEstimate> Scheduler::Estimate(const ValidSpec& valid, const std::vector<db::NewTrial>& trials) {
  const absl::Time live_since = clock_.Now() - options_.worker_timeout;
  ASSIGN_OR_RETURN(std::vector<v1::Worker> workers, store_.ListWorkers(live_since, /*live_only=*/true));
  ASSIGN_OR_RETURN(std::vector<db::WorkerSpeeds> speeds,
                   store_.RecentTrialSpeeds(live_since, kThroughputTrialsPerWorker));
  return EstimateCost(valid, trials, workers, speeds);
}

absl::StatusOr<v1::GetSweepResponse> Scheduler::GetSweep(const v1::GetSweepRequest& request) {
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id()));
  v1::GetSweepResponse response;
  ASSIGN_OR_RETURN(*response.mutable_sweep(), store_.GetSweep(request.sweep_id()));
  return response;
}

absl::StatusOr<v1::ListSweepsResponse> Scheduler::ListSweeps(const v1::ListSweepsRequest& request) {
  ASSIGN_OR_RETURN(const Page page, ValidateListSweeps(request));
  ASSIGN_OR_RETURN(std::vector<v1::Sweep> sweeps, store_.ListSweeps(request.state(), page.token, page.size));
  v1::ListSweepsResponse response;
  if (static_cast<int>(sweeps.size()) == page.size) response.set_next_page_token(absl::StrCat(sweeps.back().id()));
  for (v1::Sweep& s : sweeps) *response.add_sweeps() = std::move(s);
  return response;
}

absl::StatusOr<v1::CancelSweepResponse> Scheduler::CancelSweep(const v1::CancelSweepRequest& request,
                                                               const std::string& cancelled_by) {
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id()));
  v1::CancelSweepResponse response;
  int cancelled = 0;
  ASSIGN_OR_RETURN(*response.mutable_sweep(),
                   store_.CancelSweep(request.sweep_id(), clock_.Now(), cancelled_by, &cancelled));
  metrics_.TrialsCancelled(cancelled);
  NotifyChange();
  return response;
}

absl::StatusOr<v1::ListTrialsResponse> Scheduler::ListTrials(const v1::ListTrialsRequest& request) {
  ASSIGN_OR_RETURN(const Page page, ValidateListTrials(request));
  // Tokens are "last index + 1" so that 0 means "from the start".
  ASSIGN_OR_RETURN(std::vector<v1::Trial> trials, store_.ListTrials(request.sweep_id(), request.state(),
                                                                    static_cast<int32_t>(page.token) - 1, page.size));
  v1::ListTrialsResponse response;
  if (static_cast<int>(trials.size()) == page.size) response.set_next_page_token(absl::StrCat(trials.back().index() + 1));
  for (v1::Trial& t : trials) *response.add_trials() = std::move(t);
  return response;
}

absl::StatusOr<v1::GetTrialResponse> Scheduler::GetTrial(const v1::GetTrialRequest& request) {
  RETURN_IF_ERROR(CheckId("trial_id", request.trial_id()));
  v1::GetTrialResponse response;
  ASSIGN_OR_RETURN(*response.mutable_trial(), store_.GetTrial(request.trial_id()));
  ASSIGN_OR_RETURN(db::TrialHistory history, store_.GetTrialHistory(request.trial_id()));
  for (v1::MetricPoint& p : history.metrics) *response.add_metrics() = std::move(p);
  for (v1::LayerGradNorms& g : history.layer_grad_norms) *response.add_layer_grad_norms() = std::move(g);
  for (v1::StepDiagnostics& d : history.diagnostics) *response.add_diagnostics() = std::move(d);
  for (v1::TrialAttempt& a : history.attempts) *response.add_attempts() = std::move(a);
  // A final trial whose last attempt the store did not record ended it with
  // FinishTrial: that attempt is the trial itself.
  if (std::optional<v1::TrialAttempt> last = db::FinishingAttempt(
          response.trial(), response.attempts().empty() ? 0 : response.attempts().rbegin()->attempt())) {
    *response.add_attempts() = *std::move(last);
  }
  return response;
}

int64_t WatchFloor::Seen(absl::Time now, int64_t highest) {
  // Polls at one instant (a FakeClock standing still) keep one entry, the latest.
  if (!seen_at_.empty() && seen_at_.back().first == now) {
    seen_at_.back().second = highest;
  } else {
    seen_at_.emplace_back(now, highest);
  }
  while (seen_at_.size() > 1 && seen_at_[1].first <= now - slack_) seen_at_.pop_front();
  if (seen_at_.front().first <= now - slack_) floor_ = seen_at_.front().second;
  return floor_;
}

absl::Status Scheduler::WatchSweep(const v1::WatchSweepRequest& request,
                                   const std::function<bool(const v1::WatchSweepEvent&)>& send,
                                   const std::function<bool()>& cancelled) {
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id()));
  const int64_t id = request.sweep_id();
  // The slack: only CreateSweep, CancelSweep, limited-sweep and fused leases
  // take several statements; everything else commits right after numbering.
  WatchFloor floor(absl::Seconds(3));
  // Changes wake the stream early, but it polls at most this often.
  const absl::Duration min_gap = std::min(absl::Milliseconds(100), options_.watch_poll_interval);
  std::map<int64_t, int64_t> sent;  // trial id -> number sent
  int64_t highest = 0;
  v1::Sweep last_sweep;
  bool first = true;
  uint64_t seen_changes = 0;
  while (true) {
    if (cancelled()) return absl::CancelledError("watch cancelled by the client");
    ASSIGN_OR_RETURN(v1::Sweep sweep, store_.GetSweep(id));
    ASSIGN_OR_RETURN(auto changed, store_.TrialsChangedSince(id, floor.floor()));
    v1::WatchSweepEvent event;
    for (auto& [trial, seq] : changed) {
      highest = std::max(highest, seq);
      auto it = sent.find(trial.id());
      if (it != sent.end() && it->second >= seq) continue;
      sent[trial.id()] = seq;
      *event.add_trials() = std::move(trial);
    }
    floor.Seen(clock_.Now(), highest);
    const bool sweep_changed = first || !google::protobuf::util::MessageDifferencer::Equals(sweep, last_sweep);
    if (sweep_changed || event.trials_size() > 0) {
      *event.mutable_sweep() = sweep;
      if (!send(event)) return absl::CancelledError("watch stream closed");
      last_sweep = sweep;
    }
    first = false;
    if (SweepDone(sweep)) return absl::OkStatus();
    // Sleep until this replica changes something or the poll interval ends.
    // These waits are real time whatever the clock (Clock has no wait), so a
    // FakeClock that stands still slows nothing and spins nothing.
    absl::SleepFor(min_gap);
    absl::MutexLock lock(&watch_mu_);
    auto changed_here = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(watch_mu_) { return changes_ != seen_changes; };
    watch_mu_.AwaitWithTimeout(absl::Condition(&changed_here), options_.watch_poll_interval - min_gap);
    seen_changes = changes_;
  }
}

absl::StatusOr<v1::ListWorkersResponse> Scheduler::ListWorkers(const v1::ListWorkersRequest& request) {
  ASSIGN_OR_RETURN(std::vector<v1::Worker> workers,
                   store_.ListWorkers(clock_.Now() - options_.worker_timeout, request.live_only()));
  v1::ListWorkersResponse response;
  for (v1::Worker& w : workers) {
    if (w.superseded_by() != 0 && !request.include_superseded()) continue;
    *response.add_workers() = std::move(w);
  }
  return response;
}

absl::StatusOr<v1::GetSweepAnalysisResponse> Scheduler::GetSweepAnalysis(const v1::GetSweepAnalysisRequest& request) {
  ASSIGN_OR_RETURN(const double tolerance, ValidateGetSweepAnalysis(request));
  return store_.GetSweepAnalysis(request.sweep_id(), tolerance);
}

absl::StatusOr<v1::RegisterWorkerResponse> Scheduler::RegisterWorker(const v1::RegisterWorkerRequest& request) {
  RETURN_IF_ERROR(ValidateRegisterWorker(request));
  const absl::Time now = clock_.Now();
  ASSIGN_OR_RETURN(int64_t id, store_.RegisterWorker(request, now));
  // A restarted worker's earlier registrations lost their leases in that
  // call: queue their trials now rather than at the next maintenance pass.
  // Best effort: maintenance does it anyway.
  (void)ExpireLeases(now);
  v1::RegisterWorkerResponse response;
  response.set_worker_id(id);
  response.set_lease_seconds(static_cast<int32_t>(absl::ToInt64Seconds(options_.lease_duration)));
  response.set_heartbeat_interval_ms(static_cast<int32_t>(absl::ToInt64Milliseconds(options_.heartbeat_interval)));
  return response;
}

absl::StatusOr<v1::LeaseTrialResponse> Scheduler::LeaseTrial(const v1::LeaseTrialRequest& request) {
  return WaitFor<v1::LeaseTrialResponse>([&](auto done) { LeaseTrialAsync(request, std::move(done)); });
}

void Scheduler::LeaseTrialAsync(const v1::LeaseTrialRequest& request, Done<v1::LeaseTrialResponse> done) {
  if (absl::Status st = ValidateLeaseTrial(request); !st.ok()) return done(st);
  const absl::Time start = absl::Now();
  const absl::Time now = clock_.Now();
  store_.LeaseTrialAsync(
      request.worker_id(), now, options_.lease_duration,
      [this, start, now, worker_id = request.worker_id(), max_trials = request.max_trials(),
       done = std::move(done)](absl::StatusOr<std::optional<v1::Trial>> trial) mutable {
        if (!trial.ok()) return done(trial.status());
        metrics_.ObserveLeaseLatency(absl::Now() - start);
        v1::LeaseTrialResponse response;
        if (!trial->has_value()) return done(std::move(response));
        response.set_leased(true);
        *response.mutable_lease_expires_at() = (*trial)->lease_expires_at();
        *response.mutable_trial() = **std::move(trial);
        NotifyChange();
        if (max_trials <= 1) return done(std::move(response));
        LeaseFused(worker_id, now, max_trials - 1, std::move(response), std::move(done));
      });
}

void Scheduler::LeaseFused(int64_t worker_id, absl::Time now, int more, v1::LeaseTrialResponse response,
                           Done<v1::LeaseTrialResponse> done) {
  // The further trials are found and leased by the store's LeaseFittingAsync,
  // which runs where the store may block (PostgresStore: a thread of its
  // own), never on a gRPC thread nor in the single leases' group: the
  // candidates are a page of the sweep's PENDING trials, read and leased in
  // statements of their own. fits runs there too; FusionKey is pure.
  absl::StatusOr<std::string> key = schema::FusionKey(response.trial().config());
  if (!key.ok()) return done(std::move(response));  // stored configs are valid; fuse nothing if not
  const int64_t first_id = response.trial().id();
  const int64_t sweep_id = response.trial().sweep_id();
  auto fits = [first_id, key = *std::move(key)](const v1::Trial& t) {
    if (t.id() == first_id) return false;
    absl::StatusOr<std::string> k = schema::FusionKey(t.config());
    return k.ok() && *k == key;
  };
  store_.LeaseFittingAsync(
      worker_id, sweep_id, more, std::move(fits), now, options_.lease_duration,
      [this, response = std::move(response), done = std::move(done)](
          absl::StatusOr<std::vector<v1::Trial>> fused) mutable {
        // The first trial is leased whatever happens here: a failure leaves
        // it a lease of one (fusing is an optimisation), not an error that
        // would strand its lease until it expired.
        if (!fused.ok()) {
          LogLine("normsweep-scheduler",
                  absl::StrCat("LeaseTrial: fusing with trial_id ", response.trial().id(), ": ",
                               fused.status().ToString(absl::StatusToStringMode::kWithNoExtraData)));
          return done(std::move(response));
        }
        metrics_.TrialsLeasedFused(static_cast<int>(fused->size()));
        for (v1::Trial& t : *fused) *response.add_fused_trials() = std::move(t);
        if (!fused->empty()) NotifyChange();
        done(std::move(response));
      });
}

absl::StatusOr<v1::HeartbeatResponse> Scheduler::Heartbeat(const v1::HeartbeatRequest& request) {
  RETURN_IF_ERROR(ValidateHeartbeat(request));
  const absl::Time now = clock_.Now();
  std::vector<v1::TrialLease> leases(request.leases().begin(), request.leases().end());
  ASSIGN_OR_RETURN(db::HeartbeatResult result,
                   store_.Heartbeat(request.worker_id(), leases, now, options_.lease_duration));
  v1::HeartbeatResponse response;
  for (int64_t id : result.cancelled_trial_ids) response.add_cancelled_trial_ids(id);
  for (int64_t id : result.lost_trial_ids) response.add_lost_trial_ids(id);
  *response.mutable_lease_expires_at() = ToProto(now + options_.lease_duration);
  return response;
}

absl::StatusOr<v1::ReportProgressResponse> Scheduler::ReportProgress(const v1::ReportProgressRequest& request) {
  return WaitFor<v1::ReportProgressResponse>([&](auto done) { ReportProgressAsync(request, std::move(done)); });
}

void Scheduler::ReportProgressAsync(const v1::ReportProgressRequest& request,
                                    Done<v1::ReportProgressResponse> done) {
  absl::StatusOr<int> norms = ValidateProgress(request);
  if (!norms.ok()) return done(norms.status());
  store_.ReportProgressAsync(
      request, clock_.Now(),
      [this, points = request.points_size(), norms = *norms, done = std::move(done)](
          absl::StatusOr<db::ProgressResult> result) {
        if (!result.ok()) return done(result.status());
        metrics_.ProgressReported(points, norms);
        NotifyChange();
        v1::ReportProgressResponse response;
        response.set_cancel_requested(result->cancel_requested);
        done(std::move(response));
      });
}

absl::StatusOr<v1::FinishTrialResponse> Scheduler::FinishTrial(const v1::FinishTrialRequest& request) {
  return WaitFor<v1::FinishTrialResponse>([&](auto done) { FinishTrialAsync(request, std::move(done)); });
}

void Scheduler::FinishTrialAsync(const v1::FinishTrialRequest& request, Done<v1::FinishTrialResponse> done) {
  if (absl::Status st = ValidateFinish(request); !st.ok()) return done(st);
  store_.FinishTrialAsync(
      request, clock_.Now(),
      [this, retry = request.retry(), cause = request.interruption(), done = std::move(done)](
          absl::StatusOr<v1::Trial> trial, bool finished_now) {
        if (!trial.ok()) return done(trial.status());
        // A re-sent FinishTrial counts once (finished_now is false for it).
        if (finished_now && db::IsFinal(trial->state())) metrics_.TrialsCompleted(trial->state());
        if (finished_now && retry && trial->state() == v1::TRIAL_PENDING) {
          metrics_.AttemptsRequeued(cause.empty() ? "failed" : "interrupted");
        }
        if (finished_now && !cause.empty()) metrics_.Interrupted(cause);
        NotifyChange();
        v1::FinishTrialResponse response;
        *response.mutable_trial() = *std::move(trial);
        done(std::move(response));
      });
}

absl::Status Scheduler::ExpireLeases(absl::Time now) {
  db::Outage outage;
  {
    absl::MutexLock lock(&outage_mu_);
    if (outage_from_.has_value()) outage = {*outage_from_, outage_last_ + options_.lease_duration};
  }
  ASSIGN_OR_RETURN(db::ExpiryResult expired, store_.ExpireLeases(now, outage));
  for (const auto& [cause, n] : expired.interruptions) metrics_.Interrupted(cause, n);
  metrics_.TrialsCompleted(v1::TRIAL_FAILED, expired.failed);
  metrics_.TrialsCompleted(v1::TRIAL_CANCELLED, expired.cancelled);
  metrics_.AttemptsRequeued("lease_expired", expired.requeued);
  if (expired.requeued + expired.failed + expired.cancelled > 0) NotifyChange();
  return absl::OkStatus();
}

absl::Status Scheduler::RunMaintenance() {
  const absl::Time now = clock_.Now();
  absl::Status status = ExpireLeases(now);
  absl::StatusOr<db::StoreStats> stats = status.ok() ? store_.Stats(now - options_.worker_timeout) : status;
  if (stats.ok()) metrics_.SetStats(*stats);
  NoteStoreOutcome(stats.status(), now);
  return stats.status();
}

void Scheduler::NoteStoreOutcome(const absl::Status& status, absl::Time now) {
  absl::MutexLock lock(&outage_mu_);
  if (status.ok()) {
    in_outage_ = false;
    return;
  }
  if (status.code() != absl::StatusCode::kUnavailable) return;  // the database answered
  if (!in_outage_) outage_from_ = now;  // a new outage: it replaces the one before
  in_outage_ = true;
  outage_last_ = now;
}

}  // namespace normsweep::scheduler
