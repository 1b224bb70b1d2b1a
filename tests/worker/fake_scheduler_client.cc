#include "tests/worker/fake_scheduler_client.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace normsweep::worker::testing {

int64_t FakeSchedulerClient::AddTrial(const v1::TrainConfig& config) {
  absl::MutexLock lock(&mu_);
  const int64_t id = next_id_++;
  TrialRecord& r = trials_[id];
  r.trial.set_id(id);
  r.trial.set_sweep_id(7);
  r.trial.set_index(static_cast<int32_t>(id - 1));
  *r.trial.mutable_config() = config;
  r.trial.set_state(v1::TRIAL_PENDING);
  pending_.push_back(id);
  return id;
}

void FakeSchedulerClient::SetUnavailable(bool unavailable, bool database_down) {
  absl::MutexLock lock(&mu_);
  unavailable_ = unavailable;
  database_down_ = database_down;
}

void FakeSchedulerClient::SetLeaseSeconds(int seconds) {
  absl::MutexLock lock(&mu_);
  lease_seconds_ = seconds;
}

void FakeSchedulerClient::HoldLeaseCalls(bool hold) {
  absl::MutexLock lock(&mu_);
  hold_lease_calls_ = hold;
}

void FakeSchedulerClient::IgnoreMaxTrials(bool ignore) {
  absl::MutexLock lock(&mu_);
  ignore_max_trials_ = ignore;
}

void FakeSchedulerClient::RefuseProgress(int64_t id) {
  absl::MutexLock lock(&mu_);
  refuse_progress_[id] = true;
}

void FakeSchedulerClient::CancelTrial(int64_t id, bool via_progress) {
  absl::MutexLock lock(&mu_);
  cancelled_[id] = via_progress;
}

void FakeSchedulerClient::LoseLease(int64_t id) {
  absl::MutexLock lock(&mu_);
  trials_[id].held = false;
}

void FakeSchedulerClient::SetHeartbeatIntervalMs(int ms) {
  absl::MutexLock lock(&mu_);
  heartbeat_ms_ = ms;
}

void FakeSchedulerClient::ForgetWorker() {
  absl::MutexLock lock(&mu_);
  worker_known_ = false;
}

int FakeSchedulerClient::registrations() {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

FakeSchedulerClient::TrialRecord FakeSchedulerClient::Get(int64_t id) {
  absl::MutexLock lock(&mu_);
  return trials_[id];
}

int FakeSchedulerClient::unavailable_calls() {
  absl::MutexLock lock(&mu_);
  return unavailable_calls_;
}

int FakeSchedulerClient::leases_granted() {
  absl::MutexLock lock(&mu_);
  return leases_granted_;
}

std::vector<v1::HeartbeatRequest> FakeSchedulerClient::heartbeats() {
  absl::MutexLock lock(&mu_);
  return heartbeats_;
}

bool FakeSchedulerClient::WaitFor(const std::function<bool(FakeSchedulerClient&)>& pred, absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto cond = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(*this); };
  return mu_.AwaitWithTimeout(absl::Condition(&cond), timeout);
}

bool FakeSchedulerClient::FinishedLocked(int64_t id) {
  auto it = trials_.find(id);
  return it != trials_.end() && !it->second.finishes.empty();
}

int FakeSchedulerClient::MaxStepLocked(int64_t id) {
  int max = -1;
  for (const v1::MetricPoint& p : trials_[id].points) max = std::max(max, p.step());
  return max;
}

int FakeSchedulerClient::DiagnosticStepsLocked(int64_t id) {
  return static_cast<int>(trials_[id].diagnostics.size());
}

bool FakeSchedulerClient::HeldLocked(int64_t id) { return trials_[id].held; }

int FakeSchedulerClient::RefusedFinishesLocked(int64_t id) {
  return static_cast<int>(trials_[id].refused_finishes.size());
}

absl::Status FakeSchedulerClient::Reachable() {
  if (!unavailable_) return absl::OkStatus();
  ++unavailable_calls_;
  if (database_down_) return DatabaseUnavailableError("fake scheduler's database down");
  return absl::UnavailableError("fake scheduler down");
}

absl::Status FakeSchedulerClient::CheckLease(int64_t worker, int64_t trial, int32_t attempt) {
  auto it = trials_.find(trial);
  if (it == trials_.end()) return absl::NotFoundError(absl::StrCat("trial_id ", trial, " not found"));
  TrialRecord& r = it->second;
  if (!r.held || worker != worker_id_ || attempt != r.trial.attempts()) {
    ++r.refused_calls;
    return absl::FailedPreconditionError(absl::StrCat("trial_id ", trial, ": lease not held"));
  }
  return absl::OkStatus();
}

