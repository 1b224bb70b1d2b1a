// Starts a program as a child process (for tests that run our binaries),
// with extra environment variables; stops it with a signal.
#ifndef NORMSWEEP_TESTS_COMMON_SUBPROCESS_H_
#define NORMSWEEP_TESTS_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace normsweep::testing {

class Subprocess {
 public:
  // argv[0] is a path. Output goes to log_path (appended).
  static absl::StatusOr<Subprocess> Start(const std::vector<std::string>& argv,
                                          const std::map<std::string, std::string>& env,
                                          const std::string& log_path);
  Subprocess(Subprocess&& other) noexcept : pid_(other.pid_) { other.pid_ = -1; }
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();  // SIGKILL if still running

  pid_t pid() const { return pid_; }
  // Sends sig and waits; returns the exit code (128 + signal when killed).
  int Stop(int sig);
  // Waits up to timeout_s for the process to exit by itself; returns its exit
  // code, or -1 after killing it when the time ran out.
  int Wait(double timeout_s);

 private:
  explicit Subprocess(pid_t pid) : pid_(pid) {}
  pid_t pid_ = -1;
};

// Waits up to timeout_s for a file to exist and returns its contents.
absl::StatusOr<std::string> WaitForFile(const std::string& path, double timeout_s);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_SUBPROCESS_H_
