#include "client/sweep_flags.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/did_you_mean.h"
#include "client/sweep_file.h"
#include "common/quote.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"

namespace normsweep::client {
namespace {

using google::protobuf::FieldDescriptor;

// An integer, also written as an integral number ("1e3").
template <typename Int>
bool ParseInteger(const std::string& text, Int* out) {
  if (absl::SimpleAtoi(text, out)) return true;
  double d = 0;
  if (!absl::SimpleAtod(text, &d) || !std::isfinite(d) || d != std::floor(d)) return false;
  if (d < static_cast<double>(std::numeric_limits<Int>::min()) ||
      d > static_cast<double>(std::numeric_limits<Int>::max())) {
    return false;
  }
  *out = static_cast<Int>(d);
  return true;
}

bool ParseFinite(const std::string& text, double* out) { return absl::SimpleAtod(text, out) && std::isfinite(*out); }

absl::Status NotA(const std::string& flag, const std::string& text, const char* what) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", QuoteForError(text), " is not ", what));
}

std::vector<std::string> Items(const std::string& csv) {
  return absl::StrSplit(csv, ',', absl::SkipEmpty());
}

template <typename Repeated>
absl::Status AddIntegers(const std::string& flag, const std::string& csv, Repeated* out) {
  for (const std::string& item : Items(csv)) {
    int32_t v = 0;
    if (!ParseInteger(item, &v)) return NotA(flag, item, "an integer");
    out->Add(v);
  }
  return absl::OkStatus();
}

absl::Status SetInt32(const CliArgs& args, const std::string& flag, void (v1::SweepSpec::*set)(int32_t),
                      v1::SweepSpec* spec) {
  if (!args.Has(flag)) return absl::OkStatus();
  int32_t v = 0;
  if (!ParseInteger(args.Get(flag), &v)) return NotA("--" + flag, args.Get(flag), "an integer");
  (spec->*set)(v);
  return absl::OkStatus();
}

const FieldDescriptor* FindField(const std::string& name) {
  const auto* d = v1::TrainConfig::descriptor();
  if (const FieldDescriptor* f = d->FindFieldByName(name)) return f;
  for (int i = 0; i < d->field_count(); ++i) {
    if (d->field(i)->json_name() == name) return d->field(i);
  }
  return nullptr;
}

// One --set: the field named by `key` set to `text` by the field's type.
absl::Status SetField(const std::string& set, const std::string& key, const std::string& text,
                      v1::TrainConfig* config) {
  const FieldDescriptor* f = FindField(key);
  if (f == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("--set ", set, ": TrainConfig has no field ", QuoteForError(key),
                                                   DidYouMean(key, FieldNames(*v1::TrainConfig::descriptor()))));
  }
  const auto* r = config->GetReflection();
  const std::string where = absl::StrCat("--set ", set, " (TrainConfig.", f->name(), ")");
  if (f->is_repeated()) return absl::InvalidArgumentError(where + ": a list; --set takes single values");
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      int32_t v = 0;
      if (!ParseInteger(text, &v)) return NotA(where, text, "an integer");
      r->SetInt32(config, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      int64_t v = 0;
      if (!ParseInteger(text, &v)) return NotA(where, text, "an integer");
      r->SetInt64(config, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v = 0;
      if (!ParseInteger(text, &v)) return NotA(where, text, "a non-negative integer");
      r->SetUInt32(config, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v = 0;
      if (!ParseInteger(text, &v)) return NotA(where, text, "a non-negative integer");
      r->SetUInt64(config, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      double v = 0;
      if (!ParseFinite(text, &v)) return NotA(where, text, "a finite number");
      r->SetDouble(config, f, v);
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      double v = 0;
      if (!ParseFinite(text, &v)) return NotA(where, text, "a finite number");
      r->SetFloat(config, f, static_cast<float>(v));
      return absl::OkStatus();
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      if (text != "true" && text != "false") return NotA(where, text, "true or false");
      r->SetBool(config, f, text == "true");
      return absl::OkStatus();
    case FieldDescriptor::CPPTYPE_STRING:
      r->SetString(config, f, text);
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(where + ": this field cannot be set with --set");
  }
}

}  // namespace

absl::Status ApplySetFlags(const std::vector<std::string>& sets, v1::TrainConfig* config) {
  for (const std::string& set : sets) {
    const size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError("--set " + set + ": expected FIELD=VALUE");
    }
    if (absl::Status s = SetField(set, set.substr(0, eq), set.substr(eq + 1), config); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::SweepSpec> SpecFromFlags(const CliArgs& args) {
  if (!args.Has("name")) return absl::InvalidArgumentError("--name is required when no sweep file is given");
  v1::SweepSpec spec;
  spec.set_name(args.Get("name"));
  if (args.Has("placements")) {
    for (const std::string& p : Items(args.Get("placements"))) spec.add_placements(p);
  }
  if (absl::Status s = AddIntegers("--warmup-steps", args.Get("warmup-steps"), spec.mutable_warmup_steps()); !s.ok()) {
    return s;
  }
  if (args.Has("lrs")) {
    for (const std::string& item : Items(args.Get("lrs"))) {
      double lr = 0;
      if (!ParseFinite(item, &lr)) return NotA("--lrs", item, "a finite number");
      spec.add_peak_lrs(lr);
    }
  }
  if (absl::Status s = AddIntegers("--seeds", args.Get("seeds"), spec.mutable_seeds()); !s.ok()) return s;
  for (const auto& [flag, set] : {std::pair{"max-attempts", &v1::SweepSpec::set_max_attempts},
                                  std::pair{"max-interruptions", &v1::SweepSpec::set_max_interruptions},
                                  std::pair{"priority", &v1::SweepSpec::set_priority},
                                  std::pair{"max-concurrent", &v1::SweepSpec::set_max_concurrent_trials}}) {
    if (absl::Status s = SetInt32(args, flag, set, &spec); !s.ok()) return s;
  }
  if (absl::Status s = ApplySetFlags(args.All("set"), spec.mutable_base()); !s.ok()) return s;
  FillAxisDefaults(&spec);  // as for a sweep file that leaves them out
  return spec;
}

}  // namespace normsweep::client
