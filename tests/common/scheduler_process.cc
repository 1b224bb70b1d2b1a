#include "tests/common/scheduler_process.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace normsweep::testing {

absl::StatusOr<SchedulerProcess> StartScheduler(const std::string& bin_dir, const std::string& conninfo,
                                                const std::string& dir,
                                                const std::vector<std::string>& extra_flags) {
  const std::string port_file = dir + "/scheduler.ports";
  ::unlink(port_file.c_str());
  std::vector<std::string> argv = {bin_dir + "/scheduler/normsweep-scheduler", "--host=127.0.0.1", "--port=0",
                                   "--metrics-port=-1", "--port-file=" + port_file, "--lease-seconds=2",
                                   "--heartbeat-interval-ms=300", "--maintenance-interval-ms=200"};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<Subprocess> process =
      Subprocess::Start(argv, {{"NORMSWEEP_DATABASE_URL", conninfo}}, dir + "/scheduler.log");
  if (!process.ok()) return process.status();
  absl::StatusOr<std::string> text = WaitForFile(port_file, 30);
  if (!text.ok()) return absl::DeadlineExceededError("the scheduler did not write " + port_file);
  struct stat written {};
  if (::stat(port_file.c_str(), &written) != 0) return absl::InternalError("cannot stat " + port_file);
  SchedulerProcess s{std::move(*process), 0, 0, absl::TimeFromTimespec(written.st_mtim)};
  std::vector<std::string> parts = absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[0], &s.grpc_port) || !absl::SimpleAtoi(parts[1], &s.metrics_port)) {
    return absl::InternalError("unreadable port file: " + *text);
  }
  return s;
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

}  // namespace normsweep::testing
