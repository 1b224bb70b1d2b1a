#include "worker/slots.h"

#include <filesystem>
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

int DetectGpus() {
  int n = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    int index = 0;
    if (absl::StartsWith(name, "nvidia") && absl::SimpleAtoi(name.substr(6), &index)) ++n;
  }
  return n;
}

}  // namespace normsweep::worker
