// How a slot launches a group of trials (one, or several fused) in one
// trainer process: each trial's directory and config, the trainer's one
// command line, the start. Called by the slot thread that runs the group.
#ifndef NORMSWEEP_WORKER_TRIAL_LAUNCH_H_
#define NORMSWEEP_WORKER_TRIAL_LAUNCH_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "normsweep/v1/sweep.pb.h"
#include "normsweep/v1/train.pb.h"
#include "worker/trial_process.h"
#include "worker/worker_options.h"

namespace normsweep::worker {

// How one trial is run on one slot: its directory (config.json, stderr.log,
// checkpoint) and its config with the slot's device and threads.
struct TrialLaunch {
  std::string dir;
  v1::TrainConfig config;
};
TrialLaunch MakeTrialLaunch(const WorkerOptions& options, const SlotSpec& slot, const v1::Trial& trial);

// The trainer's command line for one trial or a fused run of several:
// `train --config A,B,... --events -`, and `--checkpoint-out` with one item
// per trial (empty for a trial that writes none) when any of them writes one.
std::vector<std::string> TrainerArgv(const WorkerOptions& options, const std::vector<TrialLaunch>& launches);

// Writes each trial's config into its directory and starts the trainer on
// TrainerArgv (the group's stderr.log is one file, linked into every
// trial's dir; a fused trainer gets a stdin for `cancel I`).
absl::StatusOr<std::unique_ptr<TrialProcess>> StartTrainer(const WorkerOptions& options,
                                                           const std::vector<TrialLaunch>& launches);

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_LAUNCH_H_
