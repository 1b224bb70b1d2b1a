#include "tests/common/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace normsweep::testing {

absl::StatusOr<Subprocess> Subprocess::Start(const std::vector<std::string>& argv,
                                             const std::map<std::string, std::string>& env,
                                             const std::string& log_path) {
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    // A test or benchmark that crashes takes its scheduler or worker with it
    // instead of leaving it running. (The signal comes when the forking
    // thread ends; tests start their processes from the main thread.)
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);
    int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      dup2(fd, 1);
      dup2(fd, 2);
    }
    for (const auto& [k, v] : env) setenv(k.c_str(), v.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return Subprocess(pid);
}

int Subprocess::Stop(int sig) {
  if (pid_ <= 0) return -1;
  kill(pid_, sig);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

int Subprocess::Wait(double timeout_s) {
  if (pid_ <= 0) return -1;
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) == 0) {
    if (absl::Now() > deadline) {
      Stop(SIGKILL);
      return -1;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  pid_ = -1;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

Subprocess::~Subprocess() {
  if (pid_ > 0) Stop(SIGKILL);
}

absl::StatusOr<std::string> WaitForFile(const std::string& path, double timeout_s) {
  const absl::Time deadline = absl::Now() + absl::Seconds(timeout_s);
  while (absl::Now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::stringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(absl::StrCat("no file ", path, " after ", timeout_s, " s"));
}

}  // namespace normsweep::testing
