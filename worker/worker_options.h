// What normsweep-worker is told on its command line (worker_main.cc fills
// this; the library never reads flags).
#ifndef NORMSWEEP_WORKER_WORKER_OPTIONS_H_
#define NORMSWEEP_WORKER_WORKER_OPTIONS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace normsweep::worker {

// One place where a trial runs: a GPU, or a share of the CPU cores.
struct SlotSpec {
  std::string device;  // "cpu" or "cuda:N" (TrainConfig.device)
  int threads = 1;     // TrainConfig.threads
};

struct WorkerOptions {
  std::string name;                 // RegisterWorker name (required)
  std::string hostname;             // RegisterWorker hostname
  std::vector<SlotSpec> slots;      // at least one
  std::string trainer_path;         // normsweep-train (or a stand-in in tests)
  std::string work_dir;             // per-trial config files and stderr logs
  // Fused trials: LeaseTrial asks for up to this many compatible trials,
  // which a slot trains in one trainer process (1..schema::kMaxFusedTrials;
  // 1 = one trial per process). With more than one, work_dir must hold no
  // comma (the trainer's path lists are comma-separated).
  int fuse = 1;

  // 0 = no limit. A trial running longer, or printing no event for longer,
  // is killed and reported FAILED.
  absl::Duration trial_timeout = absl::ZeroDuration();
  absl::Duration stall_timeout = absl::Minutes(10);
  // After SIGTERM (Drain), running trials get this long to finish.
  absl::Duration grace_period = absl::Seconds(30);
  // SIGTERM to a trial, then SIGKILL after this long.
  absl::Duration kill_after = absl::Seconds(3);

  // Progress goes out every flush_interval, or as soon as a trial has
  // flush_points points waiting; at most max_batch_points per call.
  absl::Duration flush_interval = absl::Milliseconds(500);
  int flush_points = 200;
  int max_batch_points = 2000;
  // Re-send back-off while the scheduler is unreachable.
  absl::Duration retry_min = absl::Milliseconds(250);
  absl::Duration retry_max = absl::Seconds(2);
  // Nothing to lease: poll again after poll_min, doubling up to poll_max.
  absl::Duration poll_min = absl::Milliseconds(200);
  absl::Duration poll_max = absl::Seconds(2);
  // Lease the slot's next trial once the running one is expected to end
  // within this long (from its step rate), so the slot does not wait for a
  // LeaseTrial round trip; not earlier, so that a lease is not held idle
  // while another worker's slot could run it.
  absl::Duration prefetch_lead = absl::Seconds(3);
  // 0 = use the interval RegisterWorker returns.
  absl::Duration heartbeat_interval = absl::ZeroDuration();
  // After the slots stop, pending FinishTrial/progress get this long.
  absl::Duration final_flush_timeout = absl::Seconds(10);
  // The cgroup v2 memory.events file whose oom_kill count tells an OOM kill
  // of the trainer from a SIGKILL from outside (memory_events.h); "" = the
  // worker cannot tell (every such SIGKILL is an external_signal).
  std::string memory_events_file;
  // Keep trial directories of trials that SUCCEEDED/DIVERGED/CANCELLED
  // (FAILED ones are always kept for inspection).
  bool keep_trial_dirs = false;
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_WORKER_OPTIONS_H_
