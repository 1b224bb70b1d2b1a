// boundary_search sweeps as users read them: "max trainable lr by warm-up"
// per placement and variant (the seeds' lines summarised: min / median / max
// of each line's largest trainable lr, and the median line's bracket), and
// the per-line progress that `normsweep watch` prints. Every figure is a row
// of GetSweepAnalysisResponse.boundary (the lr_boundary view); nothing is
// judged here.
#ifndef NORMSWEEP_CLIENT_BOUNDARY_TABLES_H_
#define NORMSWEEP_CLIENT_BOUNDARY_TABLES_H_

#include <optional>
#include <string>
#include <vector>

#include "normsweep/v1/sweep_service.pb.h"

namespace normsweep::client {

// One (variant, placement, warm-up) over its seeds' lines.
struct BoundarySummary {
  std::string variant;
  std::string placement;
  int warmup_steps = 0;
  int lines = 0;     // seeds
  int decided = 0;   // lines FOUND, TRAINABLE_EVERYWHERE or NOWHERE_TRAINABLE: the ones summarised
  int trials = 0;    // spent by all its lines
  // Over the decided lines, ordered by largest trainable lr (a line trainable
  // nowhere lowest): the lowest, the median (the lower one of an even
  // count: always a line's own figure) and the highest line.
  std::optional<v1::BoundaryLine> min, median, max;
  std::string states;  // e.g. "FOUND x2, SEARCHING x1"
};

// By variant, placement, warm-up (byte order).
std::vector<BoundarySummary> SummariseBoundary(const v1::GetSweepAnalysisResponse& analysis);

// "1.78e-03"; a line trainable nowhere "<1.00e-04" (below lr_min), one
// trainable everywhere ">=1.00e-01" (lr_max trained); "-" when undecided.
std::string BoundaryLrText(const v1::BoundaryLine& line);
// "[1.78e-03, 2.11e-03)", with "-" for an open end.
std::string BracketText(const v1::BoundaryLine& line);

// The results' section; "" for a sweep without boundary lines.
std::string RenderBoundaryTable(const v1::GetSweepAnalysisResponse& analysis);
// One row per line: its settings, state, bracket and trials done/spent.
std::string RenderBoundaryProgress(const v1::GetSweepAnalysisResponse& analysis);
// Whether a watch event may have moved a line: it holds a boundary_search
// trial that became final (when `normsweep watch` reads the lines again).
bool BoundaryLinesChanged(const v1::WatchSweepEvent& event);

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_BOUNDARY_TABLES_H_