absl::StatusOr<FakeSchedulerClient::TrialRecord*> FakeSchedulerClient::HeldTrial(int64_t worker, int64_t trial,
                                                                                  int32_t attempt) {
  if (absl::Status up = Reachable(); !up.ok()) return up;
  if (absl::Status held = CheckLease(worker, trial, attempt); !held.ok()) return held;
  return &trials_[trial];
}

absl::StatusOr<v1::RegisterWorkerResponse> FakeSchedulerClient::RegisterWorker(const v1::RegisterWorkerRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status up = Reachable(); !up.ok()) return up;
  v1::RegisterWorkerResponse r;
  worker_id_ = 42 + registrations_++;
  worker_known_ = true;
  r.set_worker_id(worker_id_);
  r.set_lease_seconds(lease_seconds_);
  r.set_heartbeat_interval_ms(heartbeat_ms_);
  return r;
}

absl::StatusOr<v1::LeaseTrialResponse> FakeSchedulerClient::LeaseTrial(const v1::LeaseTrialRequest& request) {
  absl::MutexLock lock(&mu_);
  if (hold_lease_calls_) {
    ++blocked_lease_calls_;
    mu_.Await(absl::Condition(+[](bool* hold) { return !*hold; }, &hold_lease_calls_));
    --blocked_lease_calls_;
  }
  if (absl::Status up = Reachable(); !up.ok()) return up;
  if (!worker_known_ || request.worker_id() != worker_id_) {
    return absl::NotFoundError(absl::StrCat("worker_id ", request.worker_id(), " not found"));
  }
  v1::LeaseTrialResponse response;
  if (pending_.empty()) return response;
  response.set_leased(true);
  *response.mutable_trial() = LeaseNext(request.worker_id());
  const int more = ignore_max_trials_ ? 0 : request.max_trials() - 1;
  for (int i = 0; i < more && !pending_.empty(); ++i) *response.add_fused_trials() = LeaseNext(request.worker_id());
  return response;
}

v1::Trial FakeSchedulerClient::LeaseNext(int64_t worker) {
  const int64_t id = pending_.front();
  pending_.pop_front();
  TrialRecord& r = trials_[id];
  r.trial.set_attempts(r.trial.attempts() + 1);
  r.trial.set_state(v1::TRIAL_RUNNING);
  r.trial.set_worker_id(worker);
  r.held = true;
  r.leased_at = absl::Now();
  ++leases_granted_;
  return r.trial;
}

absl::StatusOr<v1::HeartbeatResponse> FakeSchedulerClient::Heartbeat(const v1::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  if (absl::Status up = Reachable(); !up.ok()) return up;
  heartbeats_.push_back(request);
  v1::HeartbeatResponse response;
  for (const v1::TrialLease& l : request.leases()) {
    auto it = trials_.find(l.trial_id());
    if (it == trials_.end() || !it->second.held || it->second.trial.attempts() != l.attempt()) {
      response.add_lost_trial_ids(l.trial_id());
    } else if (cancelled_.count(l.trial_id())) {
      response.add_cancelled_trial_ids(l.trial_id());
    }
  }
  return response;
}

absl::StatusOr<v1::ReportProgressResponse> FakeSchedulerClient::ReportProgress(const v1::ReportProgressRequest& request) {
  absl::MutexLock lock(&mu_);
  ASSIGN_OR_RETURN(TrialRecord * held, HeldTrial(request.worker_id(), request.trial_id(), request.attempt()));
  if (refuse_progress_.count(request.trial_id())) {
    return absl::InvalidArgumentError("points[0].train_loss: must be finite");
  }
  TrialRecord& r = *held;
  ++r.progress_calls;
  r.points.insert(r.points.end(), request.points().begin(), request.points().end());
  r.norms.insert(r.norms.end(), request.layer_grad_norms().begin(), request.layer_grad_norms().end());
  r.diagnostics.insert(r.diagnostics.end(), request.diagnostics().begin(), request.diagnostics().end());
  v1::ReportProgressResponse response;
  auto c = cancelled_.find(request.trial_id());
  response.set_cancel_requested(c != cancelled_.end() && c->second);
  return response;
}

absl::StatusOr<v1::FinishTrialResponse> FakeSchedulerClient::FinishTrial(const v1::FinishTrialRequest& request) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<TrialRecord*> held = HeldTrial(request.worker_id(), request.trial_id(), request.attempt());
  if (absl::IsFailedPrecondition(held.status())) trials_[request.trial_id()].refused_finishes.push_back(request);
  if (!held.ok()) return held.status();
  TrialRecord& r = **held;
  r.held = false;
  if (r.finishes.empty()) r.finished_at = absl::Now();
  r.trial.set_state(request.outcome());
  r.finishes.push_back(request);
  v1::FinishTrialResponse response;
  *response.mutable_trial() = r.trial;
  return response;
}

}  // namespace normsweep::worker::testing
