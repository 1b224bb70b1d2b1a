// A throwaway PostgreSQL server for tests and benchmarks: initdb into a new
// temporary directory, postgres listening on a Unix socket inside it (no TCP
// port to collide on), removed again on destruction. When the process runs
// as root, PostgreSQL (which refuses root) runs as `nobody` via runuser and
// the directory is chown'ed to it.
//
// One instance per test binary is enough (SharedPostgres); give each test
// its own database with FreshDatabase (fresh_database.h). Not thread-safe:
// set up from the test's main thread.
#ifndef NORMSWEEP_TESTS_COMMON_POSTGRES_INSTANCE_H_
#define NORMSWEEP_TESTS_COMMON_POSTGRES_INSTANCE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace normsweep::testing {

struct PostgresInstanceOptions {
  // Durability off by default: tests do not survive power loss anyway.
  // (fsync=off, synchronous_commit=off, full_page_writes=off.) A test that
  // crashes the server (CrashRestart) and must keep every commit it was told
  // of sets this false: with synchronous_commit=off a crash loses the last
  // acknowledged commits; fsync=off and full_page_writes=off only matter
  // when the machine itself goes down, so such a test may keep them.
  bool fast_unsafe = true;
  std::vector<std::string> extra_settings;  // "-c name=value" pairs, e.g. "max_connections=200"
};

class PostgresInstance {
 public:
  static absl::StatusOr<std::unique_ptr<PostgresInstance>> Start(
      const PostgresInstanceOptions& options = {});
  ~PostgresInstance();

  // libpq connection string for a database on this server.
  std::string ConnInfo(const std::string& database = "postgres") const;
  // CREATE DATABASE name; returns its connection string.
  absl::StatusOr<std::string> CreateDatabase(const std::string& name);

  // Stops (fast shutdown: connections are dropped) and starts again on the
  // same socket, for connection-loss tests.
  absl::Status Stop();
  absl::Status StartAgain();
  // Crashes the server and starts it again on the same socket (pg_ctl
  // restart -m immediate: every backend is killed without a checkpoint, the
  // restart runs crash recovery); returns once it accepts connections.
  absl::Status CrashRestart();

  const std::string& dir() const { return dir_; }

 private:
  PostgresInstance() = default;
  absl::Status RunAsOwner(const std::vector<std::string>& argv, const std::string& what) const;

  std::string bindir_;
  std::string dir_;      // temp root: data/, the socket, the log
  std::string run_as_;   // "" or the unprivileged user
  std::string settings_; // pg_ctl -o value
  bool running_ = false;
};

// The process's shared instance (started on first use), or an error.
absl::StatusOr<PostgresInstance*> SharedPostgres();

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_POSTGRES_INSTANCE_H_
