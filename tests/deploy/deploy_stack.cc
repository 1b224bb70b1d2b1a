#include "tests/deploy/deploy_stack.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/sweep_client.h"
#include "client/sweep_file.h"
#include "db/pg_connection.h"
#include "tests/common/http_get.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/read_file.h"

namespace normsweep::testing {

using google::protobuf::Value;

namespace {

// The full path of a program on PATH, or "".
std::string Which(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Grafana reads PostgreSQL through a role that may only SELECT, made the way
// deploy/docker/postgres-init/10-grafana-role.sh makes it: before the
// scheduler's migrations create the tables (default privileges cover them).
// Every SQL panel runs as that role.
std::string MakeGrafanaRole(DeployStack& s) {
  const std::string script = ReadFile(s.src + "/deploy/docker/postgres-init/10-grafana-role.sh");
  const size_t begin = script.find("<<'SQL'\n"), end = script.rfind("\nSQL");
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    return "10-grafana-role.sh: no <<'SQL' ... SQL block";
  }
  // The test's superuser is postgres and its database deploy; trust auth.
  const std::string sql = absl::StrReplaceAll(
      script.substr(begin + 8, end - begin - 8),
      {{":'grafana_password'", "'unused'"}, {"FOR ROLE normsweep", "FOR ROLE postgres"},
       {"DATABASE normsweep", "DATABASE deploy"}});
  db::PgConnectOptions options;
  options.conninfo = s.conninfo;
  auto conn = db::PgConnection::Connect(options);
  if (!conn.ok()) return conn.status().ToString();
  for (absl::string_view statement : absl::StrSplit(sql, ';', absl::SkipWhitespace())) {
    if (auto r = (*conn)->Exec(std::string(statement)); !r.ok()) {
      return absl::StrCat("10-grafana-role.sh: ", statement, ": ", r.status().ToString());
    }
  }
  if (!absl::StrContains(s.conninfo, "user=postgres")) return "unexpected conninfo " + s.conninfo;
  s.grafana_conninfo = absl::StrReplaceAll(s.conninfo, {{"user=postgres", "user=grafana"}});
  return "";
}

// The database with Grafana's role, then the scheduler and the worker with
// /metrics on free ports.
std::string StartServices(DeployStack& s) {
  auto pg = SharedPostgres();
  if (!pg.ok()) return pg.status().ToString();
  auto conninfo = (*pg)->CreateDatabase("deploy");
  if (!conninfo.ok()) return conninfo.status().ToString();
  s.conninfo = *conninfo;
  s.dir = (*pg)->dir() + "/deploy";
  mkdir(s.dir.c_str(), 0755);
  if (std::string e = MakeGrafanaRole(s); !e.empty()) return e;

  auto sched = StartScheduler(s.bin, s.conninfo, s.dir, {"--metrics-port=0"});
  if (!sched.ok()) return sched.status().ToString();
  s.scheduler = std::make_unique<SchedulerProcess>(*std::move(sched));
  s.worker_metrics_port = FreePort();
  auto worker = Subprocess::Start(
      {s.bin + "/worker/normsweep-worker", "--scheduler", s.scheduler->address(), "--name", "deploy-w1",
       "--cpu-slots", "2", "--threads-per-slot", "1", "--trainer", s.bin + "/trainer/normsweep-train", "--work-dir",
       s.dir + "/w1", absl::StrCat("--metrics-port=", s.worker_metrics_port), "--grace-period-s", "2"},
      {}, s.dir + "/worker.log");
  if (!worker.ok()) return worker.status().ToString();
  s.worker = std::make_unique<Subprocess>(*std::move(worker));
  return "";
}

// Prometheus: the local stack's config with this stack's ports, scraping
// and evaluating every second; the repository's rules. Returns once it has
// scraped both targets, so that no trial is missed.
std::string StartPrometheus(DeployStack& s, const std::string& prometheus) {
  std::string config = ReadFile(s.src + "/deploy/prometheus/prometheus.yml");
  const std::map<std::string, std::string> edits = {
      {"localhost:9464", absl::StrCat("127.0.0.1:", s.scheduler->metrics_port)},
      {"localhost:9465", absl::StrCat("127.0.0.1:", s.worker_metrics_port)},
      {"scrape_interval: 5s", "scrape_interval: 1s"},
      {"evaluation_interval: 5s", "evaluation_interval: 1s"},
      {"- normsweep-rules.yml", "- " + s.src + "/deploy/prometheus/normsweep-rules.yml"}};
  for (const auto& [from, to] : edits) {
    if (!absl::StrContains(config, from)) return "deploy/prometheus/prometheus.yml has no \"" + from + "\"";
    config = absl::StrReplaceAll(config, {{from, to}});
  }
  const std::string config_path = s.dir + "/prometheus.yml";
  std::ofstream(config_path) << config;
  s.prometheus_port = FreePort();
  s.start_unix = absl::ToUnixSeconds(absl::Now());
  auto prom = Subprocess::Start(
      {prometheus, "--config.file=" + config_path, "--storage.tsdb.path=" + s.dir + "/prometheus-data",
       absl::StrCat("--web.listen-address=127.0.0.1:", s.prometheus_port), "--log.level=warn"},
      {}, s.dir + "/prometheus.log");
  if (!prom.ok()) return prom.status().ToString();
  s.prometheus = std::make_unique<Subprocess>(*std::move(prom));
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = HttpGet(s.prometheus_port, "/-/ready").ok();
    if (!ready) absl::SleepFor(absl::Milliseconds(100));
  }
  if (!ready) return "Prometheus did not become ready in 30 s: " + ReadFile(s.dir + "/prometheus.log");
  for (int i = 0; ; ++i) {
    auto up = HttpGet(s.prometheus_port, "/api/v1/query?query=" + UrlEncode("sum(up)"));
    if (up.ok() && absl::StrContains(*up, "\"2\"]")) break;
    if (i == 300) return "Prometheus did not scrape the scheduler and the worker in 30 s: " + (up.ok() ? *up : "");
    absl::SleepFor(absl::Milliseconds(100));
  }
  return "";
}

// One rejected submission (counted in normsweep_scheduler_rpc_errors_total),
// then the sweep to its end: trials of about 3 s, so that every one is
// scraped live. QK-norm off and on is an extra axis: two variants per
// placement, for the variant label and the variant_comparison panels.
std::string RunSweep(DeployStack& s) {
  client::SweepClient client(s.scheduler->address());
  auto bad = client::SweepSpecFromYaml("name: bad\nplacements: [post]\npeak_lrs: [-1]\nbase: {steps: 1}\n");
  if (!bad.ok()) return bad.status().ToString();
  if (client.Submit(*bad, "", false).ok()) return "the scheduler accepted a negative learning rate";
  auto spec = client::SweepSpecFromYaml(
      "name: deploy-dashboards\nplacements: [post, pre]\nwarmup_steps: [0, 50]\npeak_lrs: [1e-3, 1e-2]\n"
      "seeds: [0]\nextra_axes: [{field: qk_norm, values: [\"false\", \"true\"]}]\n"
      "base: {layers: 2, d_model: 32, heads: 2, seq_len: 32, batch_size: 8, steps: 2000, "
      "eval_every: 100, eval_batches: 2}\n");
  if (!spec.ok()) return spec.status().ToString();
  auto submitted = client.Submit(*spec, "deploy-dashboards", false);
  if (!submitted.ok()) return submitted.status().ToString();
  s.sweep_id = submitted->sweep().id();
  const absl::Time deadline = absl::Now() + absl::Seconds(360);
  while (true) {
    auto sweep = client.GetSweep(s.sweep_id);
    if (!sweep.ok()) return sweep.status().ToString();
    if (sweep->state() == v1::SWEEP_COMPLETED) break;
    if (absl::Now() > deadline) return "the sweep did not complete in 360 s: " + sweep->ShortDebugString();
    auto live = HttpGet(s.worker_metrics_port, "/metrics");
    if (live.ok() && absl::StrContains(*live, "normsweep_worker_trial_train_loss{")) {
      s.worker_metrics_live = *live;  // with a running trial's series
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  // A few more scrapes and rule evaluations after the last trial.
  absl::SleepFor(absl::Seconds(4));
  s.end_unix = absl::ToUnixSeconds(absl::Now());
  auto sm = HttpGet(s.scheduler->metrics_port, "/metrics");
  if (!sm.ok()) return sm.status().ToString();
  s.scheduler_metrics = *sm;
  if (s.worker_metrics_live.empty()) return "never saw a running trial's series on the worker's /metrics";
  return "";
}

}  // namespace

std::string StartDeployStack(DeployStack& s) {
  const char* src = std::getenv("NORMSWEEP_SOURCE_DIR");
  const char* bin = std::getenv("NORMSWEEP_BINARY_DIR");
  if (src == nullptr || bin == nullptr) return "run under ctest (NORMSWEEP_SOURCE_DIR, NORMSWEEP_BINARY_DIR)";
  s.src = src;
  s.bin = bin;
  const std::string prometheus = Which("prometheus");
  s.promtool = Which("promtool");
  if (prometheus.empty() || s.promtool.empty()) {
    return "prometheus and promtool are not installed: run deploy/install-deps.sh (Debian package prometheus)";
  }
  if (std::string e = StartServices(s); !e.empty()) return e;
  if (std::string e = StartPrometheus(s, prometheus); !e.empty()) return e;
  return RunSweep(s);
}

absl::StatusOr<Value> DeployStack::PromApi(const std::string& path_and_query) const {
  absl::StatusOr<std::string> body = HttpGet(prometheus_port, path_and_query);
  if (!body.ok()) return body.status();
  absl::StatusOr<Value> v = ParseJson(*body);
  if (!v.ok()) return v.status();
  if (StringField(*v, "status") != "success") return absl::InternalError("Prometheus answered " + *body);
  const Value* data = Field(*v, "data");
  if (data == nullptr) return absl::InternalError("no data in " + *body);
  return *data;
}

std::string DeployStack::RangeParams() const {
  return absl::StrCat("start=", static_cast<int64_t>(start_unix), "&end=", static_cast<int64_t>(end_unix) + 1);
}

absl::Status DeployStack::ExpectPromData(const std::string& expr) const {
  absl::StatusOr<Value> data =
      PromApi(absl::StrCat("/api/v1/query_range?query=", UrlEncode(expr), "&", RangeParams(), "&step=", kStepSeconds));
  if (!data.ok()) return data.status();
  const Value* result = Field(*data, "result");
  if (result == nullptr || result->list_value().values_size() == 0) return absl::NotFoundError("no series");
  for (const Value& series : result->list_value().values()) {
    const Value* values = Field(series, "values");
    if (values == nullptr) continue;
    for (const Value& point : values->list_value().values()) {
      const std::string& v = point.list_value().values(1).string_value();
      const double d = std::strtod(v.c_str(), nullptr);
      if (v != "NaN" && std::isfinite(d)) return absl::OkStatus();
    }
  }
  return absl::NotFoundError(absl::StrCat(result->list_value().values_size(), " series, none with a finite value"));
}

absl::StatusOr<std::vector<Value>> DeployStack::Sql(const std::string& sql) const {
  db::PgConnectOptions options;
  options.conninfo = grafana_conninfo;
  auto conn = db::PgConnection::Connect(options);
  if (!conn.ok()) return conn.status();
  auto result = (*conn)->Exec(absl::StrCat("SELECT row_to_json(q)::text FROM (", sql, "\n) AS q"));
  if (!result.ok()) return result.status();
  std::vector<Value> rows;
  for (int row = 0; row < result->rows(); ++row) {
    absl::StatusOr<Value> v = ParseJson(result->GetString(row, 0));
    if (!v.ok()) return v.status();
    rows.push_back(*v);
  }
  return rows;
}

CommandRun RunCommand(const std::vector<std::string>& argv, const std::string& log, double timeout_s) {
  unlink(log.c_str());
  auto p = Subprocess::Start(argv, {}, log);
  if (!p.ok()) return {-1, p.status().ToString()};
  CommandRun r;
  r.exit_code = p->Wait(timeout_s);
  r.output = ReadFile(log);
  return r;
}

std::string UrlEncode(absl::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

absl::StatusOr<Value> ParseJson(const std::string& text) {
  Value v;
  auto status = google::protobuf::util::JsonStringToMessage(text, &v);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("not JSON: ", status.ToString()));
  return v;
}

const Value* Field(const Value& v, const std::string& name) {
  if (v.kind_case() != Value::kStructValue) return nullptr;
  auto it = v.struct_value().fields().find(name);
  return it == v.struct_value().fields().end() ? nullptr : &it->second;
}

std::string StringField(const Value& v, const std::string& name) {
  const Value* f = Field(v, name);
  return f != nullptr && f->kind_case() == Value::kStringValue ? f->string_value() : "";
}

bool BoolField(const Value& v, const std::string& name) {
  const Value* f = Field(v, name);
  return f != nullptr && f->kind_case() == Value::kBoolValue && f->bool_value();
}

}  // namespace normsweep::testing
