// deploy/prometheus and deploy/grafana against the real thing: a throwaway
// PostgreSQL, a normsweep-scheduler, a normsweep-worker running the real
// normsweep-train, and Debian's Prometheus scraping both (1 s) through a
// small real sweep (both placements x 2 warm-ups x 2 lrs). Then every PromQL
// expression of both dashboards and every recording rule must parse and
// return data over the sweep's time range, every SQL panel and variable query
// must return rows from the real database (as Grafana's read-only role of
// deploy/docker/postgres-init), and promtool must accept the
// configs, the rules and our /metrics output. Grafana itself is not in
// Debian: its template variables are substituted here the way Grafana does.
// No Prometheus installed is a failure (deploy/install-deps.sh installs it).
#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/sweep_client.h"
#include "client/sweep_file.h"
#include "db/pg_connection.h"
#include "gtest/gtest.h"
#include "tests/common/http_get.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/scheduler_process.h"
#include "tests/common/subprocess.h"

namespace normsweep {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kPromUid[] = "normsweep-prometheus";
constexpr char kPgUid[] = "normsweep-postgres";
// Prometheus in this test scrapes and evaluates rules every second; Grafana's
// $__rate_interval is then max($__interval + scrape, 4 x scrape) = 4 s.
constexpr int kStepSeconds = 2;
constexpr char kRateInterval[] = "4s";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The full path of a program on PATH, or "".
std::string Which(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

struct CommandRun {
  int exit_code = -1;
  std::string output;
};

CommandRun RunCommand(const std::vector<std::string>& argv, const std::string& log, double timeout_s = 60) {
  unlink(log.c_str());
  auto p = testing::Subprocess::Start(argv, {}, log);
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

// A Grafana template variable once resolved: its name, its values and how
// Grafana formats it (multi-value and "include All" variables are quoted or
// regex-escaped, single ones inserted as they are).
struct Variable {
  std::string name;
  std::vector<std::string> values;
  bool multi = false;
};

// Grafana's Prometheus regex escaping (the query text gets two backslashes,
// which the PromQL string literal turns into one).
std::string PromRegexEscape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (absl::StrContains("\\^$*+?.()|[]{}", c)) out += "\\\\";
    out += c;
  }
  return out;
}

std::string FormatProm(const Variable& v) {
  if (!v.multi) return v.values.front();
  std::vector<std::string> escaped;
  for (const std::string& s : v.values) escaped.push_back(PromRegexEscape(s));
  return escaped.size() == 1 ? escaped[0] : absl::StrCat("(", absl::StrJoin(escaped, "|"), ")");
}

std::string FormatSql(const Variable& v) {
  if (!v.multi) return v.values.front();
  std::vector<std::string> quoted;
  for (const std::string& s : v.values) quoted.push_back(absl::StrCat("'", absl::StrReplaceAll(s, {{"'", "''"}}), "'"));
  return absl::StrJoin(quoted, ",");
}

// Replaces $name and ${name} (not $name_longer) with the formatted values.
std::string Substitute(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [name, value] : values) {
    text = absl::StrReplaceAll(text, {{absl::StrCat("${", name, "}"), value}});
    std::string out;
    const std::string token = "$" + name;
    size_t pos = 0;
    while (true) {
      size_t hit = text.find(token, pos);
      if (hit == std::string::npos) break;
      const size_t end = hit + token.size();
      const bool word_follows = end < text.size() && (absl::ascii_isalnum(text[end]) || text[end] == '_');
      out.append(text, pos, hit - pos);
      out += word_follows ? token : value;
      pos = end;
    }
    out.append(text, pos, std::string::npos);
    text = out;
  }
  return text;
}

// One panel target or variable query, with where it came from.
struct Query {
  std::string where;       // "dashboard / panel / refId"
  std::string datasource;  // uid
  std::string text;
};

