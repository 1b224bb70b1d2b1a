// Whether the kernel's OOM killer struck while a trainer ran, from the
// cgroup v2 `memory.events` file of the worker's cgroup (the trainer runs in
// the worker's cgroup unless something moves it): its `oom_kill` count read
// when the trainer starts and when it has ended. A SIGKILL with a grown count
// is the trial's own failure (it asked for too much memory), not a signal
// from outside. The count is the cgroup's, so with several slots an OOM kill
// of one trainer can be mistaken for another's at the same moment; a SIGKILL
// then counts against the trial's attempts rather than its interruptions.
#ifndef NORMSWEEP_WORKER_MEMORY_EVENTS_H_
#define NORMSWEEP_WORKER_MEMORY_EVENTS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace normsweep::worker {

// The memory.events path of the cgroup v2 line ("0::/path") of a
// /proc/self/cgroup text: "/sys/fs/cgroup/path/memory.events"; "" when the
// text has no cgroup v2 line.
std::string MemoryEventsPathOf(absl::string_view proc_self_cgroup);

// MemoryEventsPathOf(/proc/self/cgroup), or "" when it cannot be read or the
// file it names does not exist (the root cgroup has none): "cannot tell".
std::string DefaultMemoryEventsFile();

// The `oom_kill` count of a memory.events file; nullopt when path is empty,
// the file cannot be read or has no such line.
std::optional<int64_t> ReadOomKills(const std::string& path);

// Whether the count grew from `before` to `after`; false when either is unknown.
inline bool OomKillsGrew(std::optional<int64_t> before, std::optional<int64_t> after) {
  return before.has_value() && after.has_value() && *after > *before;
}

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_MEMORY_EVENTS_H_
