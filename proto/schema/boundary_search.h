// The bracketing rule of a boundary_search sweep (issue 17): which lrs a line
// probes first, what counts as trainable, and, from the line's probes so far,
// its state, its bracket [largest trainable lr, smallest untrainable lr above
// it] and the next lr to run. Pure functions, no I/O: a scheduling policy
// on the API's BoundarySearch, kept beside the schema so that both its users
// reach it: the sweep expander (the coarse start, the stored defaults) and
// both stores, which run it where a finish is recorded (PostgresStore inside
// that transaction, db/boundary_store.h; MemoryStore under its mutex).
#ifndef NORMSWEEP_PROTO_SCHEMA_BOUNDARY_SEARCH_H_
#define NORMSWEEP_PROTO_SCHEMA_BOUNDARY_SEARCH_H_

#include <optional>
#include <string>
#include <vector>

#include "normsweep/v1/sweep.pb.h"

namespace normsweep::schema {

inline constexpr double kDefaultBoundaryResolution = 1.25;
inline constexpr double kDefaultMinImprovement = 0.5;  // nats below l0
inline constexpr int kMaxBoundaryInitialPoints = 64;

// BoundarySearch with its defaults applied.
struct BoundarySettings {
  double lr_min = 0;
  double lr_max = 0;
  double resolution = kDefaultBoundaryResolution;
  int initial_points = 2;
  double min_improvement = kDefaultMinImprovement;
  std::optional<double> max_val_loss;
};
// Defaults: resolution 1.25, initial_points ceil(log10(lr_max / lr_min)) + 1
// (at least 2), min_improvement 0.5. The spec is assumed valid
// (scheduler/validation.cc checks it).
BoundarySettings BoundarySettingsOf(const v1::BoundarySearch& search);
int DefaultInitialPoints(double lr_min, double lr_max);

// The coarse start: initial_points lrs log-spaced over [lr_min, lr_max],
// both ends exactly, ascending.
std::vector<double> InitialLrs(const BoundarySettings& settings);

enum class ProbeOutcome {
  kOpen,         // PENDING or RUNNING
  kTrainable,
  kUntrainable,  // DIVERGED, or not clearly below l0, or above max_val_loss
  kFailed,       // FAILED after its attempts, or a SUCCEEDED run that cannot be judged
  kCancelled,
};

// A trial's outcome for the search. init_val_loss is the trial's l0 by the
// stores' one rule (result.init_val_loss, else its step-0 val_loss point:
// db::TrialL0, the view trial_l0); unigram_loss and val_loss_progress are
// result's. Trainable: it did not fail to train by the one rule
// (proto/schema/failure.h: SUCCEEDED, a finite final val loss, below the
// unigram plateau when the unigram loss is known or still learning there
// (not_converged), <= max_val_loss when set) and its final
// val loss is <= l0 - min_improvement. A SUCCEEDED trial without l0 (a
// worker that sent none) is judged by the plateau and max_val_loss alone
// when either is known; otherwise it cannot be judged and counts as kFailed
// (the line stops rather than guess).
ProbeOutcome ClassifyProbe(v1::TrialState state, std::optional<double> final_val_loss,
                           std::optional<double> init_val_loss, std::optional<double> unigram_loss,
                           std::optional<double> val_loss_progress, const BoundarySettings& settings);

struct Probe {
  double lr = 0;
  ProbeOutcome outcome = ProbeOutcome::kOpen;
};

enum class LineState { kSearching, kFound, kTrainableEverywhere, kNowhereTrainable, kCancelled, kFailed };
// "SEARCHING", "FOUND", ... as stored and as BoundaryLine.state says them.
std::string LineStateName(LineState state);
bool IsLineDone(LineState state);

struct LineDecision {
  LineState state = LineState::kSearching;
  std::optional<double> max_trainable_lr;    // L
  std::optional<double> min_untrainable_lr;  // U: the smallest untrainable lr above L
  std::optional<double> next_lr;             // set: create one trial at this lr
  int trials = 0;
  int finished = 0;
};

// The line's state from all its probes (any order). A FAILED probe stops the
// line (FAILED), then a CANCELLED one (CANCELLED); while any probe is open
// nothing is decided. Once all are final: L = the largest trainable lr, U =
// the smallest untrainable lr above L (untrainable probes below L are
// ignored: a too-small lr that trains slowly is not the boundary). None
// trainable: NOWHERE_TRAINABLE, U = the smallest probe; nothing untrainable
// above L: TRAINABLE_EVERYWHERE; U / L <= resolution: FOUND; else the next
// lr is sqrt(L * U), one trial at a time.
LineDecision DecideLine(const BoundarySettings& settings, const std::vector<Probe>& probes);

}  // namespace normsweep::schema

#endif  // NORMSWEEP_PROTO_SCHEMA_BOUNDARY_SEARCH_H_
