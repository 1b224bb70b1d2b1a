#include "worker/worker.h"

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/quote.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/interruptions.h"
#include "proto/schema/state_names.h"
#include "worker/memory_events.h"

namespace normsweep::worker {

namespace {

void Log(const std::string& message) { LogLine("normsweep-worker", message); }

// "trials 12, 13, 14": a fused group in the log.
template <typename Group>
std::string GroupName(const Group& group) {
  std::vector<std::string> ids;
  for (const auto& lease : group) ids.push_back(absl::StrCat(lease->trial.id()));
  return absl::StrCat("trials ", absl::StrJoin(ids, ", "));
}

}  // namespace

Worker::Worker(SchedulerClient& client, Clock& clock, WorkerMetrics& metrics, WorkerOptions options)
    : client_(client),
      clock_(clock),
      metrics_(metrics),
      options_(std::move(options)),
      reporter_(client_, clock_, options_, leases_, worker_id_) {}

Worker::~Worker() = default;

bool Worker::draining() const {
  absl::MutexLock lock(&leases_.mu);
  return draining_;
}

void Worker::Drain() {
  absl::MutexLock lock(&leases_.mu);
  if (draining_) return;
  draining_ = true;
  drain_deadline_ = clock_.Now() + options_.grace_period;
  Log(absl::StrCat("draining: no new trials; running trials get ", absl::FormatDuration(options_.grace_period)));
}

void Worker::SleepUnlessDraining(absl::Duration d) {
  absl::MutexLock lock(&leases_.mu);
  leases_.mu.AwaitWithTimeout(absl::Condition(&draining_), d);
}

absl::StatusOr<absl::Duration> Worker::Register() {
  v1::RegisterWorkerRequest request;
  request.set_name(options_.name);
  request.set_hostname(options_.hostname);
  for (const SlotSpec& s : options_.slots) request.add_devices(s.device);
  absl::Duration backoff = options_.retry_min;
  bool logged = false;
  while (true) {
    absl::StatusOr<v1::RegisterWorkerResponse> r = client_.RegisterWorker(request);
    if (r.ok()) {
      worker_id_ = r->worker_id();
      absl::Duration interval = options_.heartbeat_interval > absl::ZeroDuration()
                                    ? options_.heartbeat_interval
                                    : absl::Milliseconds(r->heartbeat_interval_ms());
      if (interval <= absl::ZeroDuration()) interval = absl::Seconds(10);
      // Keep well inside the lease, whatever the scheduler says.
      if (r->lease_seconds() > 0) interval = std::min(interval, absl::Seconds(r->lease_seconds()) / 3);
      {
        absl::MutexLock lock(&leases_.mu);
        lease_hold_ = r->lease_seconds() > 0 ? absl::Seconds(r->lease_seconds()) * 3 / 4 : absl::InfiniteDuration();
      }
      Log(absl::StrCat("registered as worker ", r->worker_id(), " with ", options_.slots.size(),
                       " slot(s); heartbeat every ", absl::FormatDuration(interval)));
      return interval;
    }
    if (!IsRetryable(r.status())) return r.status();
    if (!logged) Log(absl::StrCat("scheduler unreachable, retrying registration: ", r.status().ToString()));
    logged = true;
    SleepUnlessDraining(backoff);
    if (draining()) return absl::CancelledError("drained before registering");
    backoff = std::min(backoff * 2, options_.retry_max);
  }
}

absl::Status Worker::Run() {
  if (options_.name.empty()) return absl::InvalidArgumentError("worker name is required");
  if (options_.slots.empty()) return absl::InvalidArgumentError("no slots: give --cpu-slots or --gpus");
  if (options_.trainer_path.empty()) return absl::InvalidArgumentError("no trainer path");
  if (options_.fuse < 1 || options_.fuse > schema::kMaxFusedTrials) {
    return absl::InvalidArgumentError(
        absl::StrCat("fuse: ", options_.fuse, " is not in [1, ", schema::kMaxFusedTrials, "]"));
  }
  if (options_.fuse > 1 && options_.work_dir.find(',') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("work_dir: ", QuoteForError(options_.work_dir),
                                                   " holds a comma, which fused trials cannot pass to the trainer"));
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.work_dir, ec);
  if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create work dir ", options_.work_dir, ": ", ec.message()));
  for (const SlotSpec& s : options_.slots) metrics_.AddDevice(s.device);

