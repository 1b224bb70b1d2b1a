#include "client/boundary_tables.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report/svg.h"

namespace normsweep::client {
namespace {

bool Decided(const std::string& state) {
  return state == "FOUND" || state == "TRAINABLE_EVERYWHERE" || state == "NOWHERE_TRAINABLE";
}

std::string Lr(double lr) { return absl::StrFormat("%.2e", lr); }

// Left-aligned columns, two spaces apart.
std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(width[i] - row[i].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::string BoundaryLrText(const v1::BoundaryLine& l) {
  if (l.state() == "NOWHERE_TRAINABLE") return l.has_min_untrainable_lr() ? "<" + Lr(l.min_untrainable_lr()) : "none";
  if (l.state() == "TRAINABLE_EVERYWHERE") return ">=" + Lr(l.max_trainable_lr());
  if (!l.has_max_trainable_lr()) return "-";
  return Lr(l.max_trainable_lr());
}

std::string BracketText(const v1::BoundaryLine& l) {
  return absl::StrCat("[", l.has_max_trainable_lr() ? Lr(l.max_trainable_lr()) : "-", ", ",
                      l.has_min_untrainable_lr() ? Lr(l.min_untrainable_lr()) : "-", ")");
}

std::vector<BoundarySummary> SummariseBoundary(const v1::GetSweepAnalysisResponse& analysis) {
  using Key = std::tuple<std::string, std::string, int>;
  std::map<Key, std::vector<const v1::BoundaryLine*>> groups;
  for (const v1::BoundaryLine& l : analysis.boundary()) groups[{l.variant(), l.placement(), l.warmup_steps()}].push_back(&l);
  std::vector<BoundarySummary> out;
  for (const auto& [key, lines] : groups) {
    BoundarySummary s;
    std::tie(s.variant, s.placement, s.warmup_steps) = key;
    s.lines = static_cast<int>(lines.size());
    std::map<std::string, int> states;
    std::vector<const v1::BoundaryLine*> decided;
    for (const v1::BoundaryLine* l : lines) {
      s.trials += l->trials();
      ++states[l->state()];
      if (Decided(l->state())) decided.push_back(l);
    }
    s.decided = static_cast<int>(decided.size());
    // Trainable nowhere lowest, then by L; ties by line (stable across calls).
    std::sort(decided.begin(), decided.end(), [](const v1::BoundaryLine* a, const v1::BoundaryLine* b) {
      const double la = a->has_max_trainable_lr() ? a->max_trainable_lr() : -1;
      const double lb = b->has_max_trainable_lr() ? b->max_trainable_lr() : -1;
      return la != lb ? la < lb : a->line() < b->line();
    });
    if (!decided.empty()) {
      s.min = *decided.front();
      s.median = *decided[(decided.size() - 1) / 2];
      s.max = *decided.back();
    }
    std::vector<std::string> parts;
    for (const auto& [state, n] : states) parts.push_back(absl::StrCat(state, " x", n));
    s.states = absl::StrJoin(parts, ", ");
    out.push_back(std::move(s));
  }
  return out;
}

std::string RenderBoundaryTable(const v1::GetSweepAnalysisResponse& analysis) {
  if (analysis.boundary_size() == 0) return "";
  std::string out =
      "\nmax trainable lr by warm-up (boundary search, a line per seed: the largest lr that trained, over the seeds"
      " whose line is decided min / median / max; bracket: the median seed's [largest trainable, smallest"
      " untrainable above it))\n";
  std::string group;
  std::vector<std::vector<std::string>> rows;
  auto flush = [&] {
    if (!rows.empty()) out += Columns(rows);
    rows.clear();
  };
  for (const BoundarySummary& s : SummariseBoundary(analysis)) {
    const std::string title = PlacementTitle(s.placement, s.variant);
    if (title != group) {
      flush();
      group = title;
      out += "\n" + title + "\n";
      rows.push_back({"warmup", "seeds", "min", "median", "max", "bracket", "trials", "lines"});
    }
    rows.push_back({absl::StrCat(s.warmup_steps), absl::StrCat(s.decided, "/", s.lines),
                    s.min ? BoundaryLrText(*s.min) : "-", s.median ? BoundaryLrText(*s.median) : "-",
                    s.max ? BoundaryLrText(*s.max) : "-", s.median ? BracketText(*s.median) : "-",
                    absl::StrCat(s.trials), s.states});
  }
  flush();
  return out;
}

std::string RenderBoundaryProgress(const v1::GetSweepAnalysisResponse& analysis) {
  std::vector<std::vector<std::string>> rows = {
      {"line", "placement", "variant", "warmup", "seed", "state", "bracket", "done/trials"}};
  for (const v1::BoundaryLine& l : analysis.boundary()) {
    rows.push_back({absl::StrCat(l.line()), l.placement(), l.variant().empty() ? "-" : l.variant(),
                    absl::StrCat(l.warmup_steps()), absl::StrCat(l.seed()), l.state(), BracketText(l),
                    absl::StrCat(l.finished(), "/", l.trials())});
  }
  return Columns(rows);
}

bool BoundaryLinesChanged(const v1::WatchSweepEvent& event) {
  for (const v1::Trial& t : event.trials()) {
    if (t.has_boundary_line() && t.state() != v1::TRIAL_PENDING && t.state() != v1::TRIAL_RUNNING) return true;
  }
  return false;
}

}  // namespace normsweep::client
