// The instability diagnostics of two trials per placement.
#include "client/report/figures.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/report/svg.h"
#include "client/results.h"
#include "client/trial_failure.h"

namespace normsweep::client::report {
namespace {

bool UsableLoss(const v1::GetTrialResponse& t) {
  return t.trial().state() == v1::TRIAL_SUCCEEDED &&
         Finite(t.trial().result().has_final_val_loss(), t.trial().result().final_val_loss());
}

// One quantity of a trial over steps, finite values only.
struct DiagSeries {
  std::vector<std::pair<double, double>> pts;  // (step, value)
  std::string what;                            // which layer (and matrix), "" when not per layer
};

// Of per-layer (or per-matrix) curves, the one with the largest value over
// the run; ties go to the first key.
template <typename Key>
DiagSeries Worst(const std::map<Key, std::vector<std::pair<double, double>>>& curves,
                 const std::function<std::string(const Key&)>& name) {
  DiagSeries out;
  double peak = -INFINITY;
  for (const auto& [key, pts] : curves) {
    for (const auto& [step, value] : pts) {
      if (value > peak) {
        peak = value;
        out.pts = pts;
        out.what = name(key);
      }
    }
  }
  std::sort(out.pts.begin(), out.pts.end());
  return out;
}

DiagSeries WorstAttnLogit(const v1::GetTrialResponse& t) {
  std::map<int, std::vector<std::pair<double, double>>> curves;
  for (const v1::StepDiagnostics& d : t.diagnostics()) {
    for (const v1::LayerDiagnostics& l : d.layers()) {
      if (Finite(l.has_max_attn_logit(), l.max_attn_logit())) curves[l.layer()].push_back({d.step(), l.max_attn_logit()});
    }
  }
  return Worst<int>(curves, [](const int& layer) { return absl::StrCat("layer ", layer); });
}

DiagSeries LargestUpdateRatio(const v1::GetTrialResponse& t) {
  static constexpr const char* kMatrices[] = {"qkv", "proj", "fc1", "fc2"};
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> curves;
  for (const v1::StepDiagnostics& d : t.diagnostics()) {
    for (const v1::LayerDiagnostics& l : d.layers()) {
      const std::array<std::pair<bool, double>, 4> ratios = {
          std::pair{l.has_update_ratio_qkv(), l.update_ratio_qkv()},
          std::pair{l.has_update_ratio_proj(), l.update_ratio_proj()},
          std::pair{l.has_update_ratio_fc1(), l.update_ratio_fc1()},
          std::pair{l.has_update_ratio_fc2(), l.update_ratio_fc2()}};
      for (int m = 0; m < 4; ++m) {
        if (Finite(ratios[m].first, ratios[m].second)) curves[{l.layer(), m}].push_back({d.step(), ratios[m].second});
      }
    }
  }
  return Worst<std::pair<int, int>>(
      curves, [](const std::pair<int, int>& k) { return absl::StrCat("layer ", k.first, " ", kMatrices[k.second]); });
}

DiagSeries OutputLogZ(const v1::GetTrialResponse& t) {
  DiagSeries out;
  for (const v1::MetricPoint& m : t.metrics()) {
    if (Finite(m.has_output_log_z(), m.output_log_z())) out.pts.push_back({m.step(), m.output_log_z()});
  }
  std::sort(out.pts.begin(), out.pts.end());
  return out;
}

struct DiagLine {
  std::string placement;
  const v1::GetTrialResponse* trial = nullptr;
  DiagSeries series;
  // The first failure (dashed), else the best lr's (solid); a cross where a
  // diverged one's points end (a plateau has no divergence point).
  std::optional<schema::TrainingFailure> failure;
};

// "best lr", "first failure (plateau)", "first failure (diverged after step 60)".
std::string RoleName(const DiagLine& l) {
  return l.failure ? absl::StrCat("first failure (", FailureCause(l.trial->trial(), *l.failure), ")") : "best lr";
}

std::string DiagChartSvg(const std::string& title, const std::string& ytitle, const std::vector<DiagLine>& lines,
                         const std::string& clip) {
  const double w = 400, h = 270;
  double xmax = 1, lo = INFINITY, hi = -INFINITY;
  for (const DiagLine& l : lines) {
    for (const auto& [x, y] : l.series.pts) {
      xmax = std::max(xmax, x);
      lo = std::min(lo, y);
      hi = std::max(hi, y);
    }
  }
  // A blow-up spans decades: log scale then, so the other curves stay readable.
  const bool log = std::isfinite(lo) && lo > 0 && hi / lo > 30;
  auto T = [&](double y) { return log ? std::log10(y) : y; };
  Frame f{58, 30, w - 58 - 14, h - 30 - 50, 0, xmax, 0, 1};
  if (std::isfinite(lo)) {
    const double pad = std::max((T(hi) - T(lo)) * 0.06, log ? 0.05 : 0.01);
    f.y0 = T(lo) - pad;
    f.y1 = T(hi) + pad;
  }
  std::vector<double> yticks;
  if (log) {
    for (double d = std::ceil(f.y0); d <= std::floor(f.y1); d += 1) yticks.push_back(d);
  } else {
    yticks = Ticks(f.y0, f.y1, 5);
  }
  std::function<std::string(double)> ylabel = TickLabel;
  if (log) ylabel = [](double d) { return absl::StrFormat("%g", std::pow(10, d)); };
  f.left = PlotLeft(yticks, ylabel, f.left);  // update ratios of 1e-3 have long tick labels (0.0015)
  f.width = w - f.left - 14;
  std::string s = SvgOpen(w, h, title);
  s += Text(f.left + f.width / 2, 18, title, "class=\"chart-title\" text-anchor=\"middle\"");
  s += Axes(f, Ticks(0, xmax, 5), yticks, "step", log ? ytitle + " (log scale)" : ytitle, TickLabel, ylabel);
  absl::StrAppend(&s, "<defs><clipPath id=\"", clip, "\"><rect x=\"", Px(f.left), "\" y=\"", Px(f.top), "\" width=\"",
                  Px(f.width), "\" height=\"", Px(f.height), "\"/></clipPath></defs><g clip-path=\"url(#", clip, ")\">\n");
  int drawn = 0;
  std::string ends;  // outside the clip: a cross at the edge stays whole
  for (const DiagLine& l : lines) {
    if (l.series.pts.empty()) continue;
    ++drawn;
    const std::string colour = PlacementColour(l.placement);
    std::string points;
    for (const auto& [x, y] : l.series.pts) absl::StrAppend(&points, Px(f.X(x)), ",", Px(f.Y(T(y))), " ");
    absl::StrAppend(&s, "<polyline class=\"curve diag\" fill=\"none\" stroke=\"", colour, "\"",
                    l.failure ? " stroke-dasharray=\"7 4\"" : "", " points=\"", points, "\"><title>",
                    Escape(PlacementTitle(l.placement)), ", ", Escape(RoleName(l)), ": trial ", l.trial->trial().id(),
                    l.series.what.empty() ? "" : ", ", Escape(l.series.what), "</title></polyline>\n");
    if (l.failure == schema::TrainingFailure::kDiverged) {
      const auto& [x, y] = l.series.pts.back();
      ends += CrossPath(f.X(x), f.Y(T(y)), 5, "diverged-mark diag-end",
                        absl::StrCat("trial ", l.trial->trial().id(), " diverged after step ", x));
    }
  }
  s += "</g>\n" + ends;
  if (drawn == 0) {
    s += Text(f.left + f.width / 2, f.top + f.height / 2, "not reported", "class=\"tick\" text-anchor=\"middle\"");
  }
  return s + "</svg>\n";
}

}  // namespace

// Best: a trial of the placement's best grid cell (the view's mean over
// seeds), its lowest seed; without cells, the trial with the lowest loss.
// First failure (proto/schema/failure.h's rule): the instability failure,
// the smallest failing lr above the best trial's lr, then the earliest
// diverged step (a plateau has none: after the diverged ones), then the
// lowest id; without a failure above the best lr (or without a best trial),
// the smallest failing lr by the same order.
DiagnosticPicks PickDiagnosticTrials(const VariantView& v, const std::string& placement) {
  DiagnosticPicks p;
  auto it = v.trials.find(placement);
  if (it == v.trials.end()) return p;
  const ResultCell* best_cell = nullptr;
  for (const ResultCell& c : v.cells) {
    if (c.placement == placement && c.seeds_with_loss > 0 && std::isfinite(c.mean_final_val_loss) &&
        (best_cell == nullptr || c.mean_final_val_loss < best_cell->mean_final_val_loss)) {
      best_cell = &c;
    }
  }
  auto best_key = [&](const v1::GetTrialResponse* t) {
    return std::make_tuple(best_cell != nullptr ? static_cast<double>(t->trial().config().seed())
                                                : t->trial().result().final_val_loss(),
                           t->trial().id());
  };
  for (const v1::GetTrialResponse* t : it->second) {
    const v1::TrainConfig& c = t->trial().config();
    if (!UsableLoss(*t)) continue;
    if (best_cell != nullptr && (c.warmup_steps() != best_cell->warmup_steps || c.lr() != best_cell->peak_lr)) continue;
    if (p.best == nullptr || best_key(t) < best_key(p.best)) p.best = t;
  }
  auto failure_key = [&](const v1::GetTrialResponse* t) {
    const v1::TrialResult& r = t->trial().result();
    const double lr = t->trial().config().lr();
    const bool above_best = p.best != nullptr && lr > p.best->trial().config().lr();
    return std::make_tuple(!above_best, lr,
                           r.has_diverged_step() ? r.diverged_step() : std::numeric_limits<int32_t>::max(),
                           t->trial().id());
  };
  for (const v1::GetTrialResponse* t : it->second) {
    const std::optional<schema::TrainingFailure> f = TrialFailure(t->trial(), v.max_val_loss);
    if (!f || !schema::FailedToTrain(*f)) continue;  // not_converged is no failure
    if (p.first_failure == nullptr || failure_key(t) < failure_key(p.first_failure)) {
      p.first_failure = t;
      p.failure = *f;
    }
  }
  return p;
}

std::string DiagnosticsSection(const VariantView& v) {
  std::vector<DiagLine> logit, log_z, update;
  std::vector<std::string> legend_rows;  // SVG fragments, each two text lines high
  bool any = false;
  for (const std::string& p : v.placements) {
    const DiagnosticPicks picks = PickDiagnosticTrials(v, p);
    for (const bool failing : {false, true}) {
      const v1::GetTrialResponse* t = failing ? picks.first_failure : picks.best;
      if (t == nullptr) {
        legend_rows.push_back(Text(
            10, 0, absl::StrCat(PlacementTitle(p), ": ", failing ? "no trial failed to train" : "no trial succeeded"),
            "class=\"tick\""));
        continue;
      }
      const std::optional<schema::TrainingFailure> failure =
          failing ? std::optional<schema::TrainingFailure>(picks.failure) : std::nullopt;
      const DiagLine a{p, t, WorstAttnLogit(*t), failure}, z{p, t, OutputLogZ(*t), failure},
          u{p, t, LargestUpdateRatio(*t), failure};
      any |= !a.series.pts.empty() || !z.series.pts.empty() || !u.series.pts.empty();
      logit.push_back(a);
      log_z.push_back(z);
      update.push_back(u);
      const v1::TrainConfig& c = t->trial().config();
      std::string worst;
      if (!a.series.what.empty()) absl::StrAppend(&worst, "logit ", a.series.what);
      if (!u.series.what.empty()) absl::StrAppend(&worst, worst.empty() ? "" : ", ", "update ", u.series.what);
      if (worst.empty()) worst = z.series.pts.empty() ? "no diagnostics reported" : "no per-layer diagnostics";
      legend_rows.push_back(absl::StrCat(
          "<line x1=\"10\" x2=\"44\" y1=\"-4\" y2=\"-4\" stroke=\"", PlacementColour(p), "\"",
          failing ? " stroke-dasharray=\"7 4\"" : "", " class=\"curve\"/>",
          Text(52, 0, absl::StrCat(PlacementTitle(p), ", ", RoleName(a), ": trial ", t->trial().id()),
               "class=\"tick\""),
          Text(52, 15, absl::StrCat("warm-up ", c.warmup_steps(), ", lr ", FormatLr(c.lr()), ", seed ", c.seed(), "; ",
                                    worst),
               "class=\"tick small\"")));
    }
  }
  if (logit.empty()) return "<p class=\"note\">No trial to show diagnostics for: none has succeeded or failed to train.</p>\n";
  if (!any) {
    return "<p class=\"note\">The chosen trials reported no instability diagnostics (attention logits, output "
           "log Z, update ratios).</p>\n";
  }
  std::string s = "<div class=\"row\">\n";
  const std::string id = absl::StrCat("diag-", v.index, "-");
  s += DiagChartSvg("max attention logit, worst layer", "max q\u00b7k/\u221ad_head", logit, id + "logit");
  s += DiagChartSvg("output log Z", "mean log-sum-exp of the logits", log_z, id + "logz");
  s += DiagChartSvg("largest update / weight RMS ratio", "RMS(update) / RMS(weight)", update, id + "update");
  std::string legend = SvgOpen(440, 16 + 36 * legend_rows.size(), "diagnostics legend");
  double y = 20;
  for (const std::string& row : legend_rows) {
    absl::StrAppend(&legend, "<g transform=\"translate(0 ", Px(y), ")\">", row, "</g>\n");
    y += 36;
  }
  return s + legend + "</svg>\n</div>\n";
}

}  // namespace normsweep::client::report