  absl::StatusOr<absl::Duration> heartbeat_interval = Register();
  if (absl::IsCancelled(heartbeat_interval.status())) {
    Log("drained before registering, exiting");
    return absl::OkStatus();
  }
  if (!heartbeat_interval.ok()) return heartbeat_interval.status();

  std::thread heartbeat([this, interval = *heartbeat_interval] { HeartbeatLoop(interval); });
  std::thread reporter([this] { reporter_.Loop(stop_background_); });
  std::vector<std::thread> slots;
  for (size_t i = 0; i < options_.slots.size(); ++i) slots.emplace_back([this, i] { RunSlot(static_cast<int>(i)); });
  for (std::thread& t : slots) t.join();

  // Every process has ended: deliver what is left (results, progress of
  // handed-back trials) while the heartbeat keeps the leases alive.
  {
    absl::MutexLock lock(&leases_.mu);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(leases_.mu) {
      for (const auto& [id, l] : leases_.by_id) {
        if (!l->lost && (l->state == LeaseState::kFinishing || !l->progress.empty())) return false;
      }
      return true;
    };
    if (!leases_.mu.AwaitWithTimeout(absl::Condition(&settled), options_.final_flush_timeout)) {
      int left = 0;
      for (const auto& [id, l] : leases_.by_id) left += l->state == LeaseState::kFinishing;
      Log(absl::StrCat("scheduler unreachable: ", left, " trial result(s) not delivered; their leases will "
                       "expire and the trials will be re-queued"));
    }
  }
  stop_background_.Notify();
  reporter.join();
  heartbeat.join();
  Log("drained, exiting");
  return absl::OkStatus();
}

// ---- slots ----

Worker::Group Worker::LeaseGroup() {
  {
    absl::MutexLock lock(&leases_.mu);
    if (draining_) return {};
    ++leases_.lease_calls;
  }
  v1::LeaseTrialRequest request;
  request.set_worker_id(worker_id_);
  request.set_max_trials(options_.fuse);
  const absl::Time sent = clock_.Now();
  absl::StatusOr<v1::LeaseTrialResponse> r = client_.LeaseTrial(request);
  {
    absl::MutexLock lock(&leases_.mu);
    --leases_.lease_calls;
  }
  reporter_.NoteRpc(r.status(), "LeaseTrial");
  if (absl::IsNotFound(r.status())) {
    // The scheduler does not know this worker (its database was replaced):
    // register again; the old id's leases are gone anyway.
    absl::MutexLock lock(&register_mu_);
    if (worker_id_ == request.worker_id()) {  // not yet done by another slot
      Log(absl::StrCat("scheduler does not know worker ", request.worker_id(), ": registering again"));
      (void)Register();
    }
    return {};
  }
  if (!r.ok() || !r->leased()) return {};
  Group group;
  auto add = [&](const v1::Trial& trial) {
    auto lease = std::make_shared<Lease>();
    lease->trial = trial;
    group.push_back(std::move(lease));
  };
  add(r->trial());
  for (const v1::Trial& t : r->fused_trials()) add(t);
  absl::MutexLock lock(&leases_.mu);
  for (const LeasePtr& lease : group) {
    lease->held_until = sent + lease_hold_;
    leases_.by_id[lease->trial.id()] = lease;
  }
  return group;
}

