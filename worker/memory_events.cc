#include "worker/memory_events.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace normsweep::worker {

std::string MemoryEventsPathOf(absl::string_view proc_self_cgroup) {
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n')) {
    // cgroup v2: hierarchy 0, no controllers.
    if (!absl::ConsumePrefix(&line, "0::")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::StartsWith(line, "/")) return "";
    if (line == "/") return "/sys/fs/cgroup/memory.events";
    return absl::StrCat("/sys/fs/cgroup", line, "/memory.events");
  }
  return "";
}

std::string DefaultMemoryEventsFile() {
  std::ifstream in("/proc/self/cgroup");
  if (!in) return "";
  std::stringstream text;
  text << in.rdbuf();
  std::string path = MemoryEventsPathOf(text.str());
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return "";
  return path;
}

std::optional<int64_t> ReadOomKills(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view rest = line;
    // "oom_kill N" (not "oom_group_kill N")
    if (!absl::ConsumePrefix(&rest, "oom_kill ")) continue;
    int64_t n = 0;
    if (absl::SimpleAtoi(absl::StripAsciiWhitespace(rest), &n)) return n;
    return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace normsweep::worker
