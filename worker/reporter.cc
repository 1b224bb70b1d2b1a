#include "worker/reporter.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/interruptions.h"

namespace normsweep::worker {

namespace {

void Log(const std::string& message) { LogLine("normsweep-worker", message); }

bool LeaseNotHeld(const absl::Status& status) { return absl::IsFailedPrecondition(status) || absl::IsNotFound(status); }

}  // namespace

Reporter::Reporter(SchedulerClient& client, Clock& clock, const WorkerOptions& options, LeaseTable& leases,
                   const std::atomic<int64_t>& worker_id)
    : client_(client), clock_(clock), options_(options), leases_(leases), worker_id_(worker_id) {}

void Reporter::NoteRpc(const absl::Status& status, const char* what) {
  if (status.ok()) {
    if (scheduler_unreachable_.exchange(false)) {
      Log("scheduler reachable again");
      // Everything waiting out a back-off goes now.
      absl::MutexLock lock(&leases_.mu);
      for (auto& [id, l] : leases_.by_id) {
        l->retry_at = absl::InfinitePast();
        l->backoff = absl::ZeroDuration();
      }
    }
  } else if (IsRetryable(status)) {
    if (!scheduler_unreachable_.exchange(true)) {
      Log(absl::StrCat(IsDatabaseUnavailable(status) ? "scheduler's database unavailable (" : "scheduler unreachable (",
                       what, ": ", status.ToString(absl::StatusToStringMode::kWithNoExtraData),
                       "); trials keep running, progress is buffered"));
    }
  }
}

void Reporter::Loop(absl::Notification& stop) {
  const absl::Duration tick = std::min(absl::Milliseconds(50), options_.flush_interval);
  do {
    Pass();
  } while (!stop.WaitForNotificationWithTimeout(tick));
  Pass();  // whatever arrived at the very end
}

void Reporter::Pass() {
  std::vector<LeasePtr> due;
  {
    absl::MutexLock lock(&leases_.mu);
    const absl::Time now = clock_.Now();
    for (auto it = leases_.by_id.begin(); it != leases_.by_id.end();) {
      Lease& l = *it->second;
      if (l.lost) {
        it = leases_.by_id.erase(it);
        continue;
      }
      const bool closing = l.state == LeaseState::kFinishing;
      if (l.retry_at <= now &&
          (l.state == LeaseState::kFinishing ||
           (!l.progress.empty() &&
            (closing || l.progress.ShouldFlush(now, options_.flush_interval, options_.flush_points))))) {
        due.push_back(it->second);
      }
      ++it;
    }
  }
  for (const LeasePtr& l : due) Report(l);
}

void Reporter::Report(const LeasePtr& lease) {
  while (true) {
    v1::ReportProgressRequest request;
    PeekedBatch batch;
    std::optional<v1::FinishTrialRequest> finish;
    {
      absl::MutexLock lock(&leases_.mu);
      if (lease->lost) return;
      if (!lease->progress.empty()) {
        request.set_worker_id(worker_id_);
        request.set_trial_id(lease->trial.id());
        request.set_attempt(lease->trial.attempts());
        batch = lease->progress.Peek(BatchLimits::Api(options_.max_batch_points), &request);
      } else if (lease->state == LeaseState::kFinishing) {
        // A hand-back re-queues the trial at once: not while a LeaseTrial of
        // this worker's is in flight, which could be given it straight back
        // (and hand it back again, a second interruption).
        if (lease->finish.interruption() == schema::kWorkerDrained && leases_.lease_calls > 0) return;
        finish = lease->finish;
        finish->set_worker_id(worker_id_);
      } else {
        return;
      }
    }
    const bool more = finish.has_value() ? SendFinish(lease, *finish) : SendProgress(lease, request, batch);
    if (!more) return;
  }
}

bool Reporter::SendFinish(const LeasePtr& lease, const v1::FinishTrialRequest& request) {
  absl::StatusOr<v1::FinishTrialResponse> r = client_.FinishTrial(request);
  NoteRpc(r.status(), "FinishTrial");
  absl::MutexLock lock(&leases_.mu);
  if (r.ok()) {
    leases_.Erase(lease->trial.id(), lease.get());
  } else if (IsRetryable(r.status())) {
    Fail(lease, r.status(), "FinishTrial");
  } else if (absl::IsInvalidArgument(r.status()) && !lease->result_refused) {
    // Values the API rejects: the trial's own failure, said once more
    // with nothing but the error (not left to expire as a lost lease).
    Log(absl::StrCat(LeaseName(lease->trial), ": FinishTrial refused as invalid: ", r.status().message(),
                     "; reporting the attempt as the trial's failure"));
    lease->result_refused = true;
    v1::FinishTrialRequest& f = lease->finish;
    f.set_outcome(v1::TRIAL_FAILED);
    f.set_retry(true);
    f.clear_interruption();
    f.clear_result();
    f.mutable_result()->set_error(KeepEnd(
        absl::StrCat("the scheduler refused the trial's result: ", r.status().message()), schema::kMaxErrorLength));
    return true;
  } else {
    Log(absl::StrCat(LeaseName(lease->trial), ": FinishTrial refused: ", r.status().ToString()));
    leases_.Erase(lease->trial.id(), lease.get());
  }
  return false;
}

bool Reporter::SendProgress(const LeasePtr& lease, const v1::ReportProgressRequest& request,
                            const PeekedBatch& batch) {
  absl::StatusOr<v1::ReportProgressResponse> r = client_.ReportProgress(request);
  NoteRpc(r.status(), "ReportProgress");
  absl::MutexLock lock(&leases_.mu);
  if (r.ok()) {
    lease->progress.Ack(batch);
    lease->backoff = absl::ZeroDuration();
    lease->retry_at = absl::InfinitePast();
    if (r->cancel_requested() && !lease->cancel_requested) {
      Log(absl::StrCat(LeaseName(lease->trial), ": cancel requested"));
      lease->cancel_requested = true;
    }
    // More to send only if the trial is closing, or a full batch is waiting.
    const bool closing = lease->state == LeaseState::kFinishing;
    return closing || lease->progress.ShouldFlush(clock_.Now(), options_.flush_interval, options_.flush_points);
  }
  if (IsRetryable(r.status())) {
    Fail(lease, r.status(), "ReportProgress");
    return false;
  }
  if (LeaseNotHeld(r.status()) && lease->state == LeaseState::kFinishing && !lease->finish.interruption().empty()) {
    // An interrupted attempt whose lease the scheduler has already let
    // expire: its progress is moot, but FinishTrial still goes, so that the
    // scheduler records the interruption's cause (or refuses it too).
    lease->progress = ProgressBuffer();
    return true;
  }
  if (LeaseNotHeld(r.status())) {
    Fail(lease, r.status(), "ReportProgress");
    return false;
  }
  if (absl::IsInvalidArgument(r.status())) {
    lease->progress.Ack(batch);
    RefuseProgress(*lease, r.status());
  } else {
    // A batch the scheduler will never take (a bug on one side): drop it
    // rather than retry forever.
    Log(absl::StrCat(LeaseName(lease->trial), ": progress batch refused, dropped: ", r.status().ToString()));
    lease->progress.Ack(batch);
  }
  return true;
}

void Reporter::Fail(const LeasePtr& lease, const absl::Status& status, const char* what) {
  if (LeaseNotHeld(status)) {
    Log(absl::StrCat(LeaseName(lease->trial), ": ", what, " refused, lease lost: ", status.message()));
    lease->lost = true;
    leases_.Erase(lease->trial.id(), lease.get());
    return;
  }
  lease->backoff = std::clamp(lease->backoff * 2, options_.retry_min, options_.retry_max);
  lease->retry_at = clock_.Now() + lease->backoff;
}

void Reporter::RefuseProgress(Lease& lease, const absl::Status& status) {
  Log(absl::StrCat(LeaseName(lease.trial), ": progress refused as invalid, dropped: ", status.message()));
  if (!lease.refused.empty()) return;
  lease.refused = std::string(status.message());
  // Already concluded: the result becomes the refusal (the slot's Conclude
  // does the same for a trial still running).
  if (lease.state == LeaseState::kFinishing && RefusalDecides(lease.stop)) {
    const TrialVerdict verdict = RefusedProgressVerdict(lease.refused);
    v1::FinishTrialRequest& f = lease.finish;
    f.set_outcome(verdict.outcome);
    f.set_retry(verdict.retry);
    f.clear_interruption();
    *f.mutable_result() = verdict.result;
  }
}

}  // namespace normsweep::worker
