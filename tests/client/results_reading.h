// Reading what client/results.cc renders, for its tests: trials as the
// views read them, the table's words, the CSV by column name, the JSON as a
// Struct. Each reader fails the calling test on malformed text.
#ifndef NORMSWEEP_TESTS_CLIENT_RESULTS_READING_H_
#define NORMSWEEP_TESTS_CLIENT_RESULTS_READING_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "normsweep/v1/sweep.pb.h"

namespace normsweep::client::results_testing {

inline v1::Trial MakeTrial(const std::string& placement, int warmup, double lr, int seed,
                           v1::TrialState state, double loss = 0) {
  v1::Trial t;
  t.mutable_config()->set_placement(placement);
  t.mutable_config()->set_warmup_steps(warmup);
  t.mutable_config()->set_lr(lr);
  t.mutable_config()->set_seed(seed);
  t.set_state(state);
  if (state == v1::TRIAL_SUCCEEDED) t.mutable_result()->set_final_val_loss(loss);
  return t;
}

// A trial whose l0 (the loss at initialisation) is known.
inline v1::Trial WithL0(v1::Trial t, double l0) {
  t.mutable_result()->set_init_val_loss(l0);
  return t;
}

// Post-LN, l0 6.0 everywhere (the views compute; the numbers by hand):
//   warm-up 0:   1e-3: 3.0, 3.5 (l 3.25)   1e-2: 2.5, DIVERGED = 6.0 (l 4.25)
//                l* 3.25 at 1e-3, LRS (0 + 1.0) / 2 = 0.5, one point at l0
//   warm-up 100: 1e-3: 3.0, 3.0 (l 3.0)    1e-2: 2.5, 2.5 (l 2.5)
//                l* 2.5 at 1e-2, LRS (0.5 + 0) / 2 = 0.25
//   summary: 2 warm-ups, mean 0.375, min 0.25 at 100, max 0.5, best l* 2.5
//   ANOVA: f = [[3.25, 4.25], [3.0, 2.5]], mu 3.25; a = +-0.5: var 0.25;
//   b = -+0.125: var 0.015625; residuals +-0.375: var 0.140625; seed
//   variances 0.0625, 3.0625, 0, 0: var 0.78125; total 1.1875; shares
//   21.1%, 1.3%, 11.8%, 65.8% (0.210526, 0.013158, 0.118421, 0.657895).
// Pre-LN, one cell (warm-up 0, lr 1e-3: 2.0, 2.2): LRS 0 from one lr,
// marked; only the seeds vary.
inline std::vector<v1::Trial> LrSensitivityTrials() {
  return {WithL0(MakeTrial("post", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 0, 1e-2, 1, v1::TRIAL_DIVERGED), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 0, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-3, 1, v1::TRIAL_SUCCEEDED, 3.0), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 0, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("post", 100, 1e-2, 1, v1::TRIAL_SUCCEEDED, 2.5), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 0, v1::TRIAL_SUCCEEDED, 2.0), 6.0),
          WithL0(MakeTrial("pre", 0, 1e-3, 1, v1::TRIAL_SUCCEEDED, 2.2), 6.0)};
}

// The whitespace-separated words of each line of text.
inline std::vector<std::vector<std::string>> Words(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    out.push_back(absl::StrSplit(line, ' ', absl::SkipEmpty()));
  }
  return out;
}

inline bool HasRow(const std::string& text, const std::vector<std::string>& words) {
  for (const auto& w : Words(text)) {
    if (w == words) return true;
  }
  return false;
}

// The fields of one CSV line (RFC 4180: a quoted field may hold commas, and
// "" stands for a quote).
inline std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

// The CSV's header, then each row by column name; fails the test when a
// row's fields do not match the header.
struct Csv {
  std::vector<std::string> header;
  std::vector<std::map<std::string, std::string>> rows;
};
inline Csv ParseCsv(const std::string& text) {
  Csv csv;
  const std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  if (lines.empty()) return csv;
  csv.header = CsvFields(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::vector<std::string> fields = CsvFields(lines[i]);
    EXPECT_EQ(fields.size(), csv.header.size()) << lines[i];
    std::map<std::string, std::string>& row = csv.rows.emplace_back();
    for (size_t f = 0; f < fields.size() && f < csv.header.size(); ++f) row[csv.header[f]] = fields[f];
  }
  return csv;
}

// A CSV field read back as a double (strtod, as a reader would), NaN when
// it is not a whole number.
inline double Number(const std::string& field) {
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  return !field.empty() && end == field.c_str() + field.size() ? v : std::nan("");
}

// The JSON parsed back (protobuf's JSON parser into a Struct); an empty one
// after failing the test.
inline google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct out;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &out);
  EXPECT_TRUE(status.ok()) << status << "\n" << json;
  return out;
}

// json[key][i] as an object.
inline const google::protobuf::Struct& Item(const google::protobuf::Struct& json, const std::string& key, int i) {
  return json.fields().at(key).list_value().values(i).struct_value();
}
inline bool IsNull(const google::protobuf::Struct& o, const std::string& key) {
  return o.fields().at(key).kind_case() == google::protobuf::Value::kNullValue;
}

}  // namespace normsweep::client::results_testing

#endif  // NORMSWEEP_TESTS_CLIENT_RESULTS_READING_H_
