// Grafana is not in Debian: what it does with a dashboard before it sends a
// query (deploy/grafana/dashboards), done here for prometheus_grafana_test.
// Template variables resolved in order against the stack's Prometheus and
// PostgreSQL, formatted per data source, and substituted into each panel's
// query.
#ifndef NORMSWEEP_TESTS_DEPLOY_GRAFANA_DASHBOARDS_H_
#define NORMSWEEP_TESTS_DEPLOY_GRAFANA_DASHBOARDS_H_

#include <map>
#include <string>
#include <vector>

#include <google/protobuf/struct.pb.h>

#include "absl/status/statusor.h"
#include "tests/deploy/deploy_stack.h"

namespace normsweep::testing {

// The data sources of deploy/grafana/provisioning.
constexpr char kPromUid[] = "normsweep-prometheus";
constexpr char kPgUid[] = "normsweep-postgres";

// A Grafana template variable once resolved: its name, its values and how
// Grafana formats it (multi-value and "include All" variables are quoted or
// regex-escaped, single ones inserted as they are).
struct Variable {
  std::string name;
  std::vector<std::string> values;
  bool multi = false;
};

// One panel target or variable query, with where it came from.
struct Query {
  std::string where;       // "dashboard / panel / refId"
  std::string datasource;  // uid
  std::string text;
};

struct Dashboard {
  std::string file;
  google::protobuf::Value json;
};

// deploy/grafana/dashboards/*.json under src, by file name (a file that
// does not parse is a test failure).
std::vector<Dashboard> Dashboards(const std::string& src);

// Resolves a dashboard's template variables in order, as Grafana does with
// every option selected ("All" where the variable offers it).
absl::StatusOr<std::vector<Variable>> ResolveVariables(const DeployStack& stack, const Dashboard& d);

// Every panel's targets, collapsed rows' panels included.
std::vector<Query> PanelQueries(const Dashboard& d);

// Grafana's built-in variables and vars, formatted for Prometheus (prom) or
// for SQL.
std::map<std::string, std::string> Formatted(const DeployStack& stack, const std::vector<Variable>& vars, bool prom);

// Replaces $name and ${name} (not $name_longer) with the formatted values.
std::string Substitute(std::string text, const std::map<std::string, std::string>& values);

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_DEPLOY_GRAFANA_DASHBOARDS_H_
