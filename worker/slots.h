// Which slots a worker runs: one per GPU, and/or CPU slots that split the
// machine's cores between them. Pure functions (tests pass the detected
// hardware in).
#ifndef NORMSWEEP_WORKER_SLOTS_H_
#define NORMSWEEP_WORKER_SLOTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/worker_options.h"

namespace normsweep::worker {

// gpus: "" (auto: every detected GPU unless cpu_slots > 0), "all", "none",
// or a list of indexes "0,2". cpu_slots: 0 = none, unless there is no GPU
// slot (then 1). threads_per_slot: 0 = cores / CPU slots (at least 1) for
// CPU slots, cores / GPU slots for GPU slots (the host-side threads).
// INVALID_ARGUMENT names the flag.
absl::StatusOr<std::vector<SlotSpec>> ResolveSlots(const std::string& gpus, int cpu_slots, int threads_per_slot,
                                                   int detected_gpus, int cores);

// GPUs the trainer can use (`normsweep-train --list-devices`, "cuda:N"
// lines); 0 when it lists none or cannot be run.
int DetectGpus(const std::string& trainer_path);

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_SLOTS_H_
