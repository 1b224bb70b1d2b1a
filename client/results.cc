#include "client/results.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
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
  if (c.failed > 0) s += absl::StrFormat(" (%d fail)", c.failed);
  if (c.unfinished > 0) s += " ...";
  return s;
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

}  // namespace

std::string PlacementTitle(const std::string& p) {
  if (p == "post") return "Post-LN";
  if (p == "pre") return "Pre-LN";
  return p;
}

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
  }
  return out;
}

std::string RenderResultsTable(const v1::Sweep& sweep, const std::vector<ResultCell>& cells) {
  std::string out = absl::StrFormat("sweep %d \"%s\": final validation loss, mean±std over seeds "
                                    "(\"diverged\": every seed diverged; (k div): k seeds diverged)\n",
                                    sweep.id(), sweep.name());
  std::set<std::pair<std::string, std::string>> groups;
  for (const ResultCell& c : cells) groups.insert({c.placement, c.variant});
  for (const auto& [placement, variant] : groups) {
    std::set<int> warmups;
    std::set<double> lrs;
    std::map<std::pair<int, double>, const ResultCell*> grid;
    for (const ResultCell& c : cells) {
      if (c.placement != placement || c.variant != variant) continue;
      warmups.insert(c.warmup_steps);
      lrs.insert(c.peak_lr);
      grid[{c.warmup_steps, c.peak_lr}] = &c;
    }
    out += absl::StrCat("\n", PlacementTitle(placement), variant.empty() ? "" : absl::StrCat(" [", variant, "]"), "\n");
    std::vector<std::vector<std::string>> rows;
    std::vector<std::string> header = {"warmup \\ lr"};
    for (double lr : lrs) header.push_back(FormatLr(lr));
    rows.push_back(header);
    for (int w : warmups) {
      std::vector<std::string> row = {std::to_string(w)};
      for (double lr : lrs) {
        auto it = grid.find({w, lr});
        row.push_back(it == grid.end() ? "" : CellText(*it->second));
      }
      rows.push_back(row);
    }
    std::vector<size_t> widths(header.size(), 0);
    for (const auto& row : rows) {
      for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], Width(row[i]));
    }
    for (const auto& row : rows) {
      std::string line;
      for (size_t i = 0; i < row.size(); ++i) line += Pad(row[i], widths[i] + 2);
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
  }
  return out;
}

std::string RenderResultsCsv(const std::vector<ResultCell>& cells) {
  std::string out =
      "placement,variant,warmup_steps,peak_lr,trials,succeeded,diverged,failed,cancelled,unfinished,"
      "mean_final_val_loss,std_final_val_loss,best_final_val_loss\n";
  for (const ResultCell& c : cells) {
    const bool has = c.seeds_with_loss > 0;
    absl::StrAppend(&out, c.placement, ",\"", c.variant, "\",", c.warmup_steps, ",", absl::StrFormat("%.6g", c.peak_lr), ",",
                    c.trials, ",", c.succeeded, ",", c.diverged, ",", c.failed, ",", c.cancelled, ",", c.unfinished,
                    ",", has ? absl::StrFormat("%.6f", c.mean_final_val_loss) : "", ",",
                    has ? absl::StrFormat("%.6f", c.std_final_val_loss) : "", ",",
                    has ? absl::StrFormat("%.6f", c.best_final_val_loss) : "", "\n");
  }
  return out;
}

std::string RenderResultsJson(const v1::Sweep& sweep, const std::vector<ResultCell>& cells) {
  std::string out = absl::StrCat("{\"sweep_id\":", sweep.id(), ",\"name\":", JsonQuote(sweep.name()), ",\"cells\":[");
  bool first = true;
  for (const ResultCell& c : cells) {
    if (!first) out += ",";
    first = false;
    const bool has = c.seeds_with_loss > 0;
    absl::StrAppend(&out, "{\"placement\":", JsonQuote(c.placement), ",\"variant\":", JsonQuote(c.variant),
                    ",\"warmup_steps\":", c.warmup_steps, ",\"peak_lr\":", JsonNumber(c.peak_lr),
                    ",\"trials\":", c.trials, ",\"succeeded\":", c.succeeded, ",\"diverged\":", c.diverged,
                    ",\"failed\":", c.failed, ",\"cancelled\":", c.cancelled, ",\"unfinished\":", c.unfinished,
                    ",\"mean_final_val_loss\":", has ? JsonNumber(c.mean_final_val_loss) : "null",
                    ",\"std_final_val_loss\":", has ? JsonNumber(c.std_final_val_loss) : "null",
                    ",\"best_final_val_loss\":", has ? JsonNumber(c.best_final_val_loss) : "null", "}");
  }
  return out + "]}\n";
}

}  // namespace normsweep::client
