// deploy/prometheus and deploy/grafana against the real thing
// (deploy_stack.h: PostgreSQL, the scheduler, a worker training real trials,
// Prometheus scraping both through a small sweep). Every PromQL expression
// of both dashboards and every recording rule must parse and return data
// over the sweep's time range, every SQL panel and variable query must
// return rows from the real database (as Grafana's read-only role of
// deploy/docker/postgres-init), and promtool must accept the configs, the
// rules and our /metrics output, whose names follow one pattern (the
// deprecated ones, kept one release, twin the new ones and are read by no
// dashboard or rule). Grafana's template variables are
// substituted the way Grafana does (grafana_dashboards.h). No Prometheus
// installed is a failure (deploy/install-deps.sh installs it).
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_stack.h"
#include "tests/deploy/grafana_dashboards.h"
#include "worker/worker_metrics.h"

namespace normsweep::testing {
namespace {

using google::protobuf::Value;

// The stack every test below shares: started once.
DeployStack* stack = nullptr;
std::string* stack_error = nullptr;  // set when setting it up failed

class PrometheusGrafanaTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack = new DeployStack;
    stack_error = new std::string(StartDeployStack(*stack));
  }
  static void TearDownTestSuite() {
    delete stack;
    delete stack_error;
    stack = nullptr;
    stack_error = nullptr;
  }
  void SetUp() override { ASSERT_EQ(*stack_error, "") << "setting up the stack failed"; }
};

TEST_F(PrometheusGrafanaTest, EveryDashboardQueryReturnsData) {
  const std::vector<Dashboard> dashboards = Dashboards(stack->src);
  ASSERT_EQ(dashboards.size(), 2u) << "deploy/grafana/dashboards: Sweep operations and LayerNorm sensitivity";
  int prom_queries = 0, sql_queries = 0;
  for (const Dashboard& d : dashboards) {
    SCOPED_TRACE(d.file);
    absl::StatusOr<std::vector<Variable>> vars = ResolveVariables(*stack, d);
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
      const std::string text = Substitute(q.text, Formatted(*stack, *vars, q.datasource == kPromUid));
      EXPECT_FALSE(absl::StrContains(text, "$")) << "unresolved variable in " << text;
      if (q.datasource == kPromUid) {
        ++prom_queries;
        absl::Status s = stack->ExpectPromData(text);
        EXPECT_TRUE(s.ok()) << text << ": " << s;
      } else if (q.datasource == kPgUid) {
        ++sql_queries;
        absl::StatusOr<std::vector<Value>> rows = stack->Sql(text);
        if (!rows.ok()) {
          ADD_FAILURE() << text << ": " << rows.status();
          continue;
        }
        // layer_diagnostics is filled by trainers that report diagnostics
        // (issue 16): until this stack's trials wrote any, a panel on it
        // need only run.
        if (rows->empty() && absl::StrContains(text, "layer_diagnostics")) {
          absl::StatusOr<std::vector<Value>> any = stack->Sql("SELECT 1 AS one FROM layer_diagnostics LIMIT 1");
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
      absl::Status s = stack->ExpectPromData(name);
      EXPECT_TRUE(s.ok()) << name << " (" << rule["expr"].as<std::string>() << "): " << s;
    }
  }
  EXPECT_GE(n, 5);
}

TEST_F(PrometheusGrafanaTest, LiveLossSeriesCarryTheTrialsLabels) {
  // The sensitivity dashboard filters and colours by these labels, and
  // names each series by placement and variant.
  absl::StatusOr<Value> data = stack->PromApi(absl::StrCat(
      "/api/v1/series?match[]=",
      UrlEncode(absl::StrCat("normsweep_worker_trial_val_loss{sweep=\"", stack->sweep_id, "\"}")), "&",
      stack->RangeParams()));
  ASSERT_TRUE(data.ok()) << data.status();
  std::set<std::string> placements, variants, trials;
  for (const Value& series : data->list_value().values()) {
    placements.insert(StringField(series, "placement"));
    variants.insert(StringField(series, "variant"));
    trials.insert(absl::StrCat(StringField(series, "placement"), " ", StringField(series, "variant"), " ",
                               StringField(series, "warmup_steps"), " ", StringField(series, "peak_lr")));
    EXPECT_NE(StringField(series, "trial"), "");
    EXPECT_NE(StringField(series, "seed"), "");
  }
  EXPECT_EQ(placements, (std::set<std::string>{"post", "pre"}));
  EXPECT_EQ(variants, (std::set<std::string>{"qk_norm=false", "qk_norm=true"}));
  EXPECT_EQ(trials.size(), 16u) << "every trial of the sweep was scraped while it ran, told apart by its variant";
}

// A /metrics text's families: name -> HELP, and its samples: the series
// (name and labels as written) -> value text.
struct MetricsText {
  std::map<std::string, std::string> help;
  std::map<std::string, std::string> samples;
};

MetricsText ParseMetrics(const std::string& text) {
  MetricsText m;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      const size_t space = line.find(' ');
      m.help[std::string(line.substr(0, space))] =
          space == absl::string_view::npos ? "" : std::string(line.substr(space + 1));
    } else if (!absl::StartsWith(line, "#")) {
      const size_t space = line.rfind(' ');
      if (space != absl::string_view::npos) {
        m.samples[std::string(line.substr(0, space))] = std::string(line.substr(space + 1));
      }
    }
  }
  return m;
}

