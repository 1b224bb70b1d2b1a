#include "scheduler/sweep_expander.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "proto/schema/train_config.h"

namespace normsweep::scheduler {
namespace {

using google::protobuf::FieldDescriptor;

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

// Prefixes the trainer's message ("lr: must be > 0") with where it came from.
absl::Status Within(const std::string& where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(where, ": ", std::string(status.message())));
}

// Fields an extra axis may vary: scalar model/optimisation/data settings;
// not the four main axes and not the runtime fields the worker sets.
bool IsAxisField(const FieldDescriptor* f) {
  static const std::set<std::string> kExcluded = {"placement", "warmup_steps", "lr", "seed",
                                                  "threads", "device", "checkpoint_every"};
  if (f == nullptr || f->is_repeated() || kExcluded.contains(f->name())) return false;
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
}

std::string AllowedAxisFields() {
  std::string out;
  const auto* d = v1::TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (IsAxisField(d->field(i))) absl::StrAppend(&out, out.empty() ? "" : ", ", d->field(i)->name());
  }
  return out;
}

// One parsed extra-axis value, applied with reflection.
struct AxisValue {
  const FieldDescriptor* field;
  std::string text;
  int32_t i = 0;
  double d = 0;
};

void Apply(const AxisValue& v, v1::TrainConfig* config) {
  const auto* r = config->GetReflection();
  switch (v.field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(config, v.field, v.i); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(config, v.field, v.d); break;
    default: r->SetString(config, v.field, v.text); break;
  }
}

// Every string that is stored (PostgreSQL's text and jsonb hold no NUL
// characters) is checked here, before the database, naming its field.
absl::Status CheckStoredText(const std::string& where, const std::string& value, size_t max_length) {
  if (value.size() > max_length) return Invalid(where, absl::StrCat("at most ", max_length, " characters"));
  if (value.find('\0') != std::string::npos) return Invalid(where, "must not contain NUL characters");
  return absl::OkStatus();
}

// The shortest decimal text that reads back as d ("0.5", not "0.50000000000000000").
std::string ShortestDouble(double d) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, d);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == d) return text;
  }
  return absl::StrFormat("%.17g", d);
}

absl::StatusOr<AxisValue> ParseAxisValue(const FieldDescriptor* f, const std::string& text,
                                         const std::string& where) {
  AxisValue v{f, text};
  RETURN_IF_ERROR(CheckStoredText(where, text, kMaxStringFieldLength));
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
    if (!absl::SimpleAtoi(text, &v.i)) {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not an integer (", f->name(), ")"));
    }
    v.text = absl::StrCat(v.i);  // "02" and " 2" are 2
  } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    if (!absl::SimpleAtod(text, &v.d) || !std::isfinite(v.d)) {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not a finite number (", f->name(), ")"));
    }
    v.text = ShortestDouble(v.d);  // "0.50" is 0.5
  } else if (text.empty()) {
    return Invalid(where, "must not be empty");
  }
  return v;
}

// Known-good values for the four main axes, so that a base config or a
// single axis value can be checked on its own.
v1::TrainConfig Probe(const v1::TrainConfig& base) {
  v1::TrainConfig c = base;
  c.set_placement("post");
  c.set_lr(1e-3);
  c.set_warmup_steps(0);
  c.set_seed(0);
  return c;
}

absl::Status CheckBaseStrings(const v1::TrainConfig& base) {
  const auto* d = base.GetDescriptor();
  const auto* r = base.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING || f->is_repeated()) continue;
    RETURN_IF_ERROR(CheckStoredText(absl::StrCat("spec.base.", f->name()), r->GetString(base, f), kMaxStringFieldLength));
  }
  return absl::OkStatus();
}

// Two values of one axis are the same setting when they resolve to the same
// trainer config ("post" and "post-ln", "2" and "02"): the sweep would hold
// two trials of one config. The key is the resolved config's bytes.
absl::StatusOr<std::string> ResolvedKey(const v1::TrainConfig& config) {
  ASSIGN_OR_RETURN(v1::TrainConfig resolved, schema::ResolvedTrainConfig(config));
  return resolved.SerializeAsString();
}

