#include "tests/common/process_test.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "tests/common/fresh_database.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/read_file.h"

namespace normsweep::testing {

void ProcessTest::SetUp() {
  const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  ASSERT_TRUE(bin != nullptr && src != nullptr) << "run under ctest (NORMSWEEP_BINARY_DIR, NORMSWEEP_SOURCE_DIR)";
  bin_ = bin;
  src_ = src;
  if (!with_database_) return;
  auto conninfo = FreshDatabase();
  ASSERT_TRUE(conninfo.ok()) << conninfo.status();
  conninfo_ = *conninfo;
  auto pg = SharedPostgres();
  ASSERT_TRUE(pg.ok()) << pg.status();
  // The work dir is named after the database (dbname=NAME ends conninfo).
  dir_ = absl::StrCat((*pg)->dir(), "/", conninfo_.substr(conninfo_.rfind('=') + 1));
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  ASSERT_FALSE(ec) << dir_ << ": " << ec.message();
}

void ProcessTest::TearDown() {
  started_workers_.clear();  // SIGKILL whatever is still running
  started_schedulers_.clear();
  if (dir_.empty() || (!HasFailure() && std::getenv("NORMSWEEP_TEST_SHOW_LOGS") == nullptr)) return;
  std::vector<std::string> logs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir_, ec)) {
    // The logs of the test's processes, one level down at most (not the trainers' work dirs).
    if (entry.is_regular_file() && entry.path().extension() == ".log" &&
        std::filesystem::relative(entry.path(), dir_).parent_path().string().find('/') == std::string::npos) {
      logs.push_back(entry.path().string());
    }
  }
  std::sort(logs.begin(), logs.end());
  for (const std::string& log : logs) {
    std::string text = ReadFile(log);
    if (text.size() > 6000) text = "..." + text.substr(text.size() - 6000);
    std::printf("---- %s ----\n%s\n", log.substr(dir_.size() + 1).c_str(), text.c_str());
  }
}

SchedulerProcess* ProcessTest::StartScheduler(const std::vector<std::string>& extra_flags, const std::string& dir) {
  auto s = testing::StartScheduler(bin_, conninfo_, dir.empty() ? dir_ : dir, extra_flags);
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return nullptr;
  }
  return &started_schedulers_.emplace_back(*std::move(s));
}

Subprocess* ProcessTest::StartWorker(const std::string& name, const std::string& scheduler, int cpu_slots,
                                     const std::vector<std::string>& flags,
                                     const std::map<std::string, std::string>& env) {
  std::vector<std::string> argv = {bin_ + "/worker/normsweep-worker",
                                   "--scheduler=" + scheduler,
                                   "--name=" + name,
                                   absl::StrCat("--cpu-slots=", cpu_slots),
                                   "--threads-per-slot=1",
                                   "--trainer=" + bin_ + "/trainer/normsweep-train",
                                   "--work-dir=" + dir_ + "/" + name,
                                   "--metrics-port=0",
                                   "--grace-period-s=2"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto w = Subprocess::Start(argv, env, dir_ + "/" + name + ".log");
  if (!w.ok()) {
    ADD_FAILURE() << "worker " << name << ": " << w.status();
    return nullptr;
  }
  return &started_workers_.emplace_back(*std::move(w));
}

CommandResult ProcessTest::Cli(const std::vector<std::string>& args, const std::map<std::string, std::string>& env,
                               double timeout_s) {
  std::vector<std::string> argv = {bin_ + "/client/normsweep"};
  argv.insert(argv.end(), args.begin(), args.end());
  return Run(argv, env, timeout_s);
}

CommandResult ProcessTest::Run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
                               double timeout_s) {
  const std::string log = absl::StrCat(dir_, "/cli-", commands_++, ".log");
  CommandResult r;
  auto p = Subprocess::Start(argv, env, log);
  if (!p.ok()) {
    ADD_FAILURE() << argv[0] << ": " << p.status();
    return r;
  }
  r.exit_code = p->Wait(timeout_s);
  r.output = ReadFile(log);
  return r;
}

}  // namespace normsweep::testing
