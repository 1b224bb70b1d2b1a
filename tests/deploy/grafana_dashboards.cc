#include "tests/deploy/grafana_dashboards.h"

#include <dirent.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/common/read_file.h"

namespace normsweep::testing {

using google::protobuf::Value;

namespace {

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

}  // namespace

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

std::vector<Dashboard> Dashboards(const std::string& src) {
  std::vector<Dashboard> out;
  const std::string dir = src + "/deploy/grafana/dashboards";
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

std::map<std::string, std::string> Formatted(const DeployStack& stack, const std::vector<Variable>& vars, bool prom) {
  std::map<std::string, std::string> out = {
      {"__rate_interval", kRateInterval},
      {"__interval", absl::StrCat(kStepSeconds, "s")},
      {"__range", absl::StrCat(static_cast<int64_t>(stack.end_unix - stack.start_unix) + 1, "s")}};
  for (const Variable& v : vars) out[v.name] = prom ? FormatProm(v) : FormatSql(v);
  return out;
}

absl::StatusOr<std::vector<Variable>> ResolveVariables(const DeployStack& stack, const Dashboard& d) {
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
      const std::string sql = Substitute(StringField(t, "query"), Formatted(stack, vars, false));
      absl::StatusOr<std::vector<Value>> rows = stack.Sql(sql);
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
      query = Substitute(query, Formatted(stack, vars, true));
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
          stack.PromApi(absl::StrCat("/api/v1/label/", label, "/values?match[]=", UrlEncode(selector), "&",
                                     stack.RangeParams()));
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

std::vector<Query> PanelQueries(const Dashboard& d) {
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

}  // namespace normsweep::testing