TEST_F(PrometheusGrafanaTest, MetricNamesFollowOnePatternAndTheDeprecatedOnesTwinTheNew) {
  const MetricsText scheduler_text = ParseMetrics(stack->scheduler_metrics);
  const MetricsText worker_text = ParseMetrics(stack->worker_metrics_live);
  std::map<std::string, std::string> renamed;  // deprecated name -> name
  for (const worker::RenamedMetric& r : worker::RenamedTrialGauges()) renamed[r.deprecated_name] = r.name;
  ASSERT_FALSE(renamed.empty());
  for (const auto& [who, m] : std::map<std::string, const MetricsText*>{{"scheduler", &scheduler_text},
                                                                         {"worker", &worker_text}}) {
    EXPECT_GE(m->help.size(), 5u) << who;
    for (const auto& [name, help] : m->help) {
      if (!absl::StartsWith(name, "normsweep")) continue;  // the exposer's own, if any
      if (renamed.count(name)) {
        EXPECT_EQ(who, "worker") << name;
        EXPECT_TRUE(absl::StartsWith(help, "Deprecated")) << name << ": " << help;
      } else {
        EXPECT_TRUE(absl::StartsWith(name, absl::StrCat("normsweep_", who, "_"))) << who << " exports " << name;
      }
    }
  }
  // A running trial's series under both names, the old one with the labels
  // it always had (no variant). Their values are the same ones set together
  // (worker_metrics_test), but one scrape reads the families one after the
  // other while the trial trains, so it may catch them a step apart.
  int compared = 0;
  for (const auto& sample : worker_text.samples) {
    const std::string& series = sample.first;
    for (const auto& [old_name, name] : renamed) {
      if (!absl::StartsWith(series, name + "{")) continue;
      const size_t variant = series.find(",variant=\"");
      ASSERT_NE(variant, std::string::npos) << series;
      const size_t end = series.find('"', variant + 10);  // the value's closing quote
      ASSERT_NE(end, std::string::npos) << series;
      const std::string old_series =
          absl::StrCat(old_name, series.substr(name.size(), variant - name.size()), series.substr(end + 1));
      EXPECT_TRUE(worker_text.samples.count(old_series)) << "no " << old_series << " beside " << series;
      ++compared;
    }
  }
  EXPECT_GE(compared, 5) << stack->worker_metrics_live;
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
}  // namespace normsweep::testing
