#include "client/results.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "client/report/svg.h"
#include "common/json_quote.h"

namespace normsweep::client {
namespace {

std::string CellText(const ResultCell& c) {
  if (c.seeds_with_loss == 0) {
    if (c.diverged == c.trials && c.trials > 0) return "diverged";
    if (c.failed == c.trials && c.trials > 0) return "failed";
    if (c.unfinished > 0) return "...";
    if (c.diverged > 0) return absl::StrFormat("div %d/%d", c.diverged, c.trials);
    return "-";
  }
  std::string s = absl::StrFormat("%.3f", c.mean_final_val_loss);
  if (c.seeds_with_loss > 1) s += absl::StrFormat("±%.3f", c.std_final_val_loss);
  if (c.diverged > 0) s += absl::StrFormat(" (%d div)", c.diverged);
  if (c.plateaued > 0) s += absl::StrFormat(" (%d plat)", c.plateaued);
  if (c.not_converged > 0) s += absl::StrFormat(" (%d n.c.)", c.not_converged);
  if (c.failed > 0) s += absl::StrFormat(" (%d fail)", c.failed);
  if (c.unfinished > 0) s += " ...";
  return s;
}

// A cell of the failure-rate grid: "50% (1/2)", "..." while no seed has
// finished, "-" without a rate (a scheduler older than the rule).
std::string FailureText(const ResultCell& c) {
  if (!c.failure_rate) return c.unfinished > 0 ? "..." : "-";
  return absl::StrFormat("%.0f%% (%d/%d)", 100 * *c.failure_rate, c.diverged + c.plateaued, c.succeeded + c.diverged);
}

// Display width of a UTF-8 string (± is two bytes, one column).
size_t Width(const std::string& s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
  return w;
}

std::string Pad(const std::string& s, size_t width) {
  return s + std::string(width > Width(s) ? width - Width(s) : 0, ' ');
}

std::string JsonNumber(double v) { return std::isfinite(v) ? absl::StrFormat("%.6g", v) : "null"; }

// An optional proto field: its value, or what stands for none.
template <typename T>
std::optional<double> Opt(bool has, T v) {
  return has ? std::optional<double>(static_cast<double>(v)) : std::nullopt;
}
std::string Fixed(std::optional<double> v, const char* none = "-") {
  return v ? absl::StrFormat("%.3f", *v) : none;
}
std::string Percent(std::optional<double> v) { return v ? absl::StrFormat("%.1f%%", 100 * *v) : "-"; }
std::string JsonOpt(std::optional<double> v) { return v ? JsonNumber(*v) : "null"; }
std::string CsvOpt(std::optional<double> v) { return v ? absl::StrFormat("%.6f", *v) : ""; }
std::string CsvShort(std::optional<double> v) { return v ? absl::StrFormat("%.6g", *v) : ""; }
std::string CsvQuote(const std::string& s) { return absl::StrCat("\"", absl::StrReplaceAll(s, {{"\"", "\"\""}}), "\""); }

using Group = std::pair<std::string, std::string>;  // placement, variant

std::string GroupTitle(const Group& g) {
  return absl::StrCat(PlacementTitle(g.first), g.second.empty() ? "" : absl::StrCat(" [", g.second, "]"));
}

// Columns padded to their widest entry, two spaces apart.
std::string Columns(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) line += Pad(row[i], widths[i] + 2);
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

// The LRS as shown: "-" without a figure; a figure from one lr is 0 by the
// formula and says nothing, so it is marked.
std::string LrsText(const v1::LrSensitivity& l) {
  if (!l.has_lr_sensitivity()) return "-";
  std::string s = absl::StrFormat("%.3f", l.lr_sensitivity());
  if (l.lrs() == 1) s += " (one lr)";
  return s;
}

std::string LrSensitivityTable(const std::vector<const v1::LrSensitivity*>& lines) {
  std::vector<std::vector<std::string>> rows = {
      {"warm-up", "lrs", "l0", "l*", "best lr", "LRS", "at l0", "pending"}};
  for (const v1::LrSensitivity* l : lines) {
    rows.push_back({std::to_string(l->warmup_steps()), std::to_string(l->lrs()),
                    Fixed(Opt(l->has_init_val_loss(), l->init_val_loss())),
                    Fixed(Opt(l->has_best_val_loss(), l->best_val_loss())),
                    l->has_best_lr() ? FormatLr(l->best_lr()) : "-", LrsText(*l), std::to_string(l->points_at_l0()),
                    std::to_string(l->lrs_pending())});
  }
  return Columns(rows);
}

std::string SummaryLine(const v1::PlacementLrSensitivity& p) {
  if (p.warmups() == 0) return "over warm-ups: no warm-up with LRS from two lrs or more\n";
  return absl::StrFormat("over %d warm-up%s (LRS from two lrs or more): mean %s, min %s at warm-up %d, max %s; best l* %s\n",
                         p.warmups(), p.warmups() == 1 ? "" : "s",
                         Fixed(Opt(p.has_mean_lr_sensitivity(), p.mean_lr_sensitivity())),
                         Fixed(Opt(p.has_min_lr_sensitivity(), p.min_lr_sensitivity())), p.warmup_of_min(),
                         Fixed(Opt(p.has_max_lr_sensitivity(), p.max_lr_sensitivity())),
                         Fixed(Opt(p.has_best_val_loss(), p.best_val_loss())));
}

std::string SharesLine(const v1::VarianceShares& v) {
  std::string out = "Variance explained (fANOVA): ";
  if (!v.has_share_lr()) return absl::StrCat(out, "not computed: ", v.note(), "\n");
  absl::StrAppend(&out, "warm-up ", Percent(v.share_warmup()), ", peak lr ", Percent(v.share_lr()), ", interaction ",
                  Percent(v.share_interaction()), ", seeds ", Percent(v.share_seed()),
                  absl::StrFormat(" (total variance %.4g, %d trials)", v.total_variance(), v.trials()));
  if (!v.note().empty()) absl::StrAppend(&out, "; ", v.note());
  return out + "\n";
}

// The analysis rows of each (placement, variant), looked up by group.
struct GroupRows {
  std::vector<const v1::LrSensitivity*> lines;  // by warm-up
  const v1::PlacementLrSensitivity* summary = nullptr;
  const v1::VarianceShares* shares = nullptr;
};

std::map<Group, GroupRows> RowsByGroup(const v1::GetSweepAnalysisResponse& a) {
  std::map<Group, GroupRows> out;
  for (const auto& l : a.lr_sensitivity()) out[{l.placement(), l.variant()}].lines.push_back(&l);
  for (const auto& p : a.lr_sensitivity_summary()) out[{p.placement(), p.variant()}].summary = &p;
  for (const auto& v : a.importance()) out[{v.placement(), v.variant()}].shares = &v;
  return out;
}

}  // namespace

std::string FormatLr(double lr) {
  // "3e-03" when one significant digit is exact, else "1.5e-03".
  const std::string short_form = absl::StrFormat("%.0e", lr);
  if (std::fabs(std::stod(short_form) - lr) <= 1e-9 * std::fabs(lr)) return short_form;
  return absl::StrFormat("%.3g", lr);
}

std::vector<ResultCell> CellsFromAnalysis(const v1::GetSweepAnalysisResponse& analysis) {
  std::vector<ResultCell> out;
  out.reserve(analysis.cells_size());
  for (const v1::GridCell& g : analysis.cells()) {
    ResultCell& c = out.emplace_back();
    c.placement = g.placement();
    c.variant = g.variant();
    c.warmup_steps = g.warmup_steps();
    c.peak_lr = g.peak_lr();
    c.trials = g.trials();
    c.succeeded = g.succeeded();
    c.diverged = g.diverged();
    c.failed = g.failed();
    c.cancelled = g.cancelled();
    c.unfinished = g.unfinished();
    c.seeds_with_loss = g.n_seeds();
    c.mean_final_val_loss = g.mean_val_loss();
    c.std_final_val_loss = g.std_val_loss();  // unset (one seed): 0
    c.best_final_val_loss = g.min_val_loss();
    c.plateaued = g.plateaued();
    c.not_converged = g.not_converged();
    c.divergence_rate = Opt(g.has_divergence_rate(), g.divergence_rate());
    c.failure_rate = Opt(g.has_failure_rate(), g.failure_rate());
  }
  return out;
}

std::string RenderResultsTable(const v1::Sweep& sweep, const v1::GetSweepAnalysisResponse& analysis) {
  const std::vector<ResultCell> cells = CellsFromAnalysis(analysis);
  std::string out = absl::StrFormat("sweep %d \"%s\": final validation loss, mean±std over seeds "
                                    "(\"diverged\": every seed diverged; (k div): k seeds diverged; (k plat): k "
                                    "seeds failed to train without diverging, the unigram plateau; (k n.c.): k "
                                    "seeds ended near the unigram loss still learning, not converged, no "
                                    "failure)\n",
                                    sweep.id(), sweep.name());
  const std::map<Group, GroupRows> rows_by_group = RowsByGroup(analysis);
  std::set<Group> group_set;
  for (const ResultCell& c : cells) group_set.insert({c.placement, c.variant});
  for (const auto& [group, rows] : rows_by_group) group_set.insert(group);
  // Placements in the report's order (the scheme table's, then others),
  // each placement's variants together.
  std::set<std::string> placement_set;
  for (const Group& g : group_set) placement_set.insert(g.first);
  std::vector<Group> groups;
  for (const std::string& p : PlacementOrder({placement_set.begin(), placement_set.end()})) {
    for (const Group& g : group_set) {
      if (g.first == p) groups.push_back(g);
    }
  }
  bool explained = false;
  for (const Group& group : groups) {
    std::set<int> warmups;
    std::set<double> lrs;
    std::map<std::pair<int, double>, const ResultCell*> grid;
    for (const ResultCell& c : cells) {
      if (c.placement != group.first || c.variant != group.second) continue;
      warmups.insert(c.warmup_steps);
      lrs.insert(c.peak_lr);
      grid[{c.warmup_steps, c.peak_lr}] = &c;
    }
    out += absl::StrCat("\n", GroupTitle(group), "\n");
    // The loss grid, then (from a scheduler with the rule) the failure rates.
    bool any_rate = false;
    for (const auto& [key, c] : grid) any_rate |= c->failure_rate.has_value();
    for (const bool rates : {false, true}) {
      if (rates && !any_rate) break;
      if (rates) out += "failed to train, (diverged + plateaued) / finished seeds:\n";
      std::vector<std::vector<std::string>> rows;
      std::vector<std::string> header = {"warmup \\ lr"};
      for (double lr : lrs) header.push_back(FormatLr(lr));
      rows.push_back(header);
      for (int w : warmups) {
        std::vector<std::string> row = {std::to_string(w)};
        for (double lr : lrs) {
          auto it = grid.find({w, lr});
          row.push_back(it == grid.end() ? "" : rates ? FailureText(*it->second) : CellText(*it->second));
        }
        rows.push_back(row);
      }
      out += Columns(rows);
    }
    auto it = rows_by_group.find(group);
    if (it == rows_by_group.end()) continue;
    const GroupRows& g = it->second;
    if (!g.lines.empty()) {
      out += "\nLR sensitivity by warm-up";
      if (!explained) {
        out += " (Wortsman et al. 2023: mean over lrs of min(l, l0) - l*, l the mean final loss over seeds,"
               " a diverged or non-finite seed counting as l0, the loss at initialisation; lrs: counted,"
               " pending: not yet final or without l0)";
        explained = true;
      }
      out += "\n" + LrSensitivityTable(g.lines);
    }
    if (g.summary != nullptr) out += SummaryLine(*g.summary);
    if (g.shares != nullptr) out += SharesLine(*g.shares);
  }
  return out;
}

std::string RenderResultsCsv(const v1::GetSweepAnalysisResponse& analysis) {
  // Each cell's row carries its line's LR sensitivity (line_*), its
  // placement's summary over warm-ups (summary_*) and variance shares
  // (share_*, importance_note), repeated on the rows they belong to.
  std::string out =
      "placement,variant,warmup_steps,peak_lr,trials,succeeded,diverged,plateaued,failed,cancelled,unfinished,"
      "divergence_rate,failure_rate,mean_final_val_loss,std_final_val_loss,best_final_val_loss,"
      "line_lrs,line_init_val_loss,line_best_val_loss,line_best_lr,line_lr_sensitivity,line_points_at_l0,"
      "line_lrs_pending,summary_warmups,summary_mean_lr_sensitivity,summary_min_lr_sensitivity,"
      "summary_max_lr_sensitivity,summary_warmup_of_min,summary_best_val_loss,"
      "share_warmup,share_lr,share_interaction,share_seed,importance_note,not_converged\n";
  const std::map<Group, GroupRows> rows_by_group = RowsByGroup(analysis);
  for (const ResultCell& c : CellsFromAnalysis(analysis)) {
    const bool has = c.seeds_with_loss > 0;
    absl::StrAppend(&out, c.placement, ",\"", c.variant, "\",", c.warmup_steps, ",", absl::StrFormat("%.6g", c.peak_lr), ",",
                    c.trials, ",", c.succeeded, ",", c.diverged, ",", c.plateaued, ",", c.failed, ",", c.cancelled,
                    ",", c.unfinished, ",", CsvOpt(c.divergence_rate), ",", CsvOpt(c.failure_rate), ",",
                    has ? absl::StrFormat("%.6f", c.mean_final_val_loss) : "", ",",
                    has ? absl::StrFormat("%.6f", c.std_final_val_loss) : "", ",",
                    has ? absl::StrFormat("%.6f", c.best_final_val_loss) : "");
    const GroupRows* g = nullptr;
    if (auto it = rows_by_group.find({c.placement, c.variant}); it != rows_by_group.end()) g = &it->second;
    const v1::LrSensitivity* l = nullptr;
    for (const v1::LrSensitivity* x : g ? g->lines : std::vector<const v1::LrSensitivity*>()) {
      if (x->warmup_steps() == c.warmup_steps) l = x;
    }
    if (l != nullptr) {
      absl::StrAppend(&out, ",", l->lrs(), ",", CsvOpt(Opt(l->has_init_val_loss(), l->init_val_loss())), ",",
                      CsvOpt(Opt(l->has_best_val_loss(), l->best_val_loss())), ",",
                      CsvShort(Opt(l->has_best_lr(), l->best_lr())), ",",
                      CsvOpt(Opt(l->has_lr_sensitivity(), l->lr_sensitivity())), ",", l->points_at_l0(), ",",
                      l->lrs_pending());
    } else {
      out += ",,,,,,,";
    }
    const v1::PlacementLrSensitivity* p = g ? g->summary : nullptr;
    if (p != nullptr) {
      absl::StrAppend(&out, ",", p->warmups(), ",", CsvOpt(Opt(p->has_mean_lr_sensitivity(), p->mean_lr_sensitivity())),
                      ",", CsvOpt(Opt(p->has_min_lr_sensitivity(), p->min_lr_sensitivity())), ",",
                      CsvOpt(Opt(p->has_max_lr_sensitivity(), p->max_lr_sensitivity())), ",",
                      CsvShort(Opt(p->has_warmup_of_min(), p->warmup_of_min())), ",",
                      CsvOpt(Opt(p->has_best_val_loss(), p->best_val_loss())));
    } else {
      out += ",,,,,,";
    }
    const v1::VarianceShares* v = g ? g->shares : nullptr;
    if (v != nullptr) {
      absl::StrAppend(&out, ",", CsvOpt(Opt(v->has_share_warmup(), v->share_warmup())), ",",
                      CsvOpt(Opt(v->has_share_lr(), v->share_lr())), ",",
                      CsvOpt(Opt(v->has_share_interaction(), v->share_interaction())), ",",
                      CsvOpt(Opt(v->has_share_seed(), v->share_seed())), ",", CsvQuote(v->note()));
    } else {
      out += ",,,,,";
    }
    absl::StrAppend(&out, ",", c.not_converged, "\n");
  }
  return out;
}

std::string RenderResultsJson(const v1::Sweep& sweep, const v1::GetSweepAnalysisResponse& analysis) {
  std::string out = absl::StrCat("{\"sweep_id\":", sweep.id(), ",\"name\":", JsonQuote(sweep.name()), ",\"cells\":[");
  bool first = true;
  for (const ResultCell& c : CellsFromAnalysis(analysis)) {
    if (!first) out += ",";
    first = false;
    const bool has = c.seeds_with_loss > 0;
    absl::StrAppend(&out, "{\"placement\":", JsonQuote(c.placement), ",\"variant\":", JsonQuote(c.variant),
                    ",\"warmup_steps\":", c.warmup_steps, ",\"peak_lr\":", JsonNumber(c.peak_lr),
                    ",\"trials\":", c.trials, ",\"succeeded\":", c.succeeded, ",\"diverged\":", c.diverged,
                    ",\"plateaued\":", c.plateaued, ",\"not_converged\":", c.not_converged, ",\"failed\":", c.failed, ",\"cancelled\":", c.cancelled,
                    ",\"unfinished\":", c.unfinished, ",\"divergence_rate\":", JsonOpt(c.divergence_rate),
                    ",\"failure_rate\":", JsonOpt(c.failure_rate),
                    ",\"mean_final_val_loss\":", has ? JsonNumber(c.mean_final_val_loss) : "null",
                    ",\"std_final_val_loss\":", has ? JsonNumber(c.std_final_val_loss) : "null",
                    ",\"best_final_val_loss\":", has ? JsonNumber(c.best_final_val_loss) : "null", "}");
  }
  out += "],\"lr_sensitivity\":[";
  first = true;
  for (const v1::LrSensitivity& l : analysis.lr_sensitivity()) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, "{\"placement\":", JsonQuote(l.placement()), ",\"variant\":", JsonQuote(l.variant()),
                    ",\"warmup_steps\":", l.warmup_steps(), ",\"lrs\":", l.lrs(),
                    ",\"init_val_loss\":", JsonOpt(Opt(l.has_init_val_loss(), l.init_val_loss())),
                    ",\"best_val_loss\":", JsonOpt(Opt(l.has_best_val_loss(), l.best_val_loss())),
                    ",\"best_lr\":", JsonOpt(Opt(l.has_best_lr(), l.best_lr())),
                    ",\"lr_sensitivity\":", JsonOpt(Opt(l.has_lr_sensitivity(), l.lr_sensitivity())),
                    ",\"one_lr\":", l.lrs() == 1 ? "true" : "false", ",\"points_at_l0\":", l.points_at_l0(),
                    ",\"lrs_pending\":", l.lrs_pending(), "}");
  }
  out += "],\"lr_sensitivity_summary\":[";
  first = true;
  for (const v1::PlacementLrSensitivity& p : analysis.lr_sensitivity_summary()) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, "{\"placement\":", JsonQuote(p.placement()), ",\"variant\":", JsonQuote(p.variant()),
                    ",\"warmups\":", p.warmups(),
                    ",\"mean_lr_sensitivity\":", JsonOpt(Opt(p.has_mean_lr_sensitivity(), p.mean_lr_sensitivity())),
                    ",\"min_lr_sensitivity\":", JsonOpt(Opt(p.has_min_lr_sensitivity(), p.min_lr_sensitivity())),
                    ",\"max_lr_sensitivity\":", JsonOpt(Opt(p.has_max_lr_sensitivity(), p.max_lr_sensitivity())),
                    ",\"warmup_of_min\":", JsonOpt(Opt(p.has_warmup_of_min(), p.warmup_of_min())),
                    ",\"best_val_loss\":", JsonOpt(Opt(p.has_best_val_loss(), p.best_val_loss())), "}");
  }
  out += "],\"importance\":[";
  first = true;
  for (const v1::VarianceShares& v : analysis.importance()) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, "{\"placement\":", JsonQuote(v.placement()), ",\"variant\":", JsonQuote(v.variant()),
                    ",\"warmups\":", v.warmups(), ",\"lrs\":", v.lrs(), ",\"trials\":", v.trials(),
                    ",\"total_variance\":", JsonOpt(Opt(v.has_total_variance(), v.total_variance())),
                    ",\"share_warmup\":", JsonOpt(Opt(v.has_share_warmup(), v.share_warmup())),
                    ",\"share_lr\":", JsonOpt(Opt(v.has_share_lr(), v.share_lr())),
                    ",\"share_interaction\":", JsonOpt(Opt(v.has_share_interaction(), v.share_interaction())),
                    ",\"share_seed\":", JsonOpt(Opt(v.has_share_seed(), v.share_seed())),
                    ",\"note\":", JsonQuote(v.note()), "}");
  }
  return out + "]}\n";
}

}  // namespace normsweep::client
