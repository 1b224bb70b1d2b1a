#include "client/sweep_file.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/did_you_mean.h"
#include "common/json_quote.h"
#include "common/quote.h"
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

// A field of d by its .proto name or its JSON name (protobuf's JSON parser
// takes both).
const google::protobuf::FieldDescriptor* FindField(const google::protobuf::Descriptor& d, const std::string& key) {
  if (const auto* f = d.FindFieldByName(key)) return f;
  for (int i = 0; i < d.field_count(); ++i) {
    if (d.field(i)->json_name() == key) return d.field(i);
  }
  return nullptr;
}

// Every key of node, a mapping for message d at path ("" for the spec
// itself), names a field of d, and so on down the messages of our schema
// (values of other types are left to the JSON parser, which names them).
absl::Status CheckFieldNames(const YAML::Node& node, const google::protobuf::Descriptor& d, const std::string& path) {
  if (!node.IsMap()) return absl::OkStatus();
  for (const auto& kv : node) {
    if (!kv.first.IsScalar()) continue;  // the JSON parser refuses it
    const std::string key = kv.first.Scalar();
    const google::protobuf::FieldDescriptor* f = FindField(d, key);
    if (f == nullptr) {
      const YAML::Mark mark = kv.first.Mark();
      const std::string where =
          mark.is_null() ? "" : absl::StrCat("line ", mark.line + 1, ", column ", mark.column + 1, ": ");
      return absl::InvalidArgumentError(absl::StrCat(where, "unknown field ", QuoteForError(key),
                                                     path.empty() ? "" : " in " + path, " (", d.name(), ")",
                                                     DidYouMean(key, FieldNames(d))));
    }
    const google::protobuf::Descriptor* inner = f->message_type();
    if (inner == nullptr || inner->file()->package() != v1::SweepSpec::descriptor()->file()->package()) continue;
    const std::string field_path = path.empty() ? f->name() : absl::StrCat(path, ".", f->name());
    if (f->is_repeated() && kv.second.IsSequence()) {
      for (size_t i = 0; i < kv.second.size(); ++i) {
        if (absl::Status s = CheckFieldNames(kv.second[i], *inner, absl::StrCat(field_path, "[", i, "]")); !s.ok()) {
          return s;
        }
      }
    } else if (absl::Status s = CheckFieldNames(kv.second, *inner, field_path); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> LoadYaml(const std::string& text) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, ", column ", e.mark.column + 1, ": ", e.msg));
  }
}

absl::StatusOr<std::string> NodeToJson(const YAML::Node& root) {
  if (!root.IsMap()) return absl::InvalidArgumentError("the sweep must be a mapping of field names to values");
  std::string json;
  try {
    Emit(root, &json);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
  return json;
}

}  // namespace

absl::StatusOr<std::string> YamlToJson(const std::string& text) {
  absl::StatusOr<YAML::Node> root = LoadYaml(text);
  if (!root.ok()) return root.status();
  return NodeToJson(*root);
}

absl::StatusOr<v1::SweepSpec> SweepSpecFromYaml(const std::string& text) {
  absl::StatusOr<YAML::Node> root = LoadYaml(text);
  if (!root.ok()) return root.status();
  absl::StatusOr<std::string> json = NodeToJson(*root);
  if (!json.ok()) return json.status();
  if (absl::Status s = CheckFieldNames(*root, *v1::SweepSpec::descriptor(), ""); !s.ok()) return s;
  v1::SweepSpec spec;
  if (absl::Status st = schema::FromJson(*json, schema::UnknownFields::kReject, &spec); !st.ok()) return st;
  FillAxisDefaults(&spec);
  return spec;
}

void FillAxisDefaults(v1::SweepSpec* spec) {
  if (spec->seeds().empty()) spec->add_seeds(0);
  if (spec->warmup_steps().empty() && !spec->has_random_search()) spec->add_warmup_steps(0);
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