// Keys seen on one axis, with where each was first seen.
class AxisValues {
 public:
  explicit AxisValues(std::string axis) : axis_(std::move(axis)) {}
  absl::Status Add(int index, const std::string& shown, const v1::TrainConfig& config) {
    const std::string where = absl::StrCat(axis_, "[", index, "]");
    absl::StatusOr<std::string> key = ResolvedKey(config);  // also validates it
    if (!key.ok()) return Within(where, key.status());
    auto [it, inserted] = first_.emplace(*std::move(key), index);
    if (!inserted) {
      return Invalid(where, absl::StrCat("duplicate value: ", QuoteForError(shown), " is the same setting as ",
                                         axis_, "[", it->second, "]"));
    }
    return absl::OkStatus();
  }

 private:
  const std::string axis_;
  std::map<std::string, int> first_;
};

// Deterministic across platforms (std distributions are not).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)

 private:
  uint64_t state_;
};

template <typename T>
absl::Status CheckAxisSize(const std::string& field, const T& values) {
  if (values.empty()) return Invalid(field, "must not be empty");
  if (values.size() > kMaxAxisValues) return Invalid(field, absl::StrCat("at most ", kMaxAxisValues, " values"));
  return absl::OkStatus();
}

}  // namespace

v1::SweepSpec NormalizedSpec(const v1::SweepSpec& spec) {
  v1::SweepSpec s = spec;
  if (s.max_attempts() == 0) s.set_max_attempts(kDefaultMaxAttempts);
  return s;
}

absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const v1::SweepSpec& spec) {
  // ---- scalar fields ----
  if (spec.name().empty()) return Invalid("spec.name", "required");
  if (spec.name().size() > kMaxNameLength) return Invalid("spec.name", absl::StrCat("at most ", kMaxNameLength, " characters"));
  // PostgreSQL's text and jsonb cannot hold NUL characters.
  RETURN_IF_ERROR(CheckStoredText("spec.name", spec.name(), kMaxNameLength));
  if (spec.max_attempts() < 0 || spec.max_attempts() > kMaxMaxAttempts) {
    return Invalid("spec.max_attempts", absl::StrCat("must be in [1, ", kMaxMaxAttempts, "] (0: default ", kDefaultMaxAttempts, ")"));
  }
  if (spec.priority() < -kMaxPriority || spec.priority() > kMaxPriority) {
    return Invalid("spec.priority", absl::StrCat("must be in [", -kMaxPriority, ", ", kMaxPriority, "]"));
  }
  if (spec.max_concurrent_trials() < 0) return Invalid("spec.max_concurrent_trials", "must be >= 0 (0: unlimited)");

  // ---- base config ----
  RETURN_IF_ERROR(CheckBaseStrings(spec.base()));
  RETURN_IF_ERROR(Within("spec.base", schema::ValidateTrainConfig(Probe(spec.base()))));

  // ---- main axes, each value on its own ----
  RETURN_IF_ERROR(CheckAxisSize("spec.placements", spec.placements()));
  RETURN_IF_ERROR(CheckAxisSize("spec.seeds", spec.seeds()));
  const bool random = spec.has_random_search();
  std::vector<std::pair<int32_t, double>> warmup_lr;  // (warm-up, lr) settings
  if (random) {
    if (!spec.warmup_steps().empty()) return Invalid("spec.warmup_steps", "must be empty when random_search is set");
    if (!spec.peak_lrs().empty()) return Invalid("spec.peak_lrs", "must be empty when random_search is set");
    const v1::RandomSearch& rs = spec.random_search();
    if (rs.samples() < 1 || rs.samples() > kMaxTrials) {
      return Invalid("spec.random_search.samples", absl::StrCat("must be in [1, ", kMaxTrials, "]"));
    }
    if (!std::isfinite(rs.lr_min()) || rs.lr_min() <= 0) return Invalid("spec.random_search.lr_min", "must be finite and > 0");
    if (!std::isfinite(rs.lr_max()) || rs.lr_max() < rs.lr_min()) {
      return Invalid("spec.random_search.lr_max", "must be finite and >= lr_min");
    }
    if (rs.warmup_min() < 0) return Invalid("spec.random_search.warmup_min", "must be >= 0");
    if (rs.warmup_max() < rs.warmup_min()) return Invalid("spec.random_search.warmup_max", "must be >= warmup_min");
  } else {
    RETURN_IF_ERROR(CheckAxisSize("spec.warmup_steps", spec.warmup_steps()));
    RETURN_IF_ERROR(CheckAxisSize("spec.peak_lrs", spec.peak_lrs()));
  }
  const v1::TrainConfig probe = Probe(spec.base());
  {
    AxisValues seen("spec.placements");
    for (int i = 0; i < spec.placements_size(); ++i) {
      const std::string& placement = spec.placements(i);
      const std::string where = absl::StrCat("spec.placements[", i, "]");
      RETURN_IF_ERROR(CheckStoredText(where, placement, kMaxPlacementLength));
      // An empty placement would resolve to the default (post).
      if (placement.empty()) return Invalid(where, "must not be empty (post or pre)");
      v1::TrainConfig c = probe;
      c.set_placement(placement);
      RETURN_IF_ERROR(seen.Add(i, placement, c));
    }
  }
  {
    AxisValues seen("spec.seeds");
    for (int i = 0; i < spec.seeds_size(); ++i) {
      v1::TrainConfig c = probe;
      c.set_seed(spec.seeds(i));
      RETURN_IF_ERROR(seen.Add(i, absl::StrCat(spec.seeds(i)), c));
    }
  }
  if (!random) {
    AxisValues seen_w("spec.warmup_steps");
    for (int i = 0; i < spec.warmup_steps_size(); ++i) {
      const std::string where = absl::StrCat("spec.warmup_steps[", i, "]");
      if (spec.warmup_steps(i) < 0) return Invalid(where, "warmup_steps: must be >= 0");
      v1::TrainConfig c = probe;
      c.set_warmup_steps(spec.warmup_steps(i));
      RETURN_IF_ERROR(seen_w.Add(i, absl::StrCat(spec.warmup_steps(i)), c));
    }
    AxisValues seen_lr("spec.peak_lrs");
    for (int i = 0; i < spec.peak_lrs_size(); ++i) {
      const std::string where = absl::StrCat("spec.peak_lrs[", i, "]");
      const double lr = spec.peak_lrs(i);
      if (!std::isfinite(lr) || lr <= 0) return Invalid(where, "lr: must be finite and > 0");
      v1::TrainConfig c = probe;
      c.set_lr(lr);
      RETURN_IF_ERROR(seen_lr.Add(i, ShortestDouble(lr), c));
    }
  }

  // ---- extra axes ----
  std::vector<std::vector<AxisValue>> extra;
  {
    std::set<std::string> fields;
    for (int a = 0; a < spec.extra_axes_size(); ++a) {
      const v1::ExtraAxis& axis = spec.extra_axes(a);
      const std::string where = absl::StrCat("spec.extra_axes[", a, "]");
      const FieldDescriptor* f = v1::TrainConfig::descriptor()->FindFieldByName(axis.field());
      if (!IsAxisField(f)) {
        return Invalid(where + ".field", absl::StrCat(QuoteForError(axis.field()), " cannot be an axis; allowed: ",
                                                      AllowedAxisFields()));
      }
      if (!fields.insert(axis.field()).second) return Invalid(where + ".field", "duplicate axis " + axis.field());
      RETURN_IF_ERROR(CheckAxisSize(where + ".values", axis.values()));
      std::vector<AxisValue> values;
      AxisValues seen(where + ".values");
      for (int i = 0; i < axis.values_size(); ++i) {
        const std::string vwhere = absl::StrCat(where, ".values[", i, "]");
        ASSIGN_OR_RETURN(AxisValue v, ParseAxisValue(f, axis.values(i), vwhere));
        v1::TrainConfig c = probe;
        Apply(v, &c);
        RETURN_IF_ERROR(seen.Add(i, axis.values(i), c));
        values.push_back(v);
      }
      extra.push_back(std::move(values));
    }
  }

  // ---- grid size ----
  int64_t settings = random ? spec.random_search().samples()
                            : int64_t{spec.warmup_steps_size()} * spec.peak_lrs_size();
  int64_t total = settings * spec.placements_size() * spec.seeds_size();
  int64_t variants = 1;
  for (const auto& values : extra) {
    variants *= static_cast<int64_t>(values.size());
    if (variants > kMaxTrials) break;
  }
  if (variants > kMaxTrials || total * variants > kMaxTrials) {
    return Invalid("spec",
                   absl::StrCat("the grid (placements x ", random ? "random_search.samples" : "warmup_steps x peak_lrs",
                                " x seeds x extra_axes) has ", total * std::min<int64_t>(variants, kMaxTrials + 1),
                                "+ trials; the limit is ", kMaxTrials));
  }
  total *= variants;

  if (random) {
    const v1::RandomSearch& rs = spec.random_search();
    SplitMix64 rng(rs.seed());
    const double log_min = std::log(rs.lr_min()), log_max = std::log(rs.lr_max());
    const uint64_t span = static_cast<uint64_t>(int64_t{rs.warmup_max()} - rs.warmup_min()) + 1;
    for (int i = 0; i < rs.samples(); ++i) {
      double lr = std::exp(log_min + rng.Uniform() * (log_max - log_min));
      lr = std::min(std::max(lr, rs.lr_min()), rs.lr_max());
      int32_t warmup = static_cast<int32_t>(rs.warmup_min() + static_cast<int64_t>(rng.Next() % span));
      warmup_lr.emplace_back(warmup, lr);
    }
  } else {
    for (int32_t w : spec.warmup_steps()) {
      for (double lr : spec.peak_lrs()) warmup_lr.emplace_back(w, lr);
    }
  }

  // ---- expansion: seed, variant, (warm-up, lr), placement ----
  std::vector<db::NewTrial> trials;
  trials.reserve(total);
  // No two trials of one resolved config, whatever the axes' spellings (the
  // per-axis checks above name the field; this is the whole-config backstop,
  // e.g. for two random-search samples that coincide).
  std::map<std::string, int32_t> first_of_config;
  std::vector<size_t> pick(extra.size(), 0);
  for (int32_t seed : spec.seeds()) {
    for (int64_t v = 0; v < variants; ++v) {
      // Mixed-radix digits of v pick one value per extra axis.
      int64_t rest = v;
      for (size_t a = extra.size(); a-- > 0;) {
        pick[a] = rest % extra[a].size();
        rest /= extra[a].size();
      }
      v1::TrainConfig with_variant = spec.base();
      std::string variant;
      for (size_t a = 0; a < extra.size(); ++a) {
        const AxisValue& value = extra[a][pick[a]];
        Apply(value, &with_variant);
        absl::StrAppend(&variant, variant.empty() ? "" : ",", value.field->name(), "=", value.text);
      }
      for (const auto& [warmup, lr] : warmup_lr) {
        for (const std::string& placement : spec.placements()) {
          v1::TrainConfig c = with_variant;
          c.set_placement(placement);
          c.set_warmup_steps(warmup);
          c.set_lr(lr);
          c.set_seed(seed);
          db::NewTrial t;
          t.index = static_cast<int32_t>(trials.size());
          t.variant = variant;
          absl::StatusOr<v1::TrainConfig> resolved = schema::ResolvedTrainConfig(c);
          if (!resolved.ok()) {
            return Within(absl::StrCat("spec: trial ", t.index, " (placement=", placement, ", warmup_steps=", warmup,
                                       ", lr=", lr, ", seed=", seed, variant.empty() ? "" : ", ", variant, ")"),
                          resolved.status());
          }
          auto [seen, inserted] = first_of_config.emplace(resolved->SerializeAsString(), t.index);
          if (!inserted) {
            return Invalid(random ? "spec.random_search" : "spec",
                           absl::StrCat("trials ", seen->second, " and ", t.index, " would have the same resolved config (",
                                        "placement=", resolved->placement(), ", warmup_steps=", warmup, ", lr=", lr,
                                        ", seed=", seed, variant.empty() ? "" : ", ", variant, ")"));
          }
          t.config = *std::move(resolved);
          trials.push_back(std::move(t));
        }
      }
    }
  }
  return trials;
}

}  // namespace normsweep::scheduler
