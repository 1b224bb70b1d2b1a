// The normsweep-train processes alive on this machine, read from /proc, for
// tests that check which trainers run (or that none is left behind). A
// worker runs each trial attempt as `normsweep-train train --config
// WORK/trial-ID-ATTEMPT/config.json ...`, so the command line names the
// trial and the attempt. Zombies (exited, not yet reaped) are left out.
#ifndef NORMSWEEP_TESTS_COMMON_TRAINER_PROCESSES_H_
#define NORMSWEEP_TESTS_COMMON_TRAINER_PROCESSES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace normsweep::testing {

struct TrainerProcess {
  pid_t pid = 0;
  pid_t parent = 0;       // the worker that started it
  std::string cmdline;    // arguments joined by spaces
  int64_t trial_id = 0;   // from ".../trial-ID-ATTEMPT/..."; 0 if the command line has none
  int attempt = 0;
};

// Every live normsweep-train whose command line contains `needle` (e.g. the
// test's directory, which holds the workers' work dirs).
std::vector<TrainerProcess> ListTrainers(const std::string& needle);

// ListTrainers(needle).size().
int CountTrainers(const std::string& needle);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_TRAINER_PROCESSES_H_
