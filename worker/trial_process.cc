#include "worker/trial_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace normsweep::worker {

absl::StatusOr<std::unique_ptr<TrialProcess>> TrialProcess::Start(const std::vector<std::string>& argv,
                                                                  const std::string& stderr_path,
                                                                  bool with_stdin) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  if (access(argv[0].c_str(), X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("cannot execute ", argv[0], ": ", strerror(errno)));
  }
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  if (pipe2(err, O_CLOEXEC) != 0) {
    close(out[0]);
    close(out[1]);
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  // A socket rather than a pipe: send(MSG_NOSIGNAL) cannot raise SIGPIPE
  // when the child has gone, whatever the worker's signal mask.
  int in[2] = {-1, -1};
  if (with_stdin && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
    for (int fd : {out[0], out[1], err[0], err[1]}) close(fd);
    return absl::InternalError(absl::StrCat("socketpair: ", strerror(errno)));
  }
  const int log = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();

  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    for (int fd : {out[0], out[1], err[0], err[1], log, in[0], in[1]}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat("fork: ", strerror(e)));
  }
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the worker already died
    // The worker blocks SIGTERM/SIGINT for its sigwait thread and ignores
    // SIGPIPE; the trainer must see them as usual.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    if (in[1] >= 0) {
      dup2(in[1], 0);
    } else {
      const int devnull = open("/dev/null", O_RDONLY);
      if (devnull >= 0) dup2(devnull, 0);
    }
    dup2(out[1], 1);
    dup2(err[1], 2);
    execv(args[0], args.data());
    const char msg[] = "normsweep-worker: exec failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  }
  setpgid(pid, pid);  // also here, so that a Signal right after Start reaches the group
  close(out[1]);
  close(err[1]);
  if (in[1] >= 0) {
    close(in[1]);
    fcntl(in[0], F_SETFL, fcntl(in[0], F_GETFL) | O_NONBLOCK);
  }
  std::unique_ptr<TrialProcess> p(new TrialProcess());
  p->stdin_fd_ = in[0];
  p->pid_ = pid;
  p->stdout_fd_ = out[0];
  p->stderr_fd_ = err[0];
  p->stderr_log_ = log;
  return p;
}

TrialProcess::~TrialProcess() {
  if (!exited_ && pid_ > 0) {
    kill(-pid_, SIGKILL);
    int status = 0;
    while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  for (int fd : {stdin_fd_, stdout_fd_, stderr_fd_, stderr_log_}) {
    if (fd >= 0) close(fd);
  }
}

void TrialProcess::Signal(int sig) {
  if (exited_ || pid_ <= 0) return;
  kill(-pid_, sig);
}

absl::Status TrialProcess::WriteLine(const std::string& line) {
  if (stdin_fd_ < 0) return absl::FailedPreconditionError("the trainer was started without a stdin to write to");
  const std::string text = line + "\n";
  ssize_t n;
  do {
    n = send(stdin_fd_, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return absl::UnavailableError(absl::StrCat("write to the trainer's stdin: ", strerror(errno)));
  // A short line into an empty-enough socket buffer goes whole or not at all
  // in practice; a cut one is reported rather than finished later.
  if (static_cast<size_t>(n) != text.size()) {
    return absl::UnavailableError(absl::StrCat("write to the trainer's stdin: ", n, " of ", text.size(), " bytes"));
  }
  return absl::OkStatus();
}

void TrialProcess::TryReap() {
  if (exited_) return;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return;
  exited_ = true;
  exited_at_ = absl::Now();
  if (WIFEXITED(status)) {
    exit_code_ = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    term_signal_ = WTERMSIG(status);
  }
}

std::string TrialProcess::ExitDescription() const {
  if (!exited_) return "still running";
  if (term_signal_ != 0) return absl::StrCat("killed by signal ", term_signal_, " (", strsignal(term_signal_), ")");
  return absl::StrCat("exit status ", exit_code_);
}

bool TrialProcess::done() const {
  if (!exited_) return false;
  if (stdout_fd_ < 0) return true;
  // A grandchild that kept the pipe open must not keep the trial alive.
  return absl::Now() - exited_at_ > absl::Seconds(1);
}

void TrialProcess::ReadStdout(std::vector<std::string>* lines) {
  char buf[65536];
  ssize_t n = read(stdout_fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(stdout_fd_);
    stdout_fd_ = -1;
    if (!partial_.empty()) lines->push_back(std::move(partial_));
    partial_.clear();
    return;
  }
  size_t start = 0;
  for (ssize_t i = 0; i < n; ++i) {
    if (buf[i] != '\n') continue;
    partial_.append(buf + start, i - start);
    lines->push_back(std::move(partial_));
    partial_.clear();
    start = i + 1;
  }
  if (partial_.size() < kMaxLine) partial_.append(buf + start, std::min<size_t>(n - start, kMaxLine - partial_.size()));
}

void TrialProcess::ReadStderr() {
  char buf[16384];
  ssize_t n = read(stderr_fd_, buf, sizeof(buf));
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  if (n <= 0) {
    close(stderr_fd_);
    stderr_fd_ = -1;
    return;
  }
  if (stderr_log_ >= 0) (void)!write(stderr_log_, buf, n);
  stderr_tail_.append(buf, n);
  if (stderr_tail_.size() > kStderrTail) stderr_tail_.erase(0, stderr_tail_.size() - kStderrTail);
}

void TrialProcess::Poll(absl::Duration timeout, std::vector<std::string>* lines) {
  TryReap();
  pollfd fds[2];
  int n = 0;
  int out_index = -1, err_index = -1;
  if (stdout_fd_ >= 0) {
    out_index = n;
    fds[n++] = {stdout_fd_, POLLIN, 0};
  }
  if (stderr_fd_ >= 0) {
    err_index = n;
    fds[n++] = {stderr_fd_, POLLIN, 0};
  }
  // Once exited, only drain what is already there.
  const int ms = exited_ ? 0 : static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (n == 0) {
    // Both pipes closed: the child is exiting; wait for it in short steps.
    const absl::Time until = absl::Now() + absl::Milliseconds(ms);
    while (!exited_ && absl::Now() < until) {
      absl::SleepFor(absl::Milliseconds(1));
      TryReap();
    }
    return;
  }
  int r = poll(fds, n, exited_ ? 0 : ms);
  if (r > 0) {
    if (out_index >= 0 && (fds[out_index].revents & (POLLIN | POLLHUP | POLLERR))) ReadStdout(lines);
    if (err_index >= 0 && (fds[err_index].revents & (POLLIN | POLLHUP | POLLERR))) ReadStderr();
  }
  TryReap();
}

}  // namespace normsweep::worker
