// One normsweep-train child process: started in its own process group (so a
// signal reaches everything it started), stdout read as JSON lines, stderr
// appended to a log file with its tail kept for error messages. The child
// gets SIGKILL if the thread that started it dies (PR_SET_PDEATHSIG), so a
// killed worker leaves no trainer behind. With_stdin: the child's stdin is
// one end of a socket pair the worker writes lines to (a fused trainer's
// "cancel I"); else /dev/null.
//
// Owned and used by one thread (the slot that runs the trial); not
// thread-safe.
#ifndef NORMSWEEP_WORKER_TRIAL_PROCESS_H_
#define NORMSWEEP_WORKER_TRIAL_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace normsweep::worker {

class TrialProcess {
 public:
  // argv[0] is the program's path. stderr_path: where the child's stderr
  // goes (also kept in memory: the last kStderrTail bytes).
  static absl::StatusOr<std::unique_ptr<TrialProcess>> Start(const std::vector<std::string>& argv,
                                                             const std::string& stderr_path,
                                                             bool with_stdin = false);
  ~TrialProcess();  // SIGKILL to the group and reap, if still running
  TrialProcess(const TrialProcess&) = delete;
  TrialProcess& operator=(const TrialProcess&) = delete;

  static constexpr size_t kStderrTail = 2048;
  static constexpr size_t kMaxLine = 1 << 20;  // longer stdout lines are cut

  // Waits up to timeout for output, reads what is there and appends the
  // complete stdout lines (without '\n') to *lines. Also reaps the child
  // without blocking. Returns early when output arrives.
  void Poll(absl::Duration timeout, std::vector<std::string>* lines);

  // The child has exited and been reaped, and its stdout is drained (EOF,
  // or it exited over a second ago and something else holds the pipe).
  bool done() const;
  bool exited() const { return exited_; }
  // "exit status N" or "killed by signal N (name)"; only once exited().
  std::string ExitDescription() const;
  int exit_code() const { return exit_code_; }       // -1 if killed by a signal
  int term_signal() const { return term_signal_; }   // 0 if it exited

  // To the whole process group; a no-op once the child is reaped.
  void Signal(int sig);
  // Writes `line` and '\n' to the child's stdin without blocking. Safe when
  // the child is gone (an error, never SIGPIPE: stdin is a socket written
  // with MSG_NOSIGNAL). FAILED_PRECONDITION without a stdin, UNAVAILABLE
  // when the child does not take it (gone, or its buffer full).
  absl::Status WriteLine(const std::string& line);
  std::string stderr_tail() const { return stderr_tail_; }
  pid_t pid() const { return pid_; }

 private:
  TrialProcess() = default;
  void TryReap();
  void ReadStdout(std::vector<std::string>* lines);
  void ReadStderr();

  pid_t pid_ = -1;
  int stdin_fd_ = -1;      // our end of the child's stdin, if with_stdin
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;     // pipe from the child's stderr
  int stderr_log_ = -1;    // the log file
  std::string partial_;    // stdout bytes after the last '\n'
  std::string stderr_tail_;
  bool exited_ = false;
  absl::Time exited_at_;
  int exit_code_ = -1;
  int term_signal_ = 0;
};

}  // namespace normsweep::worker

#endif  // NORMSWEEP_WORKER_TRIAL_PROCESS_H_
