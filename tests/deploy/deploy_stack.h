// What the deploy/prometheus and deploy/grafana tests run against: a
// throwaway PostgreSQL, a normsweep-scheduler, a normsweep-worker running
// the real normsweep-train, and Debian's Prometheus scraping both (1 s)
// through a small real sweep (both placements x 2 warm-ups x 2 lrs x
// QK-norm off and on, an extra axis: two variants). Set up
// once per test binary from its main thread, read-only afterwards.
#ifndef NORMSWEEP_TESTS_DEPLOY_DEPLOY_STACK_H_
#define NORMSWEEP_TESTS_DEPLOY_DEPLOY_STACK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"

namespace normsweep::testing {

// Prometheus in this stack scrapes and evaluates rules every second;
// Grafana's $__rate_interval is then max($__interval + scrape, 4 x scrape) = 4 s.
constexpr int kStepSeconds = 2;
constexpr char kRateInterval[] = "4s";

struct DeployStack {
  std::string src, bin, dir, promtool, conninfo;
  std::string grafana_conninfo;  // Grafana's read-only role (deploy/docker/postgres-init)
  std::unique_ptr<SchedulerProcess> scheduler;
  std::unique_ptr<Subprocess> worker;
  std::unique_ptr<Subprocess> prometheus;
  int worker_metrics_port = 0, prometheus_port = 0;
  int64_t sweep_id = 0;
  double start_unix = 0, end_unix = 0;
  std::string scheduler_metrics, worker_metrics_live;  // /metrics texts for promtool

  // GET on Prometheus's HTTP API; the parsed "data" of a successful answer.
  absl::StatusOr<google::protobuf::Value> PromApi(const std::string& path_and_query) const;
  // "start=...&end=...": the sweep's time range.
  std::string RangeParams() const;
  // Evaluates a PromQL expression over the sweep's time range; an error
  // unless it parses and some series has a finite value.
  absl::Status ExpectPromData(const std::string& expr) const;
  // Runs SQL as Grafana's role; the rows as JSON objects, columns by name.
  absl::StatusOr<std::vector<google::protobuf::Value>> Sql(const std::string& sql) const;
};

// Starts the stack and runs the sweep to its end: "" or what failed.
std::string StartDeployStack(DeployStack& s);

// A program run to its end: its exit code and output.
struct CommandRun {
  int exit_code = -1;
  std::string output;
};
CommandRun RunCommand(const std::vector<std::string>& argv, const std::string& log, double timeout_s = 60);

// Reading Prometheus's and Grafana's JSON.
std::string UrlEncode(absl::string_view s);
absl::StatusOr<google::protobuf::Value> ParseJson(const std::string& text);
const google::protobuf::Value* Field(const google::protobuf::Value& v, const std::string& name);
std::string StringField(const google::protobuf::Value& v, const std::string& name);
bool BoolField(const google::protobuf::Value& v, const std::string& name);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_DEPLOY_DEPLOY_STACK_H_
