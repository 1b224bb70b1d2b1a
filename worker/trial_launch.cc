#include "worker/trial_launch.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/schema/train_config.h"

namespace normsweep::worker {

TrialLaunch MakeTrialLaunch(const WorkerOptions& options, const SlotSpec& slot, const v1::Trial& trial) {
  TrialLaunch launch;
  launch.dir = absl::StrCat(options.work_dir, "/trial-", trial.id(), "-", trial.attempts());
  launch.config = trial.config();
  launch.config.set_threads(slot.threads);
  launch.config.set_device(slot.device);
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

absl::StatusOr<std::unique_ptr<TrialProcess>> StartTrainer(const WorkerOptions& options,
                                                           const std::vector<TrialLaunch>& launches) {
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
  return TrialProcess::Start(TrainerArgv(options, launches), log, /*with_stdin=*/launches.size() > 1);
}

}  // namespace normsweep::worker
