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
#include "db/boundary_search.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/train_config.h"
#include "scheduler/sweep_expander_internal.h"

namespace normsweep::scheduler {
namespace internal {
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

std::string AllowedAxisFields() {
  std::string out;
  const auto* d = v1::TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (IsAxisField(d->field(i))) absl::StrAppend(&out, out.empty() ? "" : ", ", d->field(i)->name());
  }
  return out;
}

// Every string that is stored (PostgreSQL's text and jsonb hold no NUL
// characters) is checked here, before the database, naming its field.
absl::Status CheckStoredText(const std::string& where, const std::string& value, size_t max_length) {
  if (value.size() > max_length) return Invalid(where, absl::StrCat("at most ", max_length, " characters"));
  if (value.find('\0') != std::string::npos) return Invalid(where, "must not contain NUL characters");
  return absl::OkStatus();
}

absl::Status CheckBaseStrings(const v1::TrainConfig& base) {
  const auto* d = base.GetDescriptor();
  const auto* r = base.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING || f->is_repeated()) continue;
    RETURN_IF_ERROR(
        CheckStoredText(absl::StrCat("spec.base.", f->name()), r->GetString(base, f), schema::kMaxStringFieldLength));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckAxisSize(const std::string& field, const T& values) {
  if (values.empty()) return Invalid(field, "must not be empty");
  if (values.size() > schema::kMaxAxisValues) {
    return Invalid(field, absl::StrCat("at most ", schema::kMaxAxisValues, " values"));
  }
  return absl::OkStatus();
}

absl::Status CheckRandomSearch(const v1::RandomSearch& rs) {
  if (rs.samples() < 1 || rs.samples() > schema::kMaxTrialsPerSweep) {
    return Invalid("spec.random_search.samples", absl::StrCat("must be in [1, ", schema::kMaxTrialsPerSweep, "]"));
  }
  if (!std::isfinite(rs.lr_min()) || rs.lr_min() <= 0) return Invalid("spec.random_search.lr_min", "must be finite and > 0");
  if (!std::isfinite(rs.lr_max()) || rs.lr_max() < rs.lr_min()) {
    return Invalid("spec.random_search.lr_max", "must be finite and >= lr_min");
  }
  if (rs.warmup_min() < 0) return Invalid("spec.random_search.warmup_min", "must be >= 0");
  if (rs.warmup_max() < rs.warmup_min()) return Invalid("spec.random_search.warmup_max", "must be >= warmup_min");
  return absl::OkStatus();
}

absl::Status CheckPlacements(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.placements");
  for (int i = 0; i < spec.placements_size(); ++i) {
    const std::string& placement = spec.placements(i);
    const std::string where = absl::StrCat("spec.placements[", i, "]");
    RETURN_IF_ERROR(CheckStoredText(where, placement, schema::kMaxPlacementLength));
    // An empty placement would resolve to the default (post).
    if (placement.empty()) return Invalid(where, "must not be empty (post or pre)");
    v1::TrainConfig c = probe;
    c.set_placement(placement);
    RETURN_IF_ERROR(seen.Add(i, placement, c));
  }
  return absl::OkStatus();
}

absl::Status CheckSeeds(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.seeds");
  for (int i = 0; i < spec.seeds_size(); ++i) {
    v1::TrainConfig c = probe;
    c.set_seed(spec.seeds(i));
    RETURN_IF_ERROR(seen.Add(i, absl::StrCat(spec.seeds(i)), c));
  }
  return absl::OkStatus();
}

absl::Status CheckWarmupSteps(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.warmup_steps");
  for (int i = 0; i < spec.warmup_steps_size(); ++i) {
    const std::string where = absl::StrCat("spec.warmup_steps[", i, "]");
    if (spec.warmup_steps(i) < 0) return Invalid(where, "warmup_steps: must be >= 0");
    v1::TrainConfig c = probe;
    c.set_warmup_steps(spec.warmup_steps(i));
    RETURN_IF_ERROR(seen.Add(i, absl::StrCat(spec.warmup_steps(i)), c));
  }
  return absl::OkStatus();
}

absl::Status CheckPeakLrs(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.peak_lrs");
  for (int i = 0; i < spec.peak_lrs_size(); ++i) {
    const std::string where = absl::StrCat("spec.peak_lrs[", i, "]");
    const double lr = spec.peak_lrs(i);
    if (!std::isfinite(lr) || lr <= 0) return Invalid(where, "lr: must be finite and > 0");
    v1::TrainConfig c = probe;
    c.set_lr(lr);
    RETURN_IF_ERROR(seen.Add(i, ShortestDouble(lr), c));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AxisValue>> ParseExtraAxis(const v1::ExtraAxis& axis, const FieldDescriptor* f,
                                                      const std::string& where, const v1::TrainConfig& probe) {
  RETURN_IF_ERROR(CheckAxisSize(where + ".values", axis.values()));
  std::vector<AxisValue> values;
  AxisValues seen(where + ".values");
  for (int i = 0; i < axis.values_size(); ++i) {
    ASSIGN_OR_RETURN(AxisValue v, ParseAxisValue(f, axis.values(i), absl::StrCat(where, ".values[", i, "]")));
    v1::TrainConfig c = probe;
    Apply(v, &c);
    RETURN_IF_ERROR(seen.Add(i, axis.values(i), c));
    values.push_back(v);
  }
  return values;
}

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

// The extra axes' values of variant v: its mixed-radix digits pick one value
// per axis (the last axis innermost); also the variant's name.
v1::TrainConfig WithVariant(const v1::TrainConfig& base, const std::vector<std::vector<AxisValue>>& extra, int64_t v,
                            std::string* variant) {
  std::vector<size_t> pick(extra.size(), 0);
  for (size_t a = extra.size(); a-- > 0;) {
    pick[a] = v % extra[a].size();
    v /= extra[a].size();
  }
  v1::TrainConfig config = base;
  variant->clear();
  for (size_t a = 0; a < extra.size(); ++a) {
    const AxisValue& value = extra[a][pick[a]];
    Apply(value, &config);
    absl::StrAppend(variant, variant->empty() ? "" : ",", value.field->name(), "=", value.text);
  }
  return config;
}

}  // namespace

absl::Status CheckScalarFields(const v1::SweepSpec& spec) {
  if (spec.name().empty()) return Invalid("spec.name", "required");
  if (spec.name().size() > schema::kMaxNameLength) {
    return Invalid("spec.name", absl::StrCat("at most ", schema::kMaxNameLength, " characters"));
  }
  // PostgreSQL's text and jsonb cannot hold NUL characters.
  RETURN_IF_ERROR(CheckStoredText("spec.name", spec.name(), schema::kMaxNameLength));
  if (spec.max_attempts() < 0 || spec.max_attempts() > schema::kMaxMaxAttempts) {
    return Invalid("spec.max_attempts", absl::StrCat("must be in [1, ", schema::kMaxMaxAttempts, "] (0: default ",
                                                     schema::kDefaultMaxAttempts, ")"));
  }
  if (spec.priority() < -schema::kMaxPriority || spec.priority() > schema::kMaxPriority) {
    return Invalid("spec.priority", absl::StrCat("must be in [", -schema::kMaxPriority, ", ", schema::kMaxPriority, "]"));
  }
  if (spec.max_concurrent_trials() < 0) return Invalid("spec.max_concurrent_trials", "must be >= 0 (0: unlimited)");
  return absl::OkStatus();
}

v1::TrainConfig Probe(const v1::TrainConfig& base) {
  v1::TrainConfig c = base;
  c.set_placement("post");
  c.set_lr(1e-3);
  c.set_warmup_steps(0);
  c.set_seed(0);
  return c;
}

absl::Status CheckBase(const v1::TrainConfig& base) {
  RETURN_IF_ERROR(CheckBaseStrings(base));
  return Within("spec.base", schema::ValidateTrainConfig(Probe(base)));
}

absl::Status CheckAxisSizes(const v1::SweepSpec& spec) {
  RETURN_IF_ERROR(CheckAxisSize("spec.placements", spec.placements()));
  RETURN_IF_ERROR(CheckAxisSize("spec.seeds", spec.seeds()));
  if (spec.has_boundary_search()) {
    if (spec.has_random_search()) return Invalid("spec.random_search", "must be unset when boundary_search is set");
    if (!spec.peak_lrs().empty()) {
      return Invalid("spec.peak_lrs", "must be empty when boundary_search is set (the search picks the lrs)");
    }
    RETURN_IF_ERROR(CheckAxisSize("spec.warmup_steps", spec.warmup_steps()));
    return CheckBoundarySearch(spec.boundary_search());
  }
  if (spec.has_random_search()) {
    if (!spec.warmup_steps().empty()) return Invalid("spec.warmup_steps", "must be empty when random_search is set");
    if (!spec.peak_lrs().empty()) return Invalid("spec.peak_lrs", "must be empty when random_search is set");
    return CheckRandomSearch(spec.random_search());
  }
  RETURN_IF_ERROR(CheckAxisSize("spec.warmup_steps", spec.warmup_steps()));
  return CheckAxisSize("spec.peak_lrs", spec.peak_lrs());
}

absl::Status CheckMainAxisValues(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  RETURN_IF_ERROR(CheckPlacements(spec, probe));
  RETURN_IF_ERROR(CheckSeeds(spec, probe));
  if (spec.has_random_search()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckWarmupSteps(spec, probe));
  return CheckPeakLrs(spec, probe);
}

void Apply(const AxisValue& v, v1::TrainConfig* config) {
  const auto* r = config->GetReflection();
  switch (v.field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(config, v.field, v.i); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(config, v.field, v.d); break;
    default: r->SetString(config, v.field, v.text); break;
  }
}

bool IsAxisField(const FieldDescriptor* f) {
  static const std::set<std::string> kExcluded = {"placement", "warmup_steps", "lr", "seed",
                                                  "threads", "device", "checkpoint_every"};
  if (f == nullptr || f->is_repeated() || kExcluded.contains(f->name())) return false;
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
}

absl::StatusOr<AxisValue> ParseAxisValue(const FieldDescriptor* f, const std::string& text, const std::string& where) {
  AxisValue v{f, text};
  RETURN_IF_ERROR(CheckStoredText(where, text, schema::kMaxStringFieldLength));
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

absl::StatusOr<std::vector<std::vector<AxisValue>>> ParseExtraAxes(const v1::SweepSpec& spec,
                                                                   const v1::TrainConfig& probe) {
  std::vector<std::vector<AxisValue>> extra;
  std::set<std::string> fields;
  for (int a = 0; a < spec.extra_axes_size(); ++a) {
    const v1::ExtraAxis& axis = spec.extra_axes(a);
    const std::string where = absl::StrCat("spec.extra_axes[", a, "]");
    const FieldDescriptor* f = v1::TrainConfig::descriptor()->FindFieldByName(axis.field());
    if (!IsAxisField(f)) {
      return Invalid(where + ".field",
                     absl::StrCat(QuoteForError(axis.field()), " cannot be an axis; allowed: ", AllowedAxisFields()));
    }
    if (!fields.insert(axis.field()).second) return Invalid(where + ".field", "duplicate axis " + axis.field());
    ASSIGN_OR_RETURN(std::vector<AxisValue> values, ParseExtraAxis(axis, f, where, probe));
    extra.push_back(std::move(values));
  }
  return extra;
}

absl::Status AxisValues::Add(int index, const std::string& shown, const v1::TrainConfig& config) {
  const std::string where = absl::StrCat(axis_, "[", index, "]");
  absl::StatusOr<v1::TrainConfig> resolved = schema::ResolvedTrainConfig(config);  // also validates it
  if (!resolved.ok()) return Within(where, resolved.status());
  auto [it, inserted] = first_.emplace(resolved->SerializeAsString(), index);
  if (!inserted) {
    return Invalid(where, absl::StrCat("duplicate value: ", QuoteForError(shown), " is the same setting as ", axis_,
                                       "[", it->second, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckGridSize(const v1::SweepSpec& spec, const std::vector<std::vector<AxisValue>>& extra) {
  constexpr int64_t kMax = schema::kMaxTrialsPerSweep;
  const bool random = spec.has_random_search();
  if (spec.has_boundary_search()) {
    // Limited by the most the lines can take; the coarse start is created now.
    int64_t lines = int64_t{spec.warmup_steps_size()} * spec.placements_size() * spec.seeds_size();
    for (const auto& values : extra) lines = std::min<int64_t>(lines * static_cast<int64_t>(values.size()), kMax + 1);
    const int64_t per_line = MaxBoundaryTrialsPerLine(spec.boundary_search());
    if (lines * per_line > kMax) {
      return Invalid("spec", absl::StrCat("the boundary search (placements x warmup_steps x seeds x extra_axes = ",
                                          lines > kMax ? absl::StrCat(kMax, "+") : absl::StrCat(lines),
                                          " lines, up to ", per_line, " trials each) may take ", lines * per_line,
                                          " trials; the limit is ", kMax));
    }
    return lines * db::BoundarySettingsOf(spec.boundary_search()).initial_points;
  }
  const int64_t settings =
      random ? spec.random_search().samples() : int64_t{spec.warmup_steps_size()} * spec.peak_lrs_size();
  const int64_t total = settings * spec.placements_size() * spec.seeds_size();
  int64_t variants = 1;
  for (const auto& values : extra) {
    variants *= static_cast<int64_t>(values.size());
    if (variants > kMax) break;  // no overflow however many axes
  }
  if (variants > kMax || total * variants > kMax) {
    return Invalid("spec", absl::StrCat("the grid (placements x ",
                                        random ? "random_search.samples" : "warmup_steps x peak_lrs",
                                        " x seeds x extra_axes) has ", total * std::min<int64_t>(variants, kMax + 1),
                                        "+ trials; the limit is ", kMax));
  }
  return total * variants;
}

std::vector<WarmupLr> GridSettings(const v1::SweepSpec& spec) {
  std::vector<WarmupLr> settings;
  for (int32_t w : spec.warmup_steps()) {
    for (double lr : spec.peak_lrs()) settings.emplace_back(w, lr);
  }
  return settings;
}

std::vector<WarmupLr> SampleRandomSearch(const v1::RandomSearch& rs) {
  std::vector<WarmupLr> settings;
  SplitMix64 rng(rs.seed());
  const double log_min = std::log(rs.lr_min()), log_max = std::log(rs.lr_max());
  const uint64_t span = static_cast<uint64_t>(int64_t{rs.warmup_max()} - rs.warmup_min()) + 1;
  for (int i = 0; i < rs.samples(); ++i) {
    double lr = std::exp(log_min + rng.Uniform() * (log_max - log_min));
    lr = std::min(std::max(lr, rs.lr_min()), rs.lr_max());
    const int32_t warmup = static_cast<int32_t>(rs.warmup_min() + static_cast<int64_t>(rng.Next() % span));
    settings.emplace_back(warmup, lr);
  }
  return settings;
}

absl::StatusOr<std::vector<db::NewTrial>> ExpandTrials(const v1::SweepSpec& spec,
                                                       const std::vector<WarmupLr>& settings,
                                                       const std::vector<std::vector<AxisValue>>& extra,
                                                       int64_t trial_count) {
  const bool random = spec.has_random_search();
  int64_t variants = 1;
  for (const auto& values : extra) variants *= static_cast<int64_t>(values.size());
  std::vector<db::NewTrial> trials;
  trials.reserve(trial_count);
  // No two trials of one resolved config, whatever the axes' spellings (the
  // per-axis checks name the field; this is the whole-config backstop, e.g.
  // for two random-search samples that coincide).
  std::map<std::string, int32_t> first_of_config;
  for (int32_t seed : spec.seeds()) {
    for (int64_t v = 0; v < variants; ++v) {
      std::string variant;
      const v1::TrainConfig with_variant = WithVariant(spec.base(), extra, v, &variant);
      for (const auto& [warmup, lr] : settings) {
        for (const std::string& placement : spec.placements()) {
          v1::TrainConfig c = with_variant;
          c.set_placement(placement);
          c.set_warmup_steps(warmup);
          c.set_lr(lr);
          c.set_seed(seed);
          db::NewTrial t;
          t.index = static_cast<int32_t>(trials.size());
          t.variant = variant;
          const std::string described = absl::StrCat("warmup_steps=", warmup, ", lr=", lr, ", seed=", seed,
                                                     variant.empty() ? "" : ", ", variant);
          absl::StatusOr<v1::TrainConfig> resolved = schema::ResolvedTrainConfig(c);
          if (!resolved.ok()) {
            return Within(absl::StrCat("spec: trial ", t.index, " (placement=", placement, ", ", described, ")"),
                          resolved.status());
          }
          auto [seen, inserted] = first_of_config.emplace(resolved->SerializeAsString(), t.index);
          if (!inserted) {
            return Invalid(random ? "spec.random_search" : "spec",
                           absl::StrCat("trials ", seen->second, " and ", t.index,
                                        " would have the same resolved config (placement=", resolved->placement(),
                                        ", ", described, ")"));
          }
          t.config = *std::move(resolved);
          trials.push_back(std::move(t));
        }
      }
    }
  }
  return trials;
}

absl::Status CheckBoundarySearch(const v1::BoundarySearch& b) {
  const std::string where = "spec.boundary_search.";
  if (!std::isfinite(b.lr_min()) || b.lr_min() <= 0) {
    return Invalid(where + "lr_min", absl::StrCat("must be finite and > 0 (got ", ShortestDouble(b.lr_min()), ")"));
  }
  if (!std::isfinite(b.lr_max()) || b.lr_max() <= b.lr_min()) {
    return Invalid(where + "lr_max", absl::StrCat("must be finite and > lr_min (got ", ShortestDouble(b.lr_max()),
                                                  ", lr_min ", ShortestDouble(b.lr_min()), ")"));
  }
  if (b.resolution() != 0 && !(std::isfinite(b.resolution()) && b.resolution() > 1)) {
    return Invalid(where + "resolution", absl::StrCat("must be finite and > 1 (got ", ShortestDouble(b.resolution()),
                                                      "; 0: default ", db::kDefaultBoundaryResolution, ")"));
  }
  if (b.initial_points() != 0 && (b.initial_points() < 2 || b.initial_points() > db::kMaxBoundaryInitialPoints)) {
    return Invalid(where + "initial_points", absl::StrCat("must be in [2, ", db::kMaxBoundaryInitialPoints, "] (got ",
                                                          b.initial_points(), "; 0: one per decade plus one)"));
  }
  if (!std::isfinite(b.min_improvement()) || b.min_improvement() < 0) {
    return Invalid(where + "min_improvement",
                   absl::StrCat("must be finite and >= 0 (got ", ShortestDouble(b.min_improvement()), "; 0: default ",
                                db::kDefaultMinImprovement, ")"));
  }
  if (b.has_max_val_loss() && !(std::isfinite(b.max_val_loss()) && b.max_val_loss() > 0)) {
    return Invalid(where + "max_val_loss",
                   absl::StrCat("must be finite and > 0 when set (got ", ShortestDouble(b.max_val_loss()), ")"));
  }
  return absl::OkStatus();
}

int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search) {
  const db::BoundarySettings s = db::BoundarySettingsOf(search);
  const double widest = std::log(s.lr_max / s.lr_min) / (s.initial_points - 1);  // log-width of a coarse interval
  int64_t bisections = 0;
  for (double w = widest; w > std::log(s.resolution) * (1 + 1e-12) && bisections < 64; w /= 2) ++bisections;
  return s.initial_points + bisections;
}

std::vector<WarmupLr> BoundarySettingsGrid(const v1::SweepSpec& spec) {
  const std::vector<double> lrs = db::InitialLrs(db::BoundarySettingsOf(spec.boundary_search()));
  std::vector<WarmupLr> settings;
  for (int32_t w : spec.warmup_steps()) {
    for (double lr : lrs) settings.emplace_back(w, lr);
  }
  return settings;
}

void AssignBoundaryLines(const v1::SweepSpec& spec, std::vector<db::NewTrial>& trials) {
  // Trials are seed x variant x (warm-up x lr) x placement, placement innermost.
  const int64_t placements = spec.placements_size();
  const int64_t lrs = db::BoundarySettingsOf(spec.boundary_search()).initial_points;
  const int64_t warmups = spec.warmup_steps_size();
  for (db::NewTrial& t : trials) {
    const int64_t i = t.index;
    const int64_t p = i % placements;
    const int64_t setting = (i / placements) % (warmups * lrs);
    const int64_t seed_variant = i / (placements * warmups * lrs);
    t.boundary_line = static_cast<int32_t>((seed_variant * warmups + setting / lrs) * placements + p);
  }
}

std::string ShortestDouble(double d) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, d);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == d) return text;
  }
  return absl::StrFormat("%.17g", d);
}

}  // namespace internal

v1::SweepSpec NormalizedSpec(const v1::SweepSpec& spec) {
  v1::SweepSpec s = spec;
  if (s.max_attempts() == 0) s.set_max_attempts(schema::kDefaultMaxAttempts);
  if (s.has_boundary_search()) {
    // The defaults as the search uses them (db::BoundarySettingsOf), so that
    // the stored spec says them.
    const db::BoundarySettings b = db::BoundarySettingsOf(s.boundary_search());
    s.mutable_boundary_search()->set_resolution(b.resolution);
    s.mutable_boundary_search()->set_initial_points(b.initial_points);
    s.mutable_boundary_search()->set_min_improvement(b.min_improvement);
  }
  return s;
}

absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const v1::SweepSpec& spec) {
  RETURN_IF_ERROR(internal::CheckScalarFields(spec));
  RETURN_IF_ERROR(internal::CheckBase(spec.base()));
  RETURN_IF_ERROR(internal::CheckAxisSizes(spec));
  const v1::TrainConfig probe = internal::Probe(spec.base());
  RETURN_IF_ERROR(internal::CheckMainAxisValues(spec, probe));
  ASSIGN_OR_RETURN(std::vector<std::vector<internal::AxisValue>> extra, internal::ParseExtraAxes(spec, probe));
  ASSIGN_OR_RETURN(int64_t trial_count, internal::CheckGridSize(spec, extra));
  if (spec.has_boundary_search()) {
    ASSIGN_OR_RETURN(std::vector<db::NewTrial> trials,
                     internal::ExpandTrials(spec, internal::BoundarySettingsGrid(spec), extra, trial_count));
    internal::AssignBoundaryLines(spec, trials);
    return trials;
  }
  const std::vector<internal::WarmupLr> settings = spec.has_random_search()
                                                       ? internal::SampleRandomSearch(spec.random_search())
                                                       : internal::GridSettings(spec);
  return internal::ExpandTrials(spec, settings, extra, trial_count);
}

}  // namespace normsweep::scheduler
