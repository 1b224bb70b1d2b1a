#include "scheduler/sweep_preview.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/schema/boundary_search.h"
#include "scheduler/field_errors.h"

namespace normsweep::scheduler {
namespace {

v1::GridAxis Axis(std::string name, std::vector<std::string> values) {
  v1::GridAxis axis;
  axis.set_name(std::move(name));
  for (std::string& v : values) axis.add_values(std::move(v));
  return axis;
}

template <typename Values>
std::vector<std::string> IntTexts(const Values& values) {
  std::vector<std::string> out;
  for (const auto v : values) out.push_back(absl::StrCat(v));
  return out;
}

// "200" or "200, 400": the distinct steps of some trials, ascending.
std::string StepsText(const std::set<int32_t>& steps) { return absl::StrJoin(steps, ", "); }

// The factors of the trial count, named by their fields: "placements 2 x
// warmup_steps 3 x peak_lrs 10 x seeds 20 x extra_axes layers 2".
std::string CountFactors(const ValidSpec& valid) {
  const v1::SweepSpec& spec = valid.spec();
  std::vector<std::string> factors = {absl::StrCat("placements ", spec.placements_size())};
  if (spec.has_random_search()) {
    factors.push_back(absl::StrCat("random_search.samples ", spec.random_search().samples()));
  } else {
    factors.push_back(absl::StrCat("warmup_steps ", spec.warmup_steps_size()));
    factors.push_back(spec.has_boundary_search()
                          ? absl::StrCat("boundary_search initial points ",
                                         schema::BoundarySettingsOf(spec.boundary_search()).initial_points)
                          : absl::StrCat("peak_lrs ", spec.peak_lrs_size()));
  }
  factors.push_back(absl::StrCat("seeds ", spec.seeds_size()));
  for (size_t a = 0; a < valid.extra().size(); ++a) {
    factors.push_back(absl::StrCat("extra_axes ", spec.extra_axes(static_cast<int>(a)).field(), " ",
                                   valid.extra()[a].size()));
  }
  return absl::StrJoin(factors, " x ");
}

// Warm-ups longer than the run: one warning per warmup_steps value of a grid
// or boundary search, one for a random search's samples.
void AddWarmupWarnings(const ValidSpec& valid, const std::vector<db::NewTrial>& trials,
                       std::vector<std::string>& warnings) {
  std::map<int32_t, std::pair<int64_t, std::set<int32_t>>> longer;  // warm-up -> (trials, their steps)
  for (const db::NewTrial& t : trials) {
    if (t.config.warmup_steps() <= t.config.steps()) continue;
    auto& [count, steps] = longer[t.config.warmup_steps()];
    ++count;
    steps.insert(t.config.steps());
  }
  if (longer.empty()) return;
  const v1::SweepSpec& spec = valid.spec();
  if (spec.has_random_search()) {
    int64_t count = 0;
    std::set<int32_t> steps;
    for (const auto& [warmup, these] : longer) {
      count += these.first;
      steps.insert(these.second.begin(), these.second.end());
    }
    warnings.push_back(absl::StrCat("random_search.warmup_max ", spec.random_search().warmup_max(),
                                    " is longer than the run (steps ", StepsText(steps), "): ", count, " of ",
                                    trials.size(), " trials draw a warm-up longer than their run and never reach "
                                    "the peak lr"));
    return;
  }
  for (int32_t warmup : spec.warmup_steps()) {  // in the spec's order
    auto it = longer.find(warmup);
    if (it == longer.end()) continue;
    const auto& [count, steps] = it->second;
    const double reached = 100.0 * *steps.rbegin() / warmup;  // lr(t) = peak * t / W at the last step
    warnings.push_back(absl::StrCat("warmup_steps ", warmup, " is longer than the run (steps ", StepsText(steps),
                                    "): its ", count, " trials never reach the peak lr (their last step runs at ",
                                    steps.size() > 1 ? "up to " : "", static_cast<int>(std::floor(reached)),
                                    "% of it; a warm-up equal to steps ends at the peak)"));
  }
}

}  // namespace

std::vector<v1::GridAxis> GridAxes(const ValidSpec& valid) {
  const v1::SweepSpec& spec = valid.spec();
  std::vector<v1::GridAxis> axes;
  axes.push_back(Axis("seed", IntTexts(spec.seeds())));
  for (size_t a = 0; a < valid.extra().size(); ++a) {
    std::vector<std::string> values;
    for (const AxisValue& v : valid.extra()[a]) values.push_back(v.text);
    axes.push_back(Axis(spec.extra_axes(static_cast<int>(a)).field(), std::move(values)));
  }
  if (spec.has_random_search()) {
    const v1::RandomSearch& rs = spec.random_search();
    const std::string drawn =
        absl::StrCat(rs.samples(), " samples drawn together (random_search.seed ", rs.seed(), ")");
    axes.push_back(Axis("warmup_steps", {absl::StrCat("uniform integers in [", rs.warmup_min(), ", ", rs.warmup_max(),
                                                      "], ", drawn)}));
    axes.push_back(Axis("peak_lr", {absl::StrCat("log-uniform in [", ShortestDouble(rs.lr_min()), ", ",
                                                 ShortestDouble(rs.lr_max()), "], ", drawn)}));
  } else if (spec.has_boundary_search()) {
    const schema::BoundarySettings b = schema::BoundarySettingsOf(spec.boundary_search());
    std::vector<std::string> initial;
    for (double lr : schema::InitialLrs(b)) initial.push_back(ShortestDouble(lr));
    axes.push_back(Axis("warmup_steps", IntTexts(spec.warmup_steps())));
    axes.push_back(Axis("peak_lr", {absl::StrCat("searched per line in [", ShortestDouble(b.lr_min), ", ",
                                                 ShortestDouble(b.lr_max), "]: first ", absl::StrJoin(initial, ", "),
                                                 ", then bisection to a factor of ", ShortestDouble(b.resolution))}));
  } else {
    std::vector<std::string> lrs;
    for (double lr : spec.peak_lrs()) lrs.push_back(ShortestDouble(lr));
    axes.push_back(Axis("warmup_steps", IntTexts(spec.warmup_steps())));
    axes.push_back(Axis("peak_lr", std::move(lrs)));
  }
  axes.push_back(Axis("placement", {spec.placements().begin(), spec.placements().end()}));
  return axes;
}

std::vector<v1::GridGroup> GridGroups(const std::vector<db::NewTrial>& trials) {
  std::vector<v1::GridGroup> groups;
  std::map<std::pair<std::string, std::string>, size_t> index;  // (placement, variant) -> groups[i]
  for (const db::NewTrial& t : trials) {
    auto [it, inserted] = index.emplace(std::make_pair(t.config.placement(), t.variant), groups.size());
    if (inserted) {
      v1::GridGroup& g = groups.emplace_back();
      g.set_placement(t.config.placement());
      g.set_variant(t.variant);
    }
    v1::GridGroup& g = groups[it->second];
    g.set_trials(g.trials() + 1);
  }
  return groups;
}

std::vector<std::string> SweepWarnings(const ValidSpec& valid, const std::vector<db::NewTrial>& trials) {
  std::vector<std::string> warnings;
  AddWarmupWarnings(valid, trials, warnings);
  if (static_cast<int64_t>(trials.size()) > kWarnTrialsAbove) {
    warnings.push_back(absl::StrCat("the sweep has ", trials.size(), " trials (", CountFactors(valid), "), over ",
                                    kWarnTrialsAbove, ": check that every axis needs all its values"));
  }
  return warnings;
}

absl::Status RefuseWarnings(const std::vector<std::string>& warnings) {
  std::string list;
  for (size_t i = 0; i < warnings.size(); ++i) absl::StrAppend(&list, " (", i + 1, ") ", warnings[i], ".");
  return absl::FailedPreconditionError(
      absl::StrCat("the sweep was not stored: the scheduler has ", warnings.size(),
                   warnings.size() == 1 ? " warning" : " warnings", " about it:", list,
                   " To submit it as it is: normsweep submit --force (Python: submit(..., force=True); "
                   "SubmitSweepRequest.allow_warnings)."));
}

}  // namespace normsweep::scheduler
