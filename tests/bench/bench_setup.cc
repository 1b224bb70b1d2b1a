#include "tests/bench/bench_setup.h"

#include <cstdio>

#include "common/flags.h"

namespace normsweep::bench {

std::vector<std::string> DeployedSchedulerFlags() {
  return {"--lease-seconds=60", "--heartbeat-interval-ms=15000", "--maintenance-interval-ms=5000"};
}

std::optional<BenchDatabase> StartDatabase(const std::string& name, const testing::PostgresInstanceOptions& options) {
  auto server = testing::PostgresInstance::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "PostgreSQL: %s\n", server.status().ToString().c_str());
    return std::nullopt;
  }
  auto conninfo = (*server)->CreateDatabase(name);
  if (!conninfo.ok()) {
    std::fprintf(stderr, "database %s: %s\n", name.c_str(), conninfo.status().ToString().c_str());
    return std::nullopt;
  }
  return BenchDatabase{*std::move(server), *conninfo};
}

int Main(int argc, char** argv, absl::string_view usage, int (*run)()) {
  if (std::optional<int> exit_code = ParseFlagsForMain(argc, argv, usage)) return *exit_code;
  return run();
}

}  // namespace normsweep::bench
