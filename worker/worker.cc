#include "worker/worker.h"

#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/quote.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/interruptions.h"
#include "proto/schema/state_names.h"
#include "proto/schema/train_config.h"
#include "worker/memory_events.h"
#include "worker/trial_process.h"
#include "worker/trial_supervisor.h"

namespace normsweep::worker {

namespace {

void Log(const std::string& message) { LogLine("normsweep-worker", message); }

std::string LeaseName(const v1::Trial& t) { return absl::StrCat("trial ", t.id(), " (attempt ", t.attempts(), ")"); }

// "trials 12, 13, 14": a fused group in the log.
template <typename Group>
std::string GroupName(const Group& group) {
  std::vector<std::string> ids;
  for (const auto& lease : group) ids.push_back(absl::StrCat(lease->trial.id()));
  return absl::StrCat("trials ", absl::StrJoin(ids, ", "));
}

}  // namespace

TrialLaunch MakeTrialLaunch(const WorkerOptions& options, const SlotSpec& slot, const v1::Trial& trial) {
  TrialLaunch launch;
  launch.dir = absl::StrCat(options.work_dir, "/trial-", trial.id(), "-", trial.attempts());
  launch.config = trial.config();
  launch.config.set_threads(slot.threads);
  launch.config.set_device(slot.device);
  launch.argv = TrainerArgv(options, {launch});
  return launch;
}

std::vector<std::string> TrainerArgv(const WorkerOptions& options, const std::vector<TrialLaunch>& launches) {
  std::vector<std::string> configs, checkpoints;
  bool any_checkpoint = false;
  for (const TrialLaunch& l : launches) {
    configs.push_back(l.dir + "/config.json");
    const bool writes = l.config.checkpoint_every() > 0;
    checkpoints.push_back(writes ? l.dir + "/checkpoint.safetensors" : "");
    any_checkpoint |= writes;
  }
  std::vector<std::string> argv = {options.trainer_path, "train", "--config", absl::StrJoin(configs, ","),
                                   "--events", "-"};
  if (any_checkpoint) {
    argv.push_back("--checkpoint-out");
    argv.push_back(absl::StrJoin(checkpoints, ","));
  }
  return argv;
}

Worker::Worker(SchedulerClient& client, Clock& clock, WorkerMetrics& metrics, WorkerOptions options)
    : client_(client), clock_(clock), metrics_(metrics), options_(std::move(options)) {}

Worker::~Worker() = default;

bool Worker::draining() const {
  absl::MutexLock lock(&mu_);
  return draining_;
}

void Worker::Drain() {
  absl::MutexLock lock(&mu_);
  if (draining_) return;
  draining_ = true;
  drain_deadline_ = clock_.Now() + options_.grace_period;
  Log(absl::StrCat("draining: no new trials; running trials get ", absl::FormatDuration(options_.grace_period)));
}

void Worker::SleepUnlessDraining(absl::Duration d) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&draining_), d);
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
        absl::MutexLock lock(&mu_);
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
  std::thread reporter([this] { ReporterLoop(); });
  std::vector<std::thread> slots;
  for (size_t i = 0; i < options_.slots.size(); ++i) slots.emplace_back([this, i] { RunSlot(static_cast<int>(i)); });
  for (std::thread& t : slots) t.join();

  // Every process has ended: deliver what is left (results, progress of
  // handed-back trials) while the heartbeat keeps the leases alive.
  {
    absl::MutexLock lock(&mu_);
    auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      for (const auto& [id, l] : leases_) {
        if (!l->lost && (l->state == LeaseState::kFinishing || !l->progress.empty())) return false;
      }
      return true;
    };
    if (!mu_.AwaitWithTimeout(absl::Condition(&settled), options_.final_flush_timeout)) {
      int left = 0;
      for (const auto& [id, l] : leases_) left += l->state == LeaseState::kFinishing;
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
    absl::MutexLock lock(&mu_);
    if (draining_) return {};
    ++lease_calls_;
  }
  v1::LeaseTrialRequest request;
  request.set_worker_id(worker_id_);
  request.set_max_trials(options_.fuse);
  const absl::Time sent = clock_.Now();
  absl::StatusOr<v1::LeaseTrialResponse> r = client_.LeaseTrial(request);
  {
    absl::MutexLock lock(&mu_);
    --lease_calls_;
  }
  NoteRpc(r.status(), "LeaseTrial");
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
  absl::MutexLock lock(&mu_);
  for (const LeasePtr& lease : group) {
    lease->held_until = sent + lease_hold_;
    leases_[lease->trial.id()] = lease;
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
        absl::MutexLock lock(&mu_);
        if (lease->lost) {
          EraseLease(lease->trial.id(), lease.get());
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
  if (launches.size() > 1) {
    const std::vector<std::string> argv = TrainerArgv(options_, launches);
    for (TrialLaunch& l : launches) l.argv = argv;
  }
  const std::optional<int64_t> oom_kills_before = ReadOomKills(options_.memory_events_file);
  absl::StatusOr<std::unique_ptr<TrialProcess>> started = StartTrainer(launches);
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
  std::vector<Supervised> runs;
  std::vector<bool> concluded;
  Group next = Supervise(proc, group, launches, &runs, &concluded);
  *idle_since = absl::Now();
  metrics_.SlotBusy(spec.device, false);
  const bool oom_killed = OomKillsGrew(oom_kills_before, ReadOomKills(options_.memory_events_file));
  for (size_t i = 0; i < group.size(); ++i) {
    if (!concluded[i]) Conclude(group[i], runs[i], proc, oom_killed, launches[i].dir);
  }
  return next;
}

absl::StatusOr<std::unique_ptr<TrialProcess>> Worker::StartTrainer(const std::vector<TrialLaunch>& launches) {
  for (const TrialLaunch& launch : launches) {
    std::error_code ec;
    std::filesystem::create_directories(launch.dir, ec);
    if (ec) return absl::FailedPreconditionError(absl::StrCat("cannot create ", launch.dir, ": ", ec.message()));
    std::ofstream(launch.dir + "/config.json") << schema::TrainConfigToJson(launch.config) << "\n";
  }
  const std::string log = launches[0].dir + "/stderr.log";
  // One log for the group, in every trial's directory: whichever of them
  // is kept (a FAILED one) holds it.
  std::ofstream(log, std::ios::app).close();
  for (size_t i = 1; i < launches.size(); ++i) {
    std::error_code ec;
    std::filesystem::create_hard_link(log, launches[i].dir + "/stderr.log", ec);
  }
  return TrialProcess::Start(launches[0].argv, log, /*with_stdin=*/launches.size() > 1);
}

LeaseFlags Worker::FlagsOf(Lease& lease, absl::Time now) {
  absl::MutexLock lock(&mu_);
  // Why it could not be renewed, as it stood when the worker gave it up.
  if (now >= lease.held_until && !lease.expired_database_down.has_value()) {
    lease.expired_database_down = renewal_database_down_;
  }
  return LeaseFlags{lease.lost, lease.cancel_requested, draining_ && now >= drain_deadline_, now >= lease.held_until,
                    !lease.refused.empty()};
}

Worker::Group Worker::Supervise(TrialProcess& proc, const Group& group, const std::vector<TrialLaunch>& launches,
                                std::vector<Supervised>* runs, std::vector<bool>* concluded) {
  const size_t k = group.size();
  const int steps = launches[0].config.steps();
  concluded->assign(k, false);
  const bool fused = k > 1;
  const absl::Time started = clock_.Now();
  const SupervisorLimits limits{options_.trial_timeout, options_.stall_timeout, options_.kill_after,
                                options_.prefetch_lead};
  std::vector<TrialSupervisor> supervisors(k, TrialSupervisor(started, steps, limits));
  runs->assign(k, Supervised());
  std::vector<bool> wants_prefetch(k, false);
  bool prefetched = false;
  Group next;
  // Fused: when every trial's final event was in (the process should exit).
  absl::Time all_final_at = absl::InfiniteFuture();
  bool lingering_killed = false;
  // Fused: a stopped trial ends at its next step in the trainer's lock step,
  // after its siblings' steps and evaluations, so its SIGKILL (which would
  // take its siblings with it) waits kill_after plus twice the longest gap
  // seen between two events of one trial, while any sibling still trains.
  std::vector<absl::Time> last_event_at(k, started), stopped_at(k, absl::InfiniteFuture());
  absl::Duration longest_gap = absl::ZeroDuration();
  int bad_lines = 0;
  auto name = [&](size_t i) { return LeaseName(group[i]->trial); };
  std::vector<std::string> lines;
  while (!proc.done()) {
    lines.clear();
    proc.Poll(absl::Milliseconds(100), &lines);
    const absl::Time now = clock_.Now();
    for (const std::string& line : lines) {
      if (line.empty()) continue;
      absl::StatusOr<v1::TrainEvent> event = schema::TrainEventFromJson(line);
      const int index = event.ok() ? event->fused_index() : -1;
      if (index < 0 || static_cast<size_t>(index) >= k) {
        if (bad_lines++ == 0) {
          Log(absl::StrCat(name(0), ": ignoring ", event.ok() ? "an event of no trial of this run" : "a non-event line",
                           ": ", KeepEnd(line, 200)));
        }
        continue;
      }
      supervisors[index].OnEvent(now);
      longest_gap = std::max(longest_gap, now - last_event_at[index]);
      last_event_at[index] = now;
      RecordEvent(*group[index], *event, now, &(*runs)[index]);
    }
    bool kill = false;
    std::vector<size_t> kill_asks;  // leases whose supervisors ask for SIGKILL
    std::vector<size_t> stopping;  // leases the supervisors stop at this poll
    for (size_t i = 0; i < k; ++i) {
      if ((*concluded)[i]) continue;
      const bool final_seen = (*runs)[i].final_event.has_value();
      // A fused trial with its final event is over, whatever its siblings do.
      const bool ended = proc.exited() || (fused && final_seen);
      const PollAction action = supervisors[i].OnPoll(
          PollState{now, final_seen, ended, (*runs)[i].last_step, FlagsOf(*group[i], now)});
      if (!action.log.empty()) Log(absl::StrCat(name(i), ": ", action.log));
      if (action.signal == SIGKILL) kill_asks.push_back(i);
      if (action.signal == SIGTERM) {
        stopping.push_back(i);
        stopped_at[i] = now;
      }
      if (action.prefetch) wants_prefetch[i] = true;
    }
    // A lease still training: neither stopped by the worker nor ended.
    bool any_training = false, every_near_end = true, any_near_end = false;
    for (size_t i = 0; i < k; ++i) {
      const bool training = supervisors[i].stop() == TrialStop::kNone && !(*runs)[i].final_event.has_value();
      any_training |= training;
      if (supervisors[i].stop() == TrialStop::kNone) {
        every_near_end &= wants_prefetch[i];
        any_near_end |= wants_prefetch[i];
      }
    }
    for (size_t i : kill_asks) {
      // While siblings train on, give the trainer its lock step's time.
      const bool wait = fused && any_training && stopped_at[i] != absl::InfiniteFuture() &&
                        now - stopped_at[i] <= options_.kill_after + 2 * longest_gap;
      if (!wait) kill = true;
    }
    if (kill) {
      if (fused && !proc.exited()) {
        Log(absl::StrCat(GroupName(group), ": SIGKILL to the fused process (pid ", proc.pid(), ")"));
      }
      proc.Signal(SIGKILL);
    } else if (!stopping.empty() && !any_training) {
      proc.Signal(SIGTERM);  // nothing left to train: the whole process
    } else {
      for (size_t i : stopping) {
        const absl::Status written = proc.WriteLine(absl::StrCat("cancel ", i));
        if (!written.ok()) Log(absl::StrCat(name(i), ": cannot tell the trainer to stop it: ", written.message()));
      }
    }
    if (fused && !any_training && !proc.exited()) {
      bool all_final = true;
      for (const Supervised& r : *runs) all_final &= r.final_event.has_value();
      if (all_final && all_final_at == absl::InfiniteFuture()) all_final_at = now;
      if (all_final && !lingering_killed && now - all_final_at > options_.kill_after) {
        Log(absl::StrCat(GroupName(group), ": still running ", absl::FormatDuration(options_.kill_after),
                         " after every final event; SIGKILL"));
        proc.Signal(SIGKILL);
        lingering_killed = true;
      }
    }
    // A fused trial whose final event is in is over: its outcome goes now,
    // not when its siblings end. Not a FAILED one: its error may need the
    // process's exit status and stderr.
    for (size_t i = 0; fused && i < k; ++i) {
      Supervised& run = (*runs)[i];
      if ((*concluded)[i] || !run.final_event.has_value() || run.final_event->outcome() == "FAILED") continue;
      run.stop = supervisors[i].stop();
      run.stop_reason = supervisors[i].stop_reason();
      Conclude(group[i], run, proc, /*oom_killed=*/false, launches[i].dir);
      (*concluded)[i] = true;
    }
    if (!prefetched && any_near_end && every_near_end) {
      prefetched = true;
      next = LeaseGroup();
    }
  }
  for (size_t i = 0; i < k; ++i) {
    (*runs)[i].stop = supervisors[i].stop();
    (*runs)[i].stop_reason = supervisors[i].stop_reason();
  }
  return next;
}

void Worker::RecordEvent(Lease& lease, const v1::TrainEvent& event, absl::Time now, Supervised* run) {
  metrics_.OnEvent(lease.trial.id(), event);
  if (event.type() == "final") {
    run->final_event = event;
    return;
  }
  if (event.type() == "step") run->last_step = event.step();
  // l0, for a final event without init_val_loss (or no final event at all).
  if (event.type() == "eval" && event.step() == 0 && event.has_val_loss()) run->step0_val_loss = event.val_loss();
  absl::MutexLock lock(&mu_);
  lease.progress.Add(event, now);
}

void Worker::Conclude(const LeasePtr& lease, const Supervised& run, const TrialProcess& proc, bool oom_killed,
                      const std::string& dir) {
  const v1::Trial& trial = lease->trial;
  TrialEnd end{run.final_event,
               ProcessEnd{proc.term_signal(), proc.ExitDescription(), proc.stderr_tail(), oom_killed},
               run.stop,
               run.stop_reason,
               run.step0_val_loss};
  {
    absl::MutexLock lock(&mu_);
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
    absl::MutexLock lock(&mu_);
    EraseLease(trial.id(), lease.get());
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
  absl::MutexLock lock(&mu_);
  v1::FinishTrialRequest& f = lease->finish;
  f.set_trial_id(lease->trial.id());
  f.set_attempt(lease->trial.attempts());
  f.set_outcome(verdict.outcome);
  f.set_retry(verdict.retry);
  f.set_interruption(verdict.interruption);
  *f.mutable_result() = verdict.result;
  lease->state = LeaseState::kFinishing;
}

void Worker::EraseLease(int64_t trial_id, const Lease* lease) {
  auto it = leases_.find(trial_id);
  if (it != leases_.end() && it->second.get() == lease) leases_.erase(it);
}

// ---- reporter ----

void Worker::NoteRpc(const absl::Status& status, const char* what) {
  if (status.ok()) {
    if (scheduler_unreachable_.exchange(false)) {
      Log("scheduler reachable again");
      // Everything waiting out a back-off goes now.
      absl::MutexLock lock(&mu_);
      for (auto& [id, l] : leases_) {
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

void Worker::ReporterLoop() {
  const absl::Duration tick = std::min(absl::Milliseconds(50), options_.flush_interval);
  do {
    ReportPass();
  } while (!stop_background_.WaitForNotificationWithTimeout(tick));
  ReportPass();  // whatever arrived at the very end
}

void Worker::ReportPass() {
  std::vector<LeasePtr> due;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_.Now();
    for (auto it = leases_.begin(); it != leases_.end();) {
      Lease& l = *it->second;
      if (l.lost) {
        it = leases_.erase(it);
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

void Worker::Report(const LeasePtr& lease) {
  const int64_t id = lease->trial.id();
  auto fail = [&](const absl::Status& status, const char* what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (absl::IsFailedPrecondition(status) || absl::IsNotFound(status)) {
      Log(absl::StrCat(LeaseName(lease->trial), ": ", what, " refused, lease lost: ", status.message()));
      lease->lost = true;
      EraseLease(id, lease.get());
      return;
    }
    lease->backoff = std::clamp(lease->backoff * 2, options_.retry_min, options_.retry_max);
    lease->retry_at = clock_.Now() + lease->backoff;
  };
  // Progress first (the scheduler refuses it after FinishTrial), then the result.
  while (true) {
    v1::ReportProgressRequest request;
    PeekedBatch batch;
    bool finish = false;
    v1::FinishTrialRequest fin;
    {
      absl::MutexLock lock(&mu_);
      if (lease->lost) return;
      if (!lease->progress.empty()) {
        request.set_worker_id(worker_id_);
        request.set_trial_id(id);
        request.set_attempt(lease->trial.attempts());
        batch = lease->progress.Peek(BatchLimits::Api(options_.max_batch_points), &request);
      } else if (lease->state == LeaseState::kFinishing) {
        // A hand-back re-queues the trial at once: not while a LeaseTrial of
        // this worker's is in flight, which could be given it straight back
        // (and hand it back again, a second interruption).
        if (lease->finish.interruption() == schema::kWorkerDrained && lease_calls_ > 0) return;
        finish = true;
        fin = lease->finish;
        fin.set_worker_id(worker_id_);
      } else {
        return;
      }
    }
    if (finish) {
      absl::StatusOr<v1::FinishTrialResponse> r = client_.FinishTrial(fin);
      NoteRpc(r.status(), "FinishTrial");
      absl::MutexLock lock(&mu_);
      if (r.ok()) {
        EraseLease(id, lease.get());
      } else if (IsRetryable(r.status())) {
        fail(r.status(), "FinishTrial");
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
        continue;
      } else {
        Log(absl::StrCat(LeaseName(lease->trial), ": FinishTrial refused: ", r.status().ToString()));
        EraseLease(id, lease.get());
      }
      return;
    }
    absl::StatusOr<v1::ReportProgressResponse> r = client_.ReportProgress(request);
    NoteRpc(r.status(), "ReportProgress");
    absl::MutexLock lock(&mu_);
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
      if (!closing && !lease->progress.ShouldFlush(clock_.Now(), options_.flush_interval, options_.flush_points)) {
        return;
      }
    } else if (IsRetryable(r.status())) {
      fail(r.status(), "ReportProgress");
      return;
    } else if ((absl::IsFailedPrecondition(r.status()) || absl::IsNotFound(r.status())) &&
               lease->state == LeaseState::kFinishing && !lease->finish.interruption().empty()) {
      // An interrupted attempt whose lease the scheduler has already let
      // expire: its progress is moot, but FinishTrial still goes, so that the
      // scheduler records the interruption's cause (or refuses it too).
      lease->progress = ProgressBuffer();
      continue;
    } else if (absl::IsFailedPrecondition(r.status()) || absl::IsNotFound(r.status())) {
      fail(r.status(), "ReportProgress");
      return;
    } else if (absl::IsInvalidArgument(r.status())) {
      lease->progress.Ack(batch);
      RefuseProgress(*lease, r.status());
    } else {
      // A batch the scheduler will never take (a bug on one side): drop it
      // rather than retry forever.
      Log(absl::StrCat(LeaseName(lease->trial), ": progress batch refused, dropped: ", r.status().ToString()));
      lease->progress.Ack(batch);
    }
  }
}

void Worker::RefuseProgress(Lease& lease, const absl::Status& status) {
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

// ---- heartbeat ----

void Worker::HeartbeatLoop(absl::Duration interval) {
  bool failing = false;
  while (!stop_background_.WaitForNotificationWithTimeout(interval)) {
    v1::HeartbeatRequest request;
    request.set_worker_id(worker_id_);
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [id, l] : leases_) {
        if (l->lost) continue;
        v1::TrialLease* t = request.add_leases();
        t->set_trial_id(id);
        t->set_attempt(l->trial.attempts());
      }
    }
    const absl::Time sent = clock_.Now();
    absl::StatusOr<v1::HeartbeatResponse> r = client_.Heartbeat(request);
    NoteRpc(r.status(), "Heartbeat");
    if (!r.ok()) {
      if (!failing && !IsRetryable(r.status())) Log(absl::StrCat("heartbeat refused: ", r.status().ToString()));
      failing = true;
      if (IsDatabaseUnavailable(r.status())) {
        absl::MutexLock lock(&mu_);
        renewal_database_down_ = true;
      }
      continue;
    }
    failing = false;
    absl::MutexLock lock(&mu_);
    renewal_database_down_ = false;
    for (const v1::TrialLease& t : request.leases()) {  // renewed, unless lost below
      auto it = leases_.find(t.trial_id());
      if (it != leases_.end()) it->second->held_until = sent + lease_hold_;
    }
    for (int64_t id : r->cancelled_trial_ids()) {
      auto it = leases_.find(id);
      if (it == leases_.end() || it->second->cancel_requested) continue;
      Log(absl::StrCat(LeaseName(it->second->trial), ": cancelled"));
      it->second->cancel_requested = true;
    }
    for (int64_t id : r->lost_trial_ids()) {
      auto it = leases_.find(id);
      if (it == leases_.end()) continue;
      // Finished meanwhile: the scheduler no longer counts it as leased.
      if (it->second->state == LeaseState::kFinishing) continue;
      Log(absl::StrCat(LeaseName(it->second->trial), ": lease lost"));
      it->second->lost = true;
      if (it->second->state != LeaseState::kRunning) leases_.erase(it);
    }
  }
}

}  // namespace normsweep::worker
