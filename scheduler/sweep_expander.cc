#include "scheduler/sweep_expander.h"

#include <cmath>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/boundary_search.h"
#include "proto/schema/train_config.h"
#include "scheduler/field_errors.h"
#include "scheduler/sweep_expander_internal.h"

namespace normsweep::scheduler {
namespace internal {
namespace {

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
  int64_t variants = 1;
  for (const auto& values : extra) variants *= static_cast<int64_t>(values.size());
  std::vector<db::NewTrial> trials;
  trials.reserve(trial_count);
  DistinctTrialConfigs distinct(spec.has_random_search() ? "spec.random_search" : "spec");
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
          RETURN_IF_ERROR(distinct.Add(t.index, *resolved, described));
          t.config = *std::move(resolved);
          trials.push_back(std::move(t));
        }
      }
    }
  }
  return trials;
}

absl::Status DistinctTrialConfigs::Add(int32_t index, const v1::TrainConfig& resolved, const std::string& described) {
  auto [seen, inserted] = first_.emplace(resolved.SerializeAsString(), index);
  if (inserted) return absl::OkStatus();
  return Invalid(field_, absl::StrCat("trials ", seen->second, " and ", index,
                                      " would have the same resolved config (placement=", resolved.placement(), ", ",
                                      described, ")"));
}

std::vector<WarmupLr> BoundarySettingsGrid(const v1::SweepSpec& spec) {
  const std::vector<double> lrs = schema::InitialLrs(schema::BoundarySettingsOf(spec.boundary_search()));
  std::vector<WarmupLr> settings;
  for (int32_t w : spec.warmup_steps()) {
    for (double lr : lrs) settings.emplace_back(w, lr);
  }
  return settings;
}

void AssignBoundaryLines(const v1::SweepSpec& spec, std::vector<db::NewTrial>& trials) {
  // Trials are seed x variant x (warm-up x lr) x placement, placement innermost.
  const int64_t placements = spec.placements_size();
  const int64_t lrs = schema::BoundarySettingsOf(spec.boundary_search()).initial_points;
  const int64_t warmups = spec.warmup_steps_size();
  for (db::NewTrial& t : trials) {
    const int64_t i = t.index;
    const int64_t p = i % placements;
    const int64_t setting = (i / placements) % (warmups * lrs);
    const int64_t seed_variant = i / (placements * warmups * lrs);
    t.boundary_line = static_cast<int32_t>((seed_variant * warmups + setting / lrs) * placements + p);
  }
}

}  // namespace internal

absl::StatusOr<std::vector<db::NewTrial>> ExpandSweep(const ValidSpec& valid) {
  const v1::SweepSpec& spec = valid.spec();
  if (spec.has_boundary_search()) {
    ASSIGN_OR_RETURN(std::vector<db::NewTrial> trials,
                     internal::ExpandTrials(spec, internal::BoundarySettingsGrid(spec), valid.extra(),
                                            valid.trial_count()));
    internal::AssignBoundaryLines(spec, trials);
    return trials;
  }
  const std::vector<internal::WarmupLr> settings = spec.has_random_search()
                                                       ? internal::SampleRandomSearch(spec.random_search())
                                                       : internal::GridSettings(spec);
  return internal::ExpandTrials(spec, settings, valid.extra(), valid.trial_count());
}

}  // namespace normsweep::scheduler