void Worker::RunSlot(int slot) {
  Group next;
  absl::Duration poll = options_.poll_min;
  std::optional<absl::Time> idle_since;
  while (true) {
    Group leased = std::move(next);
    next.clear();
    if (leased.empty()) {
      if (draining()) break;
      leased = LeaseGroup();
      if (leased.empty()) {
        SleepUnlessDraining(poll);
        poll = std::min(poll * 2, options_.poll_max);
        continue;
      }
      poll = options_.poll_min;
    }
    // Each lease of the group on its own: lost ones are dropped, cancelled
    // ones finished, all handed back when draining; the rest run.
    Group run;
    for (const LeasePtr& lease : leased) {
      bool cancelled = false;
      {
        absl::MutexLock lock(&leases_.mu);
        if (lease->lost) {
          leases_.Erase(lease->trial.id(), lease.get());
          continue;
        }
        cancelled = lease->cancel_requested;
        if (!cancelled && !draining_) lease->state = LeaseState::kRunning;
      }
      if (cancelled) {
        Log(absl::StrCat(LeaseName(lease->trial), " CANCELLED before it started"));
        TrialVerdict verdict;
        verdict.outcome = v1::TRIAL_CANCELLED;
        QueueFinish(lease, verdict);
        metrics_.TrialEnded(lease->trial.id(), v1::TRIAL_CANCELLED);
        continue;
      }
      if (lease->state != LeaseState::kRunning) {  // draining
        QueueFinish(lease, InterruptionVerdict(schema::kWorkerDrained,
                                               "handed back unstarted: the worker was drained"));
        continue;
      }
      run.push_back(lease);
    }
    if (!run.empty()) next = RunGroup(slot, run, &idle_since);
  }
}

Worker::Group Worker::RunGroup(int slot, const Group& group, std::optional<absl::Time>* idle_since) {
  const SlotSpec& spec = options_.slots[slot];
  std::vector<TrialLaunch> launches;
  for (const LeasePtr& lease : group) launches.push_back(MakeTrialLaunch(options_, spec, lease->trial));
  const std::optional<int64_t> oom_kills_before = ReadOomKills(options_.memory_events_file);
  absl::StatusOr<std::unique_ptr<TrialProcess>> started = StartTrainer(options_, launches);
  if (!started.ok()) {
    const TrialVerdict verdict = StartFailureVerdict(started.status());
    for (const LeasePtr& lease : group) {
      Log(absl::StrCat(LeaseName(lease->trial), ": cannot start the trainer: ", started.status().ToString()));
      QueueFinish(lease, verdict);
      metrics_.TrialEnded(lease->trial.id(), verdict.outcome);
    }
    return {};
  }
  TrialProcess& proc = **started;
  // The slot's gap: from the previous trainer's exit to this one's start.
  if (idle_since->has_value()) metrics_.SlotIdle(absl::Now() - **idle_since);
  metrics_.SlotBusy(spec.device, true);
  for (const LeasePtr& lease : group) metrics_.TrialStarted(lease->trial, slot, spec.device);
  if (group.size() == 1) {
    const v1::TrainConfig& config = launches[0].config;
    Log(absl::StrCat(LeaseName(group[0]->trial), " started on ", config.device(), " slot ", slot, " (pid ",
                     proc.pid(), ", ", config.placement(), " warmup=", config.warmup_steps(), " lr=", config.lr(),
                     " seed=", config.seed(), ")"));
  } else {
    Log(absl::StrCat(GroupName(group), " fused on ", spec.device, " slot ", slot, " (pid ", proc.pid(), ", ",
                     launches[0].config.placement(), ")"));
    for (const TrialLaunch& l : launches) {
      Log(absl::StrCat("  fused trial ", &l - launches.data(), ": ", l.dir, " warmup=", l.config.warmup_steps(),
                       " lr=", l.config.lr(), " seed=", l.config.seed()));
    }
  }
  GroupSupervisor supervisor(static_cast<int>(group.size()), clock_.Now(), launches[0].config.steps(),
                             SupervisorLimits{options_.trial_timeout, options_.stall_timeout, options_.kill_after,
                                              options_.prefetch_lead},
                             proc.pid());
  Group next = Supervise(proc, group, launches, supervisor);
  *idle_since = absl::Now();
  metrics_.SlotBusy(spec.device, false);
  const bool oom_killed = OomKillsGrew(oom_kills_before, ReadOomKills(options_.memory_events_file));
  for (size_t i = 0; i < group.size(); ++i) {
    const GroupMember& run = supervisor.member(static_cast<int>(i));
    if (!run.concluded) Conclude(group[i], run, proc, oom_killed, launches[i].dir);
  }
  return next;
}

