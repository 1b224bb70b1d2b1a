#include "tests/e2e/chaos_watchers.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/common/read_file.h"
#include "tests/common/trainer_processes.h"

namespace normsweep::chaos {
namespace {

constexpr absl::Duration kPollPeriod = absl::Milliseconds(100);
constexpr absl::Duration kSamplePeriod = absl::Milliseconds(25);
// A trainer whose parent is not a worker for this long outlived its worker.
constexpr absl::Duration kOrphanAfter = absl::Seconds(1);

using testing::ReadFile;

bool IsWorker(pid_t pid) {
  const std::string cmdline = ReadFile(absl::StrCat("/proc/", pid, "/cmdline"));
  const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
  return argv0.size() >= 16 && argv0.compare(argv0.size() - 16, 16, "normsweep-worker") == 0;
}

}  // namespace

std::string Seconds(absl::Duration d) { return absl::StrFormat("%.2f s", absl::ToDoubleSeconds(d)); }

void SweepObserver::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

void SweepObserver::Run() {
  do {
    const absl::Time at = absl::Now();
    absl::StatusOr<std::vector<v1::Trial>> trials = client_.ListTrials(sweep_id_);
    absl::MutexLock lock(&mu_);
    if (!trials.ok()) {
      ++failed_;
      continue;
    }
    Poll p{at, {}};
    for (const v1::Trial& t : *trials) p.trials[t.id()] = {t.state(), t.attempts(), t.last_step()};
    polls_.push_back(std::move(p));
  } while (!stop_.WaitForNotificationWithTimeout(kPollPeriod));
}

void TrainerSampler::Stop() {
  if (!thread_.joinable()) return;
  stop_.Notify();
  thread_.join();
}

void TrainerSampler::Run() {
  const absl::Time start = absl::Now();
  std::map<pid_t, absl::Time> orphaned_since;
  std::set<pid_t> reported;
  do {
    const absl::Time now = absl::Now();
    const std::vector<testing::TrainerProcess> trainers = testing::ListTrainers(needle_);
    std::map<int64_t, std::vector<const testing::TrainerProcess*>> by_trial;
    std::map<pid_t, bool> worker_cache;
    std::map<pid_t, absl::Time> still_orphaned;
    for (const testing::TrainerProcess& t : trainers) {
      by_trial[t.trial_id].push_back(&t);
      auto [it, inserted] = worker_cache.emplace(t.parent, false);
      if (inserted) it->second = IsWorker(t.parent);
      if (!it->second) {
        auto since = orphaned_since.find(t.pid);
        still_orphaned[t.pid] = since == orphaned_since.end() ? now : since->second;
      }
    }
    orphaned_since = std::move(still_orphaned);
    absl::MutexLock lock(&mu_);
    ++samples_;
    most_at_once_ = std::max(most_at_once_, static_cast<int>(trainers.size()));
    for (const testing::TrainerProcess& t : trainers) seen_.insert(t.pid);
    for (const auto& [trial, list] : by_trial) {
      if (list.size() < 2) continue;
      std::vector<std::string> who;
      for (const testing::TrainerProcess* t : list) who.push_back(absl::StrCat(t->pid, " (attempt ", t->attempt, ")"));
      overlaps_.push_back(absl::StrCat("trial ", trial, ": pids ", absl::StrJoin(who, ", "), " at ",
                                       Seconds(now - start)));
    }
    for (const auto& [pid, since] : orphaned_since) {
      if (now - since >= kOrphanAfter && reported.insert(pid).second) {
        orphans_.push_back(absl::StrCat("pid ", pid, " has had no worker parent for ", Seconds(now - since)));
      }
    }
  } while (!stop_.WaitForNotificationWithTimeout(kSamplePeriod));
}

}  // namespace normsweep::chaos
