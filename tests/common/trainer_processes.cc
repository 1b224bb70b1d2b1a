#include "tests/common/trainer_processes.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace normsweep::testing {
namespace {

std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "trial-12-3" anywhere in the command line: trial 12, attempt 3.
void ParseTrialDir(TrainerProcess* p) {
  size_t at = 0;
  while ((at = p->cmdline.find("/trial-", at)) != std::string::npos) {
    at += 7;
    const size_t end = p->cmdline.find_first_of("/ ", at);
    std::vector<std::string> parts = absl::StrSplit(p->cmdline.substr(at, end - at), '-');
    int64_t id = 0;
    int attempt = 0;
    if (parts.size() == 2 && absl::SimpleAtoi(parts[0], &id) && absl::SimpleAtoi(parts[1], &attempt)) {
      p->trial_id = id;
      p->attempt = attempt;
      return;
    }
  }
}

}  // namespace

std::vector<TrainerProcess> ListTrainers(const std::string& needle) {
  std::vector<TrainerProcess> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (dirent* e = readdir(proc)) {
    int pid;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    // A zombie's cmdline reads empty, so it drops out here.
    std::string cmdline = ReadProcFile(absl::StrCat("/proc/", pid, "/cmdline"));
    const std::string argv0 = cmdline.substr(0, cmdline.find('\0'));
    if (!absl::EndsWith(argv0, "normsweep-train")) continue;
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    if (!absl::StrContains(cmdline, needle)) continue;
    // stat: "pid (comm) state ppid ..."; comm may hold spaces, so split after ')'.
    const std::string stat = ReadProcFile(absl::StrCat("/proc/", pid, "/stat"));
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
    if (fields.size() < 2 || fields[0] == "Z" || fields[0] == "X") continue;
    TrainerProcess p;
    p.pid = pid;
    if (!absl::SimpleAtoi(fields[1], &p.parent)) continue;
    p.cmdline = std::move(cmdline);
    ParseTrialDir(&p);
    out.push_back(std::move(p));
  }
  closedir(proc);
  return out;
}

int CountTrainers(const std::string& needle) { return static_cast<int>(ListTrainers(needle).size()); }

}  // namespace normsweep::testing
