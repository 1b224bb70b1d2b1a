#include "tests/common/postgres_instance.h"

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "db/pg_connection.h"

namespace normsweep::testing {
namespace {

namespace fs = std::filesystem;

std::string FindBinDir() {
  if (const char* env = std::getenv("NORMSWEEP_PG_BINDIR"); env != nullptr && *env != '\0') return env;
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    int version = std::atoi(entry.path().filename().c_str());
    if (version > best_version && fs::exists(entry.path() / "bin" / "initdb")) {
      best_version = version;
      best = (entry.path() / "bin").string();
    }
  }
  return best;  // empty: rely on PATH
}

// Runs argv, output appended to log; returns the exit status.
int Run(const std::vector<std::string>& argv, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::fopen(log.c_str(), "a");
    if (f != nullptr) {
      dup2(fileno(f), 1);
      dup2(fileno(f), 2);
    }
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) < 0) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

}  // namespace

absl::Status PostgresInstance::RunAsOwner(const std::vector<std::string>& argv,
                                          const std::string& what) const {
  std::vector<std::string> full;
  if (!run_as_.empty()) full = {"runuser", "-u", run_as_, "--"};
  for (const std::string& a : argv) full.push_back(a);
  const std::string log = dir_ + "/commands.log";
  int rc = Run(full, log);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat(what, " failed (exit ", rc, "): ", Tail(log)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PostgresInstance>> PostgresInstance::Start(
    const PostgresInstanceOptions& options) {
  std::unique_ptr<PostgresInstance> pg(new PostgresInstance());
  pg->bindir_ = FindBinDir();
  char tmpl[] = "/tmp/nspg-XXXXXX";  // short: Unix socket paths are limited to 107 bytes
  if (mkdtemp(tmpl) == nullptr) return absl::InternalError("mkdtemp failed");
  pg->dir_ = tmpl;
  if (geteuid() == 0) {
    pg->run_as_ = "nobody";
    struct passwd* pw = getpwnam(pg->run_as_.c_str());
    if (pw == nullptr) return absl::FailedPreconditionError("running as root, and there is no user 'nobody'");
    if (chown(pg->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      return absl::InternalError("chown of the temporary directory failed");
    }
  }
  auto bin = [&](const char* name) { return pg->bindir_.empty() ? std::string(name) : pg->bindir_ + "/" + name; };
  absl::Status st = pg->RunAsOwner({bin("initdb"), "-D", pg->dir_ + "/data", "-U", "postgres", "-A", "trust",
                                    "-E", "UTF8", "--no-sync", "--no-instructions", "--locale=C"},
                                   "initdb");
  if (!st.ok()) return st;
  std::vector<std::string> settings = {"-k", pg->dir_, "-c", "listen_addresses=", "-p", "5432"};
  if (options.fast_unsafe) {
    for (const char* s : {"fsync=off", "synchronous_commit=off", "full_page_writes=off"}) {
      settings.push_back("-c");
      settings.push_back(s);
    }
  }
  for (const std::string& s : options.extra_settings) {
    settings.push_back("-c");
    settings.push_back(s);
  }
  pg->settings_ = absl::StrJoin(settings, " ");
  st = pg->StartAgain();
  if (!st.ok()) return st;
  return pg;
}

absl::Status PostgresInstance::StartAgain() {
  std::string pg_ctl = bindir_.empty() ? "pg_ctl" : bindir_ + "/pg_ctl";
  absl::Status st = RunAsOwner({pg_ctl, "-D", dir_ + "/data", "-l", dir_ + "/postgres.log", "-o", settings_,
                                "-w", "-t", "60", "start"},
                               "pg_ctl start");
  if (!st.ok()) return absl::InternalError(absl::StrCat(st.message(), "\n", Tail(dir_ + "/postgres.log")));
  running_ = true;
  return absl::OkStatus();
}

absl::Status PostgresInstance::Stop() {
  if (!running_) return absl::OkStatus();
  std::string pg_ctl = bindir_.empty() ? "pg_ctl" : bindir_ + "/pg_ctl";
  running_ = false;
  return RunAsOwner({pg_ctl, "-D", dir_ + "/data", "-m", "fast", "-w", "stop"}, "pg_ctl stop");
}

absl::Status PostgresInstance::CrashRestart() {
  if (!running_) return absl::FailedPreconditionError("CrashRestart: the server is not running");
  std::string pg_ctl = bindir_.empty() ? "pg_ctl" : bindir_ + "/pg_ctl";
  absl::Status st = RunAsOwner({pg_ctl, "-D", dir_ + "/data", "-l", dir_ + "/postgres.log", "-o", settings_,
                                "-m", "immediate", "-w", "-t", "60", "restart"},
                               "pg_ctl restart -m immediate");
  if (!st.ok()) return absl::InternalError(absl::StrCat(st.message(), "\n", Tail(dir_ + "/postgres.log")));
  return absl::OkStatus();
}

PostgresInstance::~PostgresInstance() {
  if (running_) {
    std::string pg_ctl = bindir_.empty() ? "pg_ctl" : bindir_ + "/pg_ctl";
    (void)RunAsOwner({pg_ctl, "-D", dir_ + "/data", "-m", "immediate", "-w", "stop"}, "pg_ctl stop");
  }
  std::error_code ec;
  if (!dir_.empty() && std::getenv("NORMSWEEP_KEEP_PG") == nullptr) fs::remove_all(dir_, ec);
}

std::string PostgresInstance::ConnInfo(const std::string& database) const {
  return absl::StrCat("host=", dir_, " port=5432 user=postgres dbname=", database);
}

absl::StatusOr<std::string> PostgresInstance::CreateDatabase(const std::string& name) {
  db::PgConnectOptions options;
  options.conninfo = ConnInfo();
  auto conn = db::PgConnection::Connect(options);
  if (!conn.ok()) return conn.status();
  // Identifiers cannot be parameters; test names are [a-z0-9_] only.
  for (char c : name) {
    if (!(std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '_')) {
      return absl::InvalidArgumentError("database name must be [a-z0-9_]");
    }
  }
  auto r = (*conn)->Exec("CREATE DATABASE " + name);
  if (!r.ok()) return r.status();
  return ConnInfo(name);
}

absl::StatusOr<PostgresInstance*> SharedPostgres() {
  static absl::StatusOr<std::unique_ptr<PostgresInstance>>* instance =
      new absl::StatusOr<std::unique_ptr<PostgresInstance>>(PostgresInstance::Start());
  if (!instance->ok()) return instance->status();
  // Stopped (and removed) at exit.
  static bool registered = [] {
    std::atexit([] { instance->value().reset(); });
    return true;
  }();
  (void)registered;
  return instance->value().get();
}

}  // namespace normsweep::testing