LeaseFlags Worker::FlagsOf(Lease& lease, absl::Time now) {
  absl::MutexLock lock(&leases_.mu);
  // Why it could not be renewed, as it stood when the worker gave it up.
  if (now >= lease.held_until && !lease.expired_database_down.has_value()) {
    lease.expired_database_down = renewal_database_down_;
  }
  return LeaseFlags{lease.lost, lease.cancel_requested, draining_ && now >= drain_deadline_, now >= lease.held_until,
                    !lease.refused.empty()};
}

Worker::Group Worker::Supervise(TrialProcess& proc, const Group& group, const std::vector<TrialLaunch>& launches,
                                GroupSupervisor& supervisor) {
  Group next;
  std::vector<std::string> lines;
  std::vector<LeaseFlags> flags(group.size());
  while (!proc.done()) {
    lines.clear();
    proc.Poll(absl::Milliseconds(100), &lines);
    const absl::Time now = clock_.Now();
    for (const std::string& line : lines) {
      const RoutedLine routed = supervisor.OnLine(line, now);
      if (!routed.log.empty()) Log(absl::StrCat(LeaseName(group[0]->trial), ": ", routed.log));
      if (routed.member >= 0) RecordEvent(*group[routed.member], routed.event, now);
    }
    for (int i = 0; i < supervisor.size(); ++i) {
      if (!supervisor.member(i).concluded) flags[i] = FlagsOf(*group[i], now);
    }
    const GroupAction action = supervisor.OnPoll(now, proc.exited(), flags);
    for (const GroupLog& l : action.log) {
      Log(absl::StrCat(l.member < 0 ? GroupName(group) : LeaseName(group[l.member]->trial), ": ", l.text));
    }
    if (action.signal != 0) proc.Signal(action.signal);
    for (int i : action.cancel) {
      const absl::Status written = proc.WriteLine(absl::StrCat("cancel ", i));
      if (!written.ok()) {
        Log(absl::StrCat(LeaseName(group[i]->trial), ": cannot tell the trainer to stop it: ", written.message()));
      }
    }
    for (int i : action.conclude) {
      Conclude(group[i], supervisor.member(i), proc, /*oom_killed=*/false, launches[i].dir);
    }
    if (action.prefetch) next = LeaseGroup();
  }
  return next;
}

void Worker::RecordEvent(Lease& lease, const v1::TrainEvent& event, absl::Time now) {
  metrics_.OnEvent(lease.trial.id(), event);
  if (event.type() == "final") return;
  absl::MutexLock lock(&leases_.mu);
  lease.progress.Add(event, now);
}

void Worker::Conclude(const LeasePtr& lease, const GroupMember& run, const TrialProcess& proc, bool oom_killed,
                      const std::string& dir) {
  const v1::Trial& trial = lease->trial;
  TrialEnd end = run.End(ProcessEnd{proc.term_signal(), proc.ExitDescription(), proc.stderr_tail(), oom_killed});
  {
    absl::MutexLock lock(&leases_.mu);
    end.database_down = lease->expired_database_down.value_or(renewal_database_down_);
    // Given up for want of renewal: reported even if the scheduler has since
    // said the lease is lost, so that it records the interruption's cause.
    if (end.stop == TrialStop::kExpired) lease->lost = false;
    // Refused progress makes the attempt the trial's failure, even when the
    // refusal came after the final event or the drain's stop.
    if (!lease->refused.empty() && RefusalDecides(end.stop)) {
      end.stop = TrialStop::kRefused;
      end.stop_reason = lease->refused;
    }
    lease->stop = end.stop;
  }
  const TrialVerdict verdict = DecideOutcome(end);
  if (verdict.action == TrialVerdict::Action::kForget) {
    Log(absl::StrCat(LeaseName(trial), ": lease lost; stopped (",
                     proc.exited() ? proc.ExitDescription() : "its fused trial ended", "), not reported"));
    metrics_.TrialEnded(trial.id(), v1::TRIAL_STATE_UNSPECIFIED);
    absl::MutexLock lock(&leases_.mu);
    leases_.Erase(trial.id(), lease.get());
    return;
  }
  const std::string& error = verdict.result.error();
  if (verdict.retry && verdict.interruption.empty()) {
    Log(absl::StrCat(LeaseName(trial), " failed at step ", run.last_step, ": ", error,
                     "; the trial's own failure, run again while attempts remain"));
  } else if (!verdict.retry) {
    Log(absl::StrCat(LeaseName(trial), " ", schema::TrialStateName(verdict.outcome), " at step ", run.last_step,
                     error.empty() ? "" : absl::StrCat(": ", error)));
  }  // an interruption: QueueFinish logs it
  QueueFinish(lease, verdict);
  metrics_.TrialEnded(trial.id(), verdict.retry ? v1::TRIAL_STATE_UNSPECIFIED : verdict.outcome);
  std::error_code ec;
  if (verdict.outcome != v1::TRIAL_FAILED && !options_.keep_trial_dirs) std::filesystem::remove_all(dir, ec);
}

