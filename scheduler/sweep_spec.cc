#include "scheduler/sweep_spec.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "google/protobuf/reflection.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/boundary_search.h"
#include "proto/schema/train_config.h"
#include "scheduler/field_errors.h"
#include "trainer/settings/config.h"

namespace normsweep::scheduler {
namespace {

using google::protobuf::FieldDescriptor;

std::string AllowedAxisFields() {
  std::string out;
  const auto* d = v1::TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (IsAxisField(d->field(i))) absl::StrAppend(&out, out.empty() ? "" : ", ", d->field(i)->name());
  }
  return out;
}

// The trainer's placements by their canonical names, for errors.
std::string PlacementNames() {
  std::string aliases;
  for (const trainer::SchemeInfo& scheme : trainer::Schemes()) {
    if (scheme.alias != nullptr) absl::StrAppend(&aliases, "; ", scheme.alias, " is ", scheme.name);
  }
  return absl::StrCat("one of ", trainer::SchemeNames(", ", ", ", false), aliases);
}

// mix_post_fraction changes Mix-LN only: the resolved config of any other
// placement drops it, so its values would be the same trials twice there.
// Its values are checked on a Mix-LN probe, and every placement must be mix.
absl::Status CheckMixFractionAxis(const v1::SweepSpec& spec, const std::vector<const trainer::SchemeInfo*>& schemes,
                                  const std::string& where) {
  for (size_t i = 0; i < schemes.size(); ++i) {
    if (schemes[i]->per_block) continue;
    return Invalid(where, absl::StrCat("an axis over mix_post_fraction needs every placement to be mix (it sets "
                                       "Mix-LN's share of Post-LN blocks); spec.placements[",
                                       i, "] is ", QuoteForError(spec.placements(static_cast<int>(i)))));
  }
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

// Each placement's scheme; the table is read here only.
absl::StatusOr<std::vector<const trainer::SchemeInfo*>> ParsePlacements(const v1::SweepSpec& spec,
                                                                        const v1::TrainConfig& probe) {
  AxisValues seen("spec.placements");
  std::vector<const trainer::SchemeInfo*> schemes;
  for (int i = 0; i < spec.placements_size(); ++i) {
    const std::string& placement = spec.placements(i);
    const std::string where = absl::StrCat("spec.placements[", i, "]");
    RETURN_IF_ERROR(CheckStoredText(where, placement, schema::kMaxPlacementLength));
    // An empty placement would resolve to the default (post).
    if (placement.empty()) return Invalid(where, absl::StrCat("must not be empty (", PlacementNames(), ")"));
    v1::TrainConfig c = probe;
    c.set_placement(placement);
    RETURN_IF_ERROR(seen.Add(i, placement, c));  // an unknown name is refused here, as the trainer says it
    schemes.push_back(trainer::FindScheme(placement));
  }
  return schemes;
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

// The spec as it is stored (ValidSpec::spec).
v1::SweepSpec Normalized(const v1::SweepSpec& spec, const std::vector<const trainer::SchemeInfo*>& schemes) {
  v1::SweepSpec s = spec;
  if (s.max_attempts() == 0) s.set_max_attempts(schema::kDefaultMaxAttempts);
  if (s.max_interruptions() == 0) s.set_max_interruptions(schema::kDefaultMaxInterruptions);
  // Each placement by its canonical name, as its trials' resolved configs
  // say it ("sandwich" is stored as "peri", "post-ln" as "post").
  for (size_t i = 0; i < schemes.size(); ++i) s.set_placements(static_cast<int>(i), schemes[i]->name);
  if (s.has_boundary_search()) {
    // The defaults as the search uses them (schema::BoundarySettingsOf), so
    // that the stored spec says them.
    const schema::BoundarySettings b = schema::BoundarySettingsOf(s.boundary_search());
    s.mutable_boundary_search()->set_resolution(b.resolution);
    s.mutable_boundary_search()->set_initial_points(b.initial_points);
    s.mutable_boundary_search()->set_min_improvement(b.min_improvement);
  }
  return s;
}

}  // namespace

absl::StatusOr<ValidSpec> ValidSpec::Parse(const v1::SweepSpec& spec) {
  RETURN_IF_ERROR(CheckBaseSetsNoAxis(spec));
  RETURN_IF_ERROR(CheckScalarFields(spec));
  RETURN_IF_ERROR(CheckBase(spec.base()));
  RETURN_IF_ERROR(CheckAxisSizes(spec));
  const v1::TrainConfig probe = Probe(spec.base());
  ASSIGN_OR_RETURN(const std::vector<const trainer::SchemeInfo*> schemes, CheckMainAxisValues(spec, probe));
  ValidSpec valid;
  ASSIGN_OR_RETURN(valid.extra_, ParseExtraAxes(spec, schemes, probe));
  ASSIGN_OR_RETURN(valid.trial_count_, CheckGridSize(spec, valid.extra_));
  valid.spec_ = Normalized(spec, schemes);
  return valid;
}

absl::Status CheckBaseSetsNoAxis(const v1::SweepSpec& spec) {
  const v1::TrainConfig& base = spec.base();
  const auto* r = base.GetReflection();
  // The axis that sets each main-axis field of every trial.
  const std::string lr_axis = spec.has_boundary_search()  ? "spec.boundary_search (lr_min, lr_max)"
                              : spec.has_random_search() ? "spec.random_search (lr_min, lr_max)"
                                                         : "spec.peak_lrs";
  const std::string warmup_axis =
      spec.has_random_search() ? "spec.random_search (warmup_min, warmup_max)" : "spec.warmup_steps";
  const std::pair<const char*, std::string> main_axes[] = {
      {"placement", "spec.placements"}, {"lr", lr_axis}, {"warmup_steps", warmup_axis}, {"seed", "spec.seeds"}};
  const auto* d = base.GetDescriptor();
  for (const auto& [field, axis] : main_axes) {
    // Without presence, HasField is "not the default": lr 0, seed 0 and an
    // empty placement are what an axis overwrites anyway.
    if (r->HasField(base, d->FindFieldByName(field))) {
      return Invalid(absl::StrCat("spec.base.", field),
                     absl::StrCat("set by an axis, so a value here would be ignored; use ", axis, " instead"));
    }
  }
  for (int a = 0; a < spec.extra_axes_size(); ++a) {
    const FieldDescriptor* f = d->FindFieldByName(spec.extra_axes(a).field());
    if (f == nullptr || f->is_repeated() || !r->HasField(base, f)) continue;  // a bad axis is ParseExtraAxes'
    return Invalid(absl::StrCat("spec.base.", f->name()),
                   absl::StrCat("set by spec.extra_axes[", a, "], so a value here would be ignored; put the values "
                                "in the axis instead"));
  }
  return absl::OkStatus();
}

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
  if (spec.max_interruptions() < 0 || spec.max_interruptions() > schema::kMaxMaxInterruptions) {
    return Invalid("spec.max_interruptions", absl::StrCat("must be in [1, ", schema::kMaxMaxInterruptions,
                                                          "] (0: default ", schema::kDefaultMaxInterruptions, ")"));
  }
  if (spec.priority() < -schema::kMaxPriority || spec.priority() > schema::kMaxPriority) {
    return Invalid("spec.priority", absl::StrCat("must be in [", -schema::kMaxPriority, ", ", schema::kMaxPriority, "]"));
  }
  if (spec.max_concurrent_trials() < 0) return Invalid("spec.max_concurrent_trials", "must be >= 0 (0: unlimited)");
  return absl::OkStatus();
}

v1::TrainConfig Probe(const v1::TrainConfig& base) {
  v1::TrainConfig c = base;
  c.set_placement(trainer::Schemes().front().name);
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
                                                      "; 0: default ", schema::kDefaultBoundaryResolution, ")"));
  }
  if (b.initial_points() != 0 && (b.initial_points() < 2 || b.initial_points() > schema::kMaxBoundaryInitialPoints)) {
    return Invalid(where + "initial_points",
                   absl::StrCat("must be in [2, ", schema::kMaxBoundaryInitialPoints, "] (got ", b.initial_points(),
                                "; 0: one per decade plus one)"));
  }
  if (!std::isfinite(b.min_improvement()) || b.min_improvement() < 0) {
    return Invalid(where + "min_improvement",
                   absl::StrCat("must be finite and >= 0 (got ", ShortestDouble(b.min_improvement()), "; 0: default ",
                                schema::kDefaultMinImprovement, ")"));
  }
  if (b.has_max_val_loss() && !(std::isfinite(b.max_val_loss()) && b.max_val_loss() > 0)) {
    return Invalid(where + "max_val_loss",
                   absl::StrCat("must be finite and > 0 when set (got ", ShortestDouble(b.max_val_loss()), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<const trainer::SchemeInfo*>> CheckMainAxisValues(const v1::SweepSpec& spec,
                                                                            const v1::TrainConfig& probe) {
  ASSIGN_OR_RETURN(std::vector<const trainer::SchemeInfo*> schemes, ParsePlacements(spec, probe));
  RETURN_IF_ERROR(CheckSeeds(spec, probe));
  if (spec.has_random_search()) return schemes;
  RETURN_IF_ERROR(CheckWarmupSteps(spec, probe));
  RETURN_IF_ERROR(CheckPeakLrs(spec, probe));
  return schemes;
}

void Apply(const AxisValue& v, v1::TrainConfig* config) {
  const auto* r = config->GetReflection();
  switch (v.field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(config, v.field, v.i); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(config, v.field, v.d); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(config, v.field, v.i != 0); break;  // i: 0 or 1
    default: r->SetString(config, v.field, v.text); break;
  }
}

bool IsAxisField(const FieldDescriptor* f) {
  static const std::set<std::string> kExcluded = {"placement", "warmup_steps", "lr", "seed",
                                                  "threads", "device", "checkpoint_every"};
  if (f == nullptr || f->is_repeated() || kExcluded.contains(f->name())) return false;
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL ||
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
  } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
    if (text != "true" && text != "false") {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not true or false (", f->name(), ")"));
    }
    v.i = text == "true";  // a bool axis keeps its value in i
  } else if (text.empty()) {
    return Invalid(where, "must not be empty");
  }
  return v;
}

absl::StatusOr<std::vector<std::vector<AxisValue>>> ParseExtraAxes(
    const v1::SweepSpec& spec, const std::vector<const trainer::SchemeInfo*>& schemes, const v1::TrainConfig& probe) {
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
    v1::TrainConfig axis_probe = probe;
    if (axis.field() == "mix_post_fraction") {
      RETURN_IF_ERROR(CheckMixFractionAxis(spec, schemes, where + ".field"));
      axis_probe.set_placement(trainer::PlacementName(trainer::Placement::kMix));
    }
    ASSIGN_OR_RETURN(std::vector<AxisValue> values, ParseExtraAxis(axis, f, where, axis_probe));
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
    return lines * schema::BoundarySettingsOf(spec.boundary_search()).initial_points;
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

int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search) {
  const schema::BoundarySettings s = schema::BoundarySettingsOf(search);
  const double widest = std::log(s.lr_max / s.lr_min) / (s.initial_points - 1);  // log-width of a coarse interval
  int64_t bisections = 0;
  for (double w = widest; w > std::log(s.resolution) * (1 + 1e-12) && bisections < 64; w /= 2) ++bisections;
  return s.initial_points + bisections;
}

}  // namespace normsweep::scheduler
