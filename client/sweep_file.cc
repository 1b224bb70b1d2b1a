#include "client/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/json_quote.h"
#include "proto/schema/json.h"

namespace normsweep::client {
namespace {

bool IsBareJsonScalar(const std::string& s) {
  static const std::regex number(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  return s == "true" || s == "false" || s == "null" || std::regex_match(s, number);
}

// strings: every scalar is a JSON string (an extra axis's values, repeated
// string in the schema, so that `values: [false, true]` or `[6, 12]` read as
// written rather than as a bool or a number the parser refuses).
void Emit(const YAML::Node& node, std::string* out, bool strings = false) {
  switch (node.Type()) {
    case YAML::NodeType::Null:
      *out += "null";
      return;
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      // Tag "!" marks a quoted scalar: always a string.
      if (!strings && node.Tag() != "!" && IsBareJsonScalar(s)) {
        *out += s;
      } else {
        *out += JsonQuote(s);
      }
      return;
    }
    case YAML::NodeType::Sequence: {
      *out += "[";
      bool first = true;
      for (const YAML::Node& item : node) {
        if (!first) *out += ",";
        first = false;
        Emit(item, out, strings);
      }
      *out += "]";
      return;
    }
    case YAML::NodeType::Map: {
      *out += "{";
      bool first = true;
      for (const auto& kv : node) {
        if (!first) *out += ",";
        first = false;
        const std::string key = kv.first.as<std::string>();
        *out += JsonQuote(key);
        *out += ":";
        // ExtraAxis.values is the schema's only field named values.
        Emit(kv.second, out, key == "values" && kv.second.IsSequence());
      }
      *out += "}";
      return;
    }
    case YAML::NodeType::Undefined:
      *out += "null";
      return;
  }
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(const std::string& text) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
  if (!root.IsMap()) return absl::InvalidArgumentError("the sweep must be a mapping of field names to values");
  std::string json;
  try {
    Emit(root, &json);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  return json;
}

absl::StatusOr<v1::SweepSpec> SweepSpecFromYaml(const std::string& text) {
  absl::StatusOr<std::string> json = YamlToJson(text);
  if (!json.ok()) return json.status();
  v1::SweepSpec spec;
  if (absl::Status st = schema::FromJson(*json, schema::UnknownFields::kReject, &spec); !st.ok()) return st;
  return spec;
}

absl::StatusOr<v1::SweepSpec> LoadSweepSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read the file"));
  std::stringstream ss;
  ss << in.rdbuf();
  absl::StatusOr<v1::SweepSpec> spec = SweepSpecFromYaml(ss.str());
  if (!spec.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", spec.status().message()));
  return spec;
}

}  // namespace normsweep::client