void Worker::QueueFinish(const LeasePtr& lease, const TrialVerdict& verdict) {
  if (!verdict.interruption.empty()) {
    Log(absl::StrCat(LeaseName(lease->trial), " interrupted (", verdict.interruption, "): ", verdict.result.error(),
                     "; the scheduler runs it again without counting an attempt"));
    metrics_.Interrupted(verdict.interruption);
  }
  absl::MutexLock lock(&leases_.mu);
  v1::FinishTrialRequest& f = lease->finish;
  f.set_trial_id(lease->trial.id());
  f.set_attempt(lease->trial.attempts());
  f.set_outcome(verdict.outcome);
  f.set_retry(verdict.retry);
  f.set_interruption(verdict.interruption);
  *f.mutable_result() = verdict.result;
  lease->state = LeaseState::kFinishing;
}

// ---- heartbeat ----

void Worker::HeartbeatLoop(absl::Duration interval) {
  bool failing = false;
  while (!stop_background_.WaitForNotificationWithTimeout(interval)) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker_id_);
    {
      absl::MutexLock lock(&leases_.mu);
      for (const auto& [id, l] : leases_.by_id) {
        if (l->lost) continue;
        v1::TrialLease* t = request.add_leases();
        t->set_trial_id(id);
        t->set_attempt(l->trial.attempts());
      }
    }
    const absl::Time sent = clock_.Now();
    absl::StatusOr<v1::HeartbeatResponse> r = client_.Heartbeat(request);
    reporter_.NoteRpc(r.status(), "Heartbeat");
    if (!r.ok()) {
      if (!failing && !IsRetryable(r.status())) Log(absl::StrCat("heartbeat refused: ", r.status().ToString()));
      failing = true;
      if (IsDatabaseUnavailable(r.status())) {
        absl::MutexLock lock(&leases_.mu);
        renewal_database_down_ = true;
      }
      continue;
    }
    failing = false;
    absl::MutexLock lock(&leases_.mu);
    renewal_database_down_ = false;
    for (const v1::TrialLease& t : request.leases()) {  // renewed, unless lost below
      auto it = leases_.by_id.find(t.trial_id());
      if (it != leases_.by_id.end()) it->second->held_until = sent + lease_hold_;
    }
    for (int64_t id : r->cancelled_trial_ids()) {
      auto it = leases_.by_id.find(id);
      if (it == leases_.by_id.end() || it->second->cancel_requested) continue;
      Log(absl::StrCat(LeaseName(it->second->trial), ": cancelled"));
      it->second->cancel_requested = true;
    }
    for (int64_t id : r->lost_trial_ids()) {
      auto it = leases_.by_id.find(id);
      if (it == leases_.by_id.end()) continue;
      // Finished meanwhile: the scheduler no longer counts it as leased.
      if (it->second->state == LeaseState::kFinishing) continue;
      Log(absl::StrCat(LeaseName(it->second->trial), ": lease lost"));
      it->second->lost = true;
      if (it->second->state != LeaseState::kRunning) leases_.by_id.erase(it);
    }
  }
}

}  // namespace normsweep::worker
