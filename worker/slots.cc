#include "worker/slots.h"

#include <cstdio>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace normsweep::worker {

absl::StatusOr<std::vector<SlotSpec>> ResolveSlots(const std::string& gpus, int cpu_slots, int threads_per_slot,
                                                   int detected_gpus, int cores) {
  if (cpu_slots < 0) return absl::InvalidArgumentError("--cpu-slots: must be >= 0");
  if (threads_per_slot < 0) return absl::InvalidArgumentError("--threads-per-slot: must be >= 0");
  cores = std::max(cores, 1);
  std::vector<int> gpu_ids;
  if (gpus == "all" || (gpus.empty() && cpu_slots == 0)) {
    for (int i = 0; i < detected_gpus; ++i) gpu_ids.push_back(i);
  } else if (gpus != "none" && !gpus.empty()) {
    std::set<int> seen;
    for (absl::string_view part : absl::StrSplit(gpus, ',')) {
      int id = -1;
      if (!absl::SimpleAtoi(part, &id) || id < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: expected all, none or a list of GPU indexes like 0,2; got '", gpus, "'"));
      }
      if (!seen.insert(id).second) return absl::InvalidArgumentError(absl::StrCat("--gpus: ", id, " listed twice"));
      gpu_ids.push_back(id);
    }
  }
  if (gpu_ids.empty() && cpu_slots == 0) cpu_slots = 1;
  std::vector<SlotSpec> slots;
  for (int id : gpu_ids) {
    const int n = static_cast<int>(gpu_ids.size());
    slots.push_back({absl::StrCat("cuda:", id), threads_per_slot > 0 ? threads_per_slot : std::max(1, cores / n)});
  }
  for (int i = 0; i < cpu_slots; ++i) {
    slots.push_back({"cpu", threads_per_slot > 0 ? threads_per_slot : std::max(1, cores / cpu_slots)});
  }
  return slots;
}

int DetectGpus(const std::string& trainer_path) {
  // Ask the trainer: it lists only the GPUs it can use (a build without
  // CUDA lists none, and CUDA_VISIBLE_DEVICES applies).
  std::string quoted = "'";
  for (char c : trainer_path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  quoted += "'";
  std::FILE* p = popen((quoted + " --list-devices 2>/dev/null").c_str(), "r");
  if (p == nullptr) return 0;
  int n = 0;
  char line[256];
  while (std::fgets(line, sizeof(line), p) != nullptr) {
    if (absl::StartsWith(line, "cuda:")) ++n;
  }
  pclose(p);
  return n;
}

}  // namespace normsweep::worker