// The environment every test below shares: started once.
struct Stack {
  std::string src, bin, dir, promtool, conninfo;
  std::string grafana_conninfo;  // Grafana's read-only role (deploy/docker/postgres-init)
  std::unique_ptr<testing::SchedulerProcess> scheduler;
  std::unique_ptr<testing::Subprocess> worker;
  std::unique_ptr<testing::Subprocess> prometheus;
  int scheduler_metrics_port = 0, worker_metrics_port = 0, prometheus_port = 0;
  int64_t sweep_id = 0;
  double start_unix = 0, end_unix = 0;
  std::string scheduler_metrics, worker_metrics_live;  // /metrics texts for promtool
  std::string error;                                   // set when setting up failed
};

Stack* stack = nullptr;

class PrometheusGrafanaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack = new Stack;
    stack->error = Start(*stack);
  }
  static void TearDownTestSuite() {
    delete stack;
    stack = nullptr;
  }
  void SetUp() override { ASSERT_EQ(stack->error, "") << "setting up the stack failed"; }

  static std::string Start(Stack& s);

  // GET on Prometheus's HTTP API; the parsed "data" of a successful answer.
  static absl::StatusOr<Value> PromApi(const std::string& path_and_query) {
    absl::StatusOr<std::string> body = testing::HttpGet(stack->prometheus_port, path_and_query);
    if (!body.ok()) return body.status();
    absl::StatusOr<Value> v = ParseJson(*body);
    if (!v.ok()) return v.status();
    if (StringField(*v, "status") != "success") return absl::InternalError("Prometheus answered " + *body);
    const Value* data = Field(*v, "data");
    if (data == nullptr) return absl::InternalError("no data in " + *body);
    return *data;
  }

  static std::string RangeParams() {
    return absl::StrCat("start=", static_cast<int64_t>(stack->start_unix),
                        "&end=", static_cast<int64_t>(stack->end_unix) + 1);
  }

  // Evaluates a PromQL expression over the sweep's time range; an error
  // unless it parses and some series has a finite value.
  static absl::Status ExpectPromData(const std::string& expr) {
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

  // Runs a panel's SQL; its rows as JSON objects, columns by name.
  static absl::StatusOr<std::vector<Value>> Sql(const std::string& sql) {
    db::PgConnectOptions options;
    options.conninfo = stack->grafana_conninfo;
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

  struct Dashboard {
    std::string file;
    Value json;
  };
  static std::vector<Dashboard> Dashboards();
  // Resolves a dashboard's template variables in order, as Grafana does
  // with every option selected ("All" where the variable offers it).
  static absl::StatusOr<std::vector<Variable>> ResolveVariables(const Dashboard& d);
  static std::vector<Query> PanelQueries(const Dashboard& d);
  static std::map<std::string, std::string> Formatted(const std::vector<Variable>& vars, bool prom);
};

// Grafana reads PostgreSQL through a role that may only SELECT, made the way
// deploy/docker/postgres-init/10-grafana-role.sh makes it: before the
// scheduler's migrations create the tables (default privileges cover them).
// Every SQL panel runs as that role.
std::string MakeGrafanaRole(Stack& s) {
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

std::string PrometheusGrafanaTest::Start(Stack& s) {
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
  auto pg = testing::SharedPostgres();
  if (!pg.ok()) return pg.status().ToString();
  auto conninfo = (*pg)->CreateDatabase("deploy");
  if (!conninfo.ok()) return conninfo.status().ToString();
  s.conninfo = *conninfo;
  s.dir = (*pg)->dir() + "/deploy";
  mkdir(s.dir.c_str(), 0755);
  if (std::string e = MakeGrafanaRole(s); !e.empty()) return e;

  // Scheduler and worker with /metrics on free ports.
  s.scheduler_metrics_port = testing::FreePort();
  auto sched = testing::StartScheduler(s.bin, s.conninfo, s.dir,
                                       {absl::StrCat("--metrics_port=", s.scheduler_metrics_port)});
  if (!sched.ok()) return sched.status().ToString();
  s.scheduler = std::make_unique<testing::SchedulerProcess>(*std::move(sched));
  s.worker_metrics_port = testing::FreePort();
  auto worker = testing::Subprocess::Start(
      {s.bin + "/worker/normsweep-worker", "--scheduler", s.scheduler->address(), "--name", "deploy-w1",
       "--cpu-slots", "2", "--threads-per-slot", "1", "--trainer", s.bin + "/trainer/normsweep-train", "--work-dir",
       s.dir + "/w1", absl::StrCat("--metrics-port=", s.worker_metrics_port), "--grace-period-s", "2"},
      {}, s.dir + "/worker.log");
  if (!worker.ok()) return worker.status().ToString();
  s.worker = std::make_unique<testing::Subprocess>(*std::move(worker));

  // Prometheus: the local stack's config with this test's ports, scraping
  // and evaluating every second; the repository's rules.
  std::string config = ReadFile(s.src + "/deploy/prometheus/prometheus.yml");
  const std::map<std::string, std::string> edits = {
      {"localhost:9464", absl::StrCat("127.0.0.1:", s.scheduler_metrics_port)},
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
  s.prometheus_port = testing::FreePort();
  s.start_unix = absl::ToUnixSeconds(absl::Now());
  auto prom = testing::Subprocess::Start(
      {prometheus, "--config.file=" + config_path, "--storage.tsdb.path=" + s.dir + "/prometheus-data",
       absl::StrCat("--web.listen-address=127.0.0.1:", s.prometheus_port), "--log.level=warn"},
      {}, s.dir + "/prometheus.log");
  if (!prom.ok()) return prom.status().ToString();
  s.prometheus = std::make_unique<testing::Subprocess>(*std::move(prom));
  bool ready = false;
  for (int i = 0; i < 300 && !ready; ++i) {
    ready = testing::HttpGet(s.prometheus_port, "/-/ready").ok();
    if (!ready) absl::SleepFor(absl::Milliseconds(100));
  }
  if (!ready) return "Prometheus did not become ready in 30 s: " + ReadFile(s.dir + "/prometheus.log");
  // Both targets scraped before the first trial starts, so none is missed.
  for (int i = 0; ; ++i) {
    auto up = testing::HttpGet(s.prometheus_port, "/api/v1/query?query=" + UrlEncode("sum(up)"));
    if (up.ok() && absl::StrContains(*up, "\"2\"]")) break;
    if (i == 300) return "Prometheus did not scrape the scheduler and the worker in 30 s: " + (up.ok() ? *up : "");
    absl::SleepFor(absl::Milliseconds(100));
  }

  // One rejected submission (counted in normsweep_scheduler_rpc_errors_total),
  // then the sweep: trials of about 3 s, so that every one is scraped live.
  client::SweepClient client(s.scheduler->address());
  auto bad = client::SweepSpecFromYaml("name: bad\nplacements: [post]\npeak_lrs: [-1]\nbase: {steps: 1}\n");
  if (!bad.ok()) return bad.status().ToString();
  if (client.Submit(*bad, "", false).ok()) return "the scheduler accepted a negative learning rate";
  auto spec = client::SweepSpecFromYaml(
      "name: deploy-dashboards\nplacements: [post, pre]\nwarmup_steps: [0, 50]\npeak_lrs: [1e-3, 1e-2]\n"
      "seeds: [0]\nbase: {layers: 2, d_model: 32, heads: 2, seq_len: 32, batch_size: 8, steps: 2000, "
      "eval_every: 100, eval_batches: 2}\n");
  if (!spec.ok()) return spec.status().ToString();
  auto submitted = client.Submit(*spec, "deploy-dashboards", false);
  if (!submitted.ok()) return submitted.status().ToString();
  s.sweep_id = submitted->sweep().id();
  const absl::Time deadline = absl::Now() + absl::Seconds(150);
  while (true) {
    auto sweep = client.GetSweep(s.sweep_id);
    if (!sweep.ok()) return sweep.status().ToString();
    if (sweep->state() == v1::SWEEP_COMPLETED) break;
    if (absl::Now() > deadline) return "the sweep did not complete in 150 s: " + sweep->ShortDebugString();
    auto live = testing::HttpGet(s.worker_metrics_port, "/metrics");
    if (live.ok() && absl::StrContains(*live, "normsweep_trial_train_loss{")) {
      s.worker_metrics_live = *live;  // with a running trial's series
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  // A few more scrapes and rule evaluations after the last trial.
  absl::SleepFor(absl::Seconds(4));
  s.end_unix = absl::ToUnixSeconds(absl::Now());
  auto sm = testing::HttpGet(s.scheduler_metrics_port, "/metrics");
  if (!sm.ok()) return sm.status().ToString();
  s.scheduler_metrics = *sm;
  if (s.worker_metrics_live.empty()) return "never saw a running trial's series on the worker's /metrics";
  return "";
}

std::vector<PrometheusGrafanaTest::Dashboard> PrometheusGrafanaTest::Dashboards() {
  std::vector<Dashboard> out;
  const std::string dir = stack->src + "/deploy/grafana/dashboards";
  DIR* d = opendir(dir.c_str());
  EXPECT_NE(d, nullptr) << dir;
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (!absl::EndsWith(name, ".json")) continue;
    absl::StatusOr<Value> v = ParseJson(ReadFile(dir + "/" + name));
    EXPECT_TRUE(v.ok()) << name << ": " << v.status();
    if (v.ok()) out.push_back({name, *v});
  }
  closedir(d);
  std::sort(out.begin(), out.end(), [](const Dashboard& a, const Dashboard& b) { return a.file < b.file; });
  return out;
}

std::map<std::string, std::string> PrometheusGrafanaTest::Formatted(const std::vector<Variable>& vars, bool prom) {
  std::map<std::string, std::string> out = {
      {"__rate_interval", kRateInterval},
      {"__interval", absl::StrCat(kStepSeconds, "s")},
      {"__range", absl::StrCat(static_cast<int64_t>(stack->end_unix - stack->start_unix) + 1, "s")}};
  for (const Variable& v : vars) out[v.name] = prom ? FormatProm(v) : FormatSql(v);
  return out;
}

absl::StatusOr<std::vector<Variable>> PrometheusGrafanaTest::ResolveVariables(const Dashboard& d) {
  std::vector<Variable> vars;
  const Value* templating = Field(d.json, "templating");
  const Value* list = templating ? Field(*templating, "list") : nullptr;
  if (list == nullptr) return vars;
  for (const Value& t : list->list_value().values()) {
    Variable v;
    v.name = StringField(t, "name");
    v.multi = BoolField(t, "multi") || BoolField(t, "includeAll");
    const std::string type = StringField(t, "type");
    const Value* ds = Field(t, "datasource");
    const std::string uid = ds ? StringField(*ds, "uid") : "";
    const std::string where = absl::StrCat(d.file, " variable $", v.name);
    if (type == "custom") {
      for (absl::string_view o : absl::StrSplit(StringField(t, "query"), ',', absl::SkipWhitespace())) {
        v.values.push_back(std::string(absl::StripAsciiWhitespace(o)));
      }
    } else if (type == "query" && uid == kPgUid) {
      const std::string sql = Substitute(StringField(t, "query"), Formatted(vars, false));
      absl::StatusOr<std::vector<Value>> rows = Sql(sql);
      if (!rows.ok()) return absl::InternalError(absl::StrCat(where, ": ", sql, ": ", rows.status().ToString()));
      for (const Value& row : *rows) {  // the option's value (Grafana also takes a one-column answer)
        const Value* value = Field(row, "__value");
        if (value == nullptr) return absl::InvalidArgumentError(where + ": name the value column __value: " + sql);
        v.values.push_back(value->kind_case() == Value::kNumberValue ? absl::StrCat(value->number_value())
                                                                      : value->string_value());
      }
      if (!v.multi && !v.values.empty()) v.values.resize(1);  // Grafana's default: the first option
    } else if (type == "query" && uid == kPromUid) {
      const Value* q = Field(t, "query");
      std::string query = q && q->kind_case() == Value::kStringValue ? q->string_value() : StringField(*q, "query");
      query = Substitute(query, Formatted(vars, true));
      // label_values(SELECTOR, LABEL): Grafana asks the series API.
      if (!absl::StartsWith(query, "label_values(") || !absl::EndsWith(query, ")")) {
        return absl::InvalidArgumentError(where + ": only label_values(selector, label) is checked here: " + query);
      }
      const std::string inner = query.substr(13, query.size() - 14);
      const size_t comma = inner.rfind(',');
      if (comma == std::string::npos) return absl::InvalidArgumentError(where + ": " + query);
      const std::string selector(absl::StripAsciiWhitespace(inner.substr(0, comma)));
      const std::string label(absl::StripAsciiWhitespace(inner.substr(comma + 1)));
      absl::StatusOr<Value> data =
          PromApi(absl::StrCat("/api/v1/label/", label, "/values?match[]=", UrlEncode(selector), "&", RangeParams()));
      if (!data.ok()) return absl::InternalError(absl::StrCat(where, ": ", query, ": ", data.status().ToString()));
      for (const Value& x : data->list_value().values()) v.values.push_back(x.string_value());
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ": type ", type, " on data source '", uid,
                                                     "' is not one this test knows how to resolve"));
    }
    if (v.values.empty()) return absl::NotFoundError(where + ": no values");
    vars.push_back(v);
  }
  return vars;
}

std::vector<Query> PrometheusGrafanaTest::PanelQueries(const Dashboard& d) {
  std::vector<Query> out;
  std::vector<const Value*> panels;
  if (const Value* top = Field(d.json, "panels")) {
    for (const Value& p : top->list_value().values()) {
      panels.push_back(&p);
      if (const Value* nested = Field(p, "panels")) {  // collapsed rows hold their panels
        for (const Value& n : nested->list_value().values()) panels.push_back(&n);
      }
    }
  }
  for (const Value* p : panels) {
    const Value* targets = Field(*p, "targets");
    if (targets == nullptr) continue;
    const Value* panel_ds = Field(*p, "datasource");
    for (const Value& t : targets->list_value().values()) {
      const Value* ds = Field(t, "datasource");
      if (ds == nullptr) ds = panel_ds;
      Query q;
      q.where = absl::StrCat(d.file, " / ", StringField(*p, "title"), " / ", StringField(t, "refId"));
      q.datasource = ds ? StringField(*ds, "uid") : "";
      q.text = q.datasource == kPgUid ? StringField(t, "rawSql") : StringField(t, "expr");
      out.push_back(q);
    }
  }
  return out;
}

TEST_F(PrometheusGrafanaTest, EveryDashboardQueryReturnsData) {
  const std::vector<Dashboard> dashboards = Dashboards();
  ASSERT_EQ(dashboards.size(), 2u) << "deploy/grafana/dashboards: Sweep operations and LayerNorm sensitivity";
  int prom_queries = 0, sql_queries = 0;
  for (const Dashboard& d : dashboards) {
    SCOPED_TRACE(d.file);
    absl::StatusOr<std::vector<Variable>> vars = ResolveVariables(d);
    ASSERT_TRUE(vars.ok()) << vars.status();
    for (const Variable& v : *vars) {
      if (v.name == "sweep") {
        EXPECT_EQ(v.values, std::vector<std::string>{absl::StrCat(stack->sweep_id)});
      }
    }
    const std::vector<Query> queries = PanelQueries(d);
    EXPECT_GE(queries.size(), 6u);
    for (const Query& q : queries) {
      SCOPED_TRACE(q.where);
      if (q.text.empty()) {
        ADD_FAILURE() << "a target without a query";
        continue;
      }
      const std::string text = Substitute(q.text, Formatted(*vars, q.datasource == kPromUid));
      EXPECT_FALSE(absl::StrContains(text, "$")) << "unresolved variable in " << text;
      if (q.datasource == kPromUid) {
        ++prom_queries;
        absl::Status s = ExpectPromData(text);
        EXPECT_TRUE(s.ok()) << text << ": " << s;
      } else if (q.datasource == kPgUid) {
        ++sql_queries;
        absl::StatusOr<std::vector<Value>> rows = Sql(text);
        if (!rows.ok()) {
          ADD_FAILURE() << text << ": " << rows.status();
          continue;
        }
        // layer_diagnostics is filled by trainers that report diagnostics
        // (issue 16): until this stack's trials wrote any, a panel on it
        // need only run.
        if (rows->empty() && absl::StrContains(text, "layer_diagnostics")) {
          absl::StatusOr<std::vector<Value>> any = Sql("SELECT 1 AS one FROM layer_diagnostics LIMIT 1");
          ASSERT_TRUE(any.ok()) << any.status();
          if (any->empty()) continue;
        }
        // lr_boundary has rows for boundary_search sweeps only (issue 17);
        // for this stack's grid sweep its panel need only run, and be empty.
        if (absl::StrContains(text, "FROM lr_boundary")) {
          EXPECT_TRUE(rows->empty()) << text;
          continue;
        }
        EXPECT_GT(rows->size(), 0u) << text;
        // Some number to show (a heatmap of NULLs is no heatmap).
        bool number = false;
        for (const Value& row : *rows) {
          for (const auto& [column, value] : row.struct_value().fields()) {
            number = number || value.kind_case() == Value::kNumberValue;
          }
        }
        EXPECT_TRUE(number) << "no numeric value in " << rows->size() << " rows: " << text;
      } else {
        ADD_FAILURE() << "data source uid '" << q.datasource << "' is not one deploy/grafana/provisioning makes";
      }
    }
  }
  EXPECT_GE(prom_queries, 20);
  EXPECT_GE(sql_queries, 5);
}

TEST_F(PrometheusGrafanaTest, EveryRecordingRuleReturnsData) {
  const YAML::Node rules = YAML::LoadFile(stack->src + "/deploy/prometheus/normsweep-rules.yml");
  int n = 0;
  for (const YAML::Node& group : rules["groups"]) {
    for (const YAML::Node& rule : group["rules"]) {
      const std::string name = rule["record"].as<std::string>();
      ++n;
      absl::Status s = ExpectPromData(name);
      EXPECT_TRUE(s.ok()) << name << " (" << rule["expr"].as<std::string>() << "): " << s;
    }
  }
  EXPECT_GE(n, 5);
}

TEST_F(PrometheusGrafanaTest, LiveLossSeriesCarryTheTrialsLabels) {
  // The sensitivity dashboard filters and colours by these labels.
  absl::StatusOr<Value> data = PromApi(absl::StrCat(
      "/api/v1/series?match[]=", UrlEncode(absl::StrCat("normsweep_trial_val_loss{sweep=\"", stack->sweep_id, "\"}")),
      "&", RangeParams()));
  ASSERT_TRUE(data.ok()) << data.status();
  std::set<std::string> placements, cells;
  for (const Value& series : data->list_value().values()) {
    placements.insert(StringField(series, "placement"));
    cells.insert(absl::StrCat(StringField(series, "placement"), " ", StringField(series, "warmup_steps"), " ",
                              StringField(series, "peak_lr")));
    EXPECT_NE(StringField(series, "trial"), "");
    EXPECT_NE(StringField(series, "seed"), "");
  }
  EXPECT_EQ(placements, (std::set<std::string>{"post", "pre"}));
  EXPECT_EQ(cells.size(), 8u) << "every trial of the sweep was scraped while it ran";
}

TEST_F(PrometheusGrafanaTest, PromtoolAcceptsConfigsRulesAndOurMetrics) {
  const std::string p = stack->src + "/deploy/prometheus/";
  for (const std::string& config :
       {p + "prometheus.yml", p + "prometheus-k8s.yml", p + "prometheus-compose.yml"}) {
    CommandRun r = RunCommand({stack->promtool, "check", "config", config}, stack->dir + "/promtool.out");
    EXPECT_EQ(r.exit_code, 0) << config << ":\n" << r.output;
  }
  CommandRun rules = RunCommand({stack->promtool, "check", "rules", p + "normsweep-rules.yml"}, stack->dir + "/promtool.out");
  EXPECT_EQ(rules.exit_code, 0) << rules.output;
  for (const auto& [what, text] : std::map<std::string, std::string>{
           {"scheduler", stack->scheduler_metrics}, {"worker", stack->worker_metrics_live}}) {
    const std::string file = stack->dir + "/" + what + ".metrics";
    std::ofstream(file) << text;
    CommandRun r = RunCommand({"/bin/sh", "-c", absl::StrCat("exec '", stack->promtool, "' check metrics < '", file, "'")},
                       stack->dir + "/promtool.out");
    EXPECT_EQ(r.exit_code, 0) << what << " /metrics:\n" << r.output;
  }
  EXPECT_TRUE(absl::StrContains(stack->scheduler_metrics, "normsweep_scheduler_progress_points_total{kind=\"metric\"}"));
}

}  // namespace
}  // namespace normsweep
