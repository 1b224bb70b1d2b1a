#include "proto/schema/boundary_search.h"

#include "proto/schema/failure.h"

#include <algorithm>
#include <cmath>

namespace normsweep::schema {

int DefaultInitialPoints(double lr_min, double lr_max) {
  if (!(lr_min > 0) || !(lr_max > lr_min)) return 2;
  // A hair below an exact decade count (1e-4 .. 1e-1 is 3 decades, not 3.0000000000000004).
  const double decades = std::log10(lr_max / lr_min);
  const int points = static_cast<int>(std::ceil(decades - 1e-9)) + 1;
  return std::clamp(points, 2, kMaxBoundaryInitialPoints);
}

BoundarySettings BoundarySettingsOf(const v1::BoundarySearch& search) {
  BoundarySettings s;
  s.lr_min = search.lr_min();
  s.lr_max = search.lr_max();
  s.resolution = search.resolution() == 0 ? kDefaultBoundaryResolution : search.resolution();
  s.initial_points = search.initial_points() == 0 ? DefaultInitialPoints(s.lr_min, s.lr_max) : search.initial_points();
  s.min_improvement = search.min_improvement() == 0 ? kDefaultMinImprovement : search.min_improvement();
  if (search.has_max_val_loss()) s.max_val_loss = search.max_val_loss();
  return s;
}

std::vector<double> InitialLrs(const BoundarySettings& s) {
  const int n = std::max(s.initial_points, 2);
  std::vector<double> lrs;
  lrs.reserve(n);
  const double log_min = std::log(s.lr_min), log_max = std::log(s.lr_max);
  for (int i = 0; i < n; ++i) {
    if (i == 0) {
      lrs.push_back(s.lr_min);
    } else if (i == n - 1) {
      lrs.push_back(s.lr_max);
    } else {
      lrs.push_back(std::exp(log_min + (log_max - log_min) * i / (n - 1)));
    }
  }
  return lrs;
}

ProbeOutcome ClassifyProbe(v1::TrialState state, std::optional<double> final_val_loss,
                           std::optional<double> init_val_loss, std::optional<double> unigram_loss,
                           std::optional<double> val_loss_progress, const BoundarySettings& s) {
  switch (state) {
    case v1::TRIAL_PENDING:
    case v1::TRIAL_RUNNING:
    case v1::TRIAL_STATE_UNSPECIFIED: return ProbeOutcome::kOpen;
    case v1::TRIAL_DIVERGED: return ProbeOutcome::kUntrainable;
    case v1::TRIAL_FAILED: return ProbeOutcome::kFailed;
    case v1::TRIAL_CANCELLED: return ProbeOutcome::kCancelled;
    default: break;  // SUCCEEDED
  }
  // The one rule of failing to train (no finite loss, the unigram plateau,
  // above max_val_loss), then the improvement on l0. A run that has not
  // converged near the unigram loss is learning: trainable.
  const std::optional<TrainingFailure> label =
      ClassifyTraining(state, final_val_loss, unigram_loss, val_loss_progress, s.max_val_loss);
  if (!label.has_value() || FailedToTrain(*label)) {  // no label: a state the rule does not judge
    return ProbeOutcome::kUntrainable;
  }
  const double loss = *final_val_loss;
  if (!init_val_loss.has_value() || !std::isfinite(*init_val_loss)) {
    const bool judged = s.max_val_loss.has_value() || (unigram_loss.has_value() && std::isfinite(*unigram_loss));
    return judged ? ProbeOutcome::kTrainable : ProbeOutcome::kFailed;
  }
  return loss <= *init_val_loss - s.min_improvement ? ProbeOutcome::kTrainable : ProbeOutcome::kUntrainable;
}

std::string LineStateName(LineState state) {
  switch (state) {
    case LineState::kSearching: return "SEARCHING";
    case LineState::kFound: return "FOUND";
    case LineState::kTrainableEverywhere: return "TRAINABLE_EVERYWHERE";
    case LineState::kNowhereTrainable: return "NOWHERE_TRAINABLE";
    case LineState::kCancelled: return "CANCELLED";
    case LineState::kFailed: return "FAILED";
  }
  return "SEARCHING";
}

bool IsLineDone(LineState state) { return state != LineState::kSearching; }

LineDecision DecideLine(const BoundarySettings& s, const std::vector<Probe>& probes) {
  LineDecision d;
  d.trials = static_cast<int>(probes.size());
  bool open = false, failed = false, cancelled = false;
  for (const Probe& p : probes) {
    switch (p.outcome) {
      case ProbeOutcome::kOpen: open = true; break;
      case ProbeOutcome::kFailed: failed = true; break;
      case ProbeOutcome::kCancelled: cancelled = true; break;
      default: break;
    }
    if (p.outcome != ProbeOutcome::kOpen) ++d.finished;
  }
  // The bracket over the judged probes, whatever the state (a stopped line
  // still shows how far it got).
  for (const Probe& p : probes) {
    if (p.outcome == ProbeOutcome::kTrainable && (!d.max_trainable_lr || p.lr > *d.max_trainable_lr)) {
      d.max_trainable_lr = p.lr;
    }
  }
  for (const Probe& p : probes) {
    if (p.outcome != ProbeOutcome::kUntrainable) continue;
    if (d.max_trainable_lr && p.lr <= *d.max_trainable_lr) continue;  // below L: ignored
    if (!d.min_untrainable_lr || p.lr < *d.min_untrainable_lr) d.min_untrainable_lr = p.lr;
  }
  if (failed) {
    d.state = LineState::kFailed;
  } else if (cancelled) {
    d.state = LineState::kCancelled;
  } else if (open || probes.empty()) {
    d.state = LineState::kSearching;
  } else if (!d.max_trainable_lr) {
    d.state = LineState::kNowhereTrainable;
  } else if (!d.min_untrainable_lr) {
    d.state = LineState::kTrainableEverywhere;
  } else {
    const double lo = *d.max_trainable_lr, hi = *d.min_untrainable_lr;
    // A relative hair of slack, so that a bracket of exactly the resolution
    // (1e-3 and 1.25e-3 divide to 1.2500000000000002) counts as reached.
    const double next = std::sqrt(lo * hi);
    if (hi / lo <= s.resolution * (1 + 1e-12) || !(next > lo && next < hi)) {
      d.state = LineState::kFound;
    } else {
      d.state = LineState::kSearching;
      d.next_lr = next;
    }
  }
  return d;
}

}  // namespace normsweep::schema
