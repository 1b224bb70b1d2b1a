#include "client/report/page.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include <google/protobuf/util/time_util.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/report/boundary.h"
#include "client/report/figures.h"
#include "client/report/svg.h"
#include "client/report/variant_view.h"
#include "proto/schema/failure.h"
#include "proto/schema/state_names.h"

namespace normsweep::client::report {
namespace {

constexpr char kStyle[] = R"css(
body { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; margin: 24px 32px; color: #222; background: #fff; }
h1 { font-size: 22px; margin: 0 0 6px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p { max-width: 70em; line-height: 1.4; }
.meta { color: #555; }
.note { color: #555; font-style: italic; }
.row { display: flex; flex-wrap: wrap; gap: 18px; align-items: flex-start; }
table.num { border-collapse: collapse; font-size: 13px; }
table.num th, table.num td { border: 1px solid #ccc; padding: 4px 10px; text-align: right; }
table.num th { background: #f3f3f3; }
svg text { font-family: "DejaVu Sans", Helvetica, Arial, sans-serif; }
.chart-title { font-size: 14px; font-weight: bold; fill: #222; }
.tick { font-size: 11px; fill: #333; }
.small { font-size: 10px; }
.axis-title { font-size: 12px; fill: #222; }
.plot { fill: none; stroke: #888; }
.bar { stroke: #888; }
.grid { stroke: #e6e6e6; }
.axis { stroke: #888; }
.cell { stroke: #fff; stroke-width: 1; }
.cell.near { stroke: #000; stroke-width: 3; }
.cell-text { font-size: 12px; fill: #111; }
.cell-text.light { fill: #fff; }
.curve { stroke-width: 1.6; }
.diverged-mark { stroke: #d62728; stroke-width: 2.2; fill: none; }
.partial-mark { stroke: #d62728; stroke-width: 1.6; fill: none; }
.loss-point, .lrs-point { stroke: #fff; stroke-width: 0.8; }
.plateau-point { stroke-width: 1.8; }
.not-converged-mark { stroke-width: 1.4; }
.l0-line { stroke: #555; stroke-width: 1.2; stroke-dasharray: 6 4; }
)css";

// Hatching for cells where every seed diverged.
constexpr char kDefs[] =
    "<svg width=\"0\" height=\"0\" style=\"position:absolute\" aria-hidden=\"true\"><defs>"
    "<pattern id=\"diverged\" width=\"8\" height=\"8\" patternUnits=\"userSpaceOnUse\" "
    "patternTransform=\"rotate(45)\"><rect width=\"8\" height=\"8\" fill=\"#f7d4d4\"/>"
    "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"8\" stroke=\"#d62728\" stroke-width=\"3\"/></pattern></defs></svg>\n";

std::string SweepStateName(v1::SweepState s) {
  if (s == v1::SWEEP_STATE_UNSPECIFIED || !v1::SweepState_IsValid(s)) return "unknown state";
  return absl::AsciiStrToLower(schema::SweepStateName(s));
}

// The first trial's resolved config; the sweep's extra axes say what varies.
std::string ModelLine(const v1::TrainConfig& c, const v1::SweepSpec& spec) {
  std::string varied;
  for (const v1::ExtraAxis& axis : spec.extra_axes()) {
    absl::StrAppend(&varied, varied.empty() ? "; varied: " : ", ", axis.field(), " = ", absl::StrJoin(axis.values(), " / "));
  }
  return absl::StrCat(c.layers(), " layers, d_model ", c.d_model(), ", ", c.heads(), " heads, d_ff ", c.d_ff(),
                      ", seq_len ", c.seq_len(), "; ", c.optimizer().empty() ? "adam" : c.optimizer(), ", schedule ",
                      c.schedule().empty() ? "constant" : c.schedule(), ", ", c.steps(), " steps, batch ",
                      c.batch_size(), "; data ", c.data_file().empty() ? c.task() : c.data_file(), varied);
}

// The title, the sweep's state and counts, and the model.
std::string PageHead(const ReportData& data) {
  const v1::Sweep& sweep = data.sweep;
  const std::string title = absl::StrCat("Sweep ", sweep.id(), " \u201c", sweep.name(), "\u201d");
  std::string s = absl::StrCat("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>",
                               Escape(title), " \u2014 normsweep report</title>\n<style>", kStyle,
                               "</style>\n</head>\n<body>\n", kDefs, "<h1>", Escape(title), "</h1>\n");
  const v1::TrialCounts& c = sweep.counts();
  absl::StrAppend(&s, "<p class=\"meta\">", SweepStateName(sweep.state()), "; ", data.trials.size(), " trials: ",
                  c.succeeded(), " succeeded, ", c.diverged(), " diverged, ", c.failed(), " failed, ", c.cancelled(),
                  " cancelled, ", c.running(), " running, ", c.pending(), " pending. Created ",
                  google::protobuf::util::TimeUtil::ToString(sweep.created_at()), ".");
  if (!data.trials.empty()) {
    absl::StrAppend(&s, "<br>Model: ", Escape(ModelLine(data.trials.front().trial().config(), sweep.spec())), ".");
  }
  s += "</p>\n";
  return s;
}

// The figures of one variant, each under its heading and explanation.
std::string VariantSections(const VariantView& v) {
  const std::string suffix = v.variant.empty() ? "" : absl::StrCat(" \u2014 ", v.variant);
  std::string s = absl::StrCat(
      "<h2>Final validation loss over warm-up \u00d7 peak lr", Escape(suffix), "</h2>\n",
      "<p>Mean over seeds of the final validation loss (\u00b1 sample std); \u201ck/n div\u201d: k of "
      "n seeds diverged and are left out of the mean; \u201ck/n plat\u201d: k of n seeds plateaued (failed to "
      "train without diverging, see the summary) and are in it; \u201ck/n n.c.\u201d: k of n seeds had not "
      "converged (near the unigram loss but still learning: no failure). One colour scale for every "
      "placement and every variant.</p>\n",
      HeatmapSection(v));
  absl::StrAppend(&s, "<h2>Final validation loss against peak lr", Escape(suffix), "</h2>\n",
                  "<p>Each grid cell's mean final validation loss over seeds against its peak lr (log scale), one "
                  "line per warm-up, as in Wortsman et al. 2023 (Figure 1). The y range is the data's. \u00d7: "
                  "every seed diverged, drawn at l0, the loss at initialisation (dashed), which LR sensitivity "
                  "counts in their place; when l0 lies above the data the top edge stands for it (l0 \u2191); a ring: "
                  "some seeds diverged and the point is the mean of the others; a hollow point: some seeds "
                  "plateaued (failed to train without diverging, see the summary); a diamond: some seeds had not "
                  "converged (near the unigram loss but still learning).</p>\n",
                  LossVsLrSection(v));
  absl::StrAppend(&s, "<h2>LR sensitivity by warm-up", Escape(suffix), "</h2>\n",
                  "<p>LR sensitivity (Wortsman et al. 2023, section 2.2) of each line of the grid: the mean over "
                  "its peak lrs of min(l(lr), l0) &minus; l*, l(lr) the mean final validation loss over seeds "
                  "(a diverged or non-finite seed counts as l0), l* the line's best. It is 0 for a model that "
                  "stays at l0 everywhere and ignores a shift of the best lr: read it with l* (beside each "
                  "point) and the curves above.</p>\n",
                  LrSensitivitySection(v));
  absl::StrAppend(&s, "<h2>Variance of final validation loss explained", Escape(suffix), "</h2>\n",
                  "<p>Functional ANOVA over each placement's grid (the <code>grid_importance</code> view): the "
                  "shares of warm-up, peak lr, their interaction, and what is left to seeds.</p>\n",
                  VarianceSharesSection(v));
  absl::StrAppend(&s, "<h2>Validation loss during training", Escape(suffix), "</h2>\n",
                  "<p>One line per trial; \u00d7 marks where a diverged trial stopped. Losses above ",
                  Num(kCurveCap), " are drawn at the top edge.</p>\n", CurvesSection(v));
  absl::StrAppend(&s, "<h2>Instability diagnostics", Escape(suffix), "</h2>\n",
                  "<p>Per placement two trials: the best lr's (a trial of the best grid cell, its lowest seed; "
                  "solid) and the first failure to train (see the summary): the smallest failing lr above the "
                  "best trial's, else the smallest failing lr, then the earliest diverged step; dashed, the "
                  "legend says why it failed, \u00d7 where a diverged one's points end). Attention logit: the largest q\u00b7k/\u221ad_head "
                  "over heads and positions on the validation batches; log Z: the output logits' mean "
                  "log-sum-exp; update ratio: RMS(update) / RMS(weight) of the step before the evaluation. Each "
                  "curve is the layer (and matrix) with the largest value over the run, named in the "
                  "legend.</p>\n",
                  DiagnosticsSection(v));
  absl::StrAppend(&s, "<h2>FFN gradient norms at initialization", Escape(suffix), "</h2>\n",
                  "<p>Frobenius norm of each layer's FFN weight gradients on the first batch, before any update "
                  "(Xiong et al. 2020, Figure 3); each seed counted once.</p>\n",
                  GradNormsSection(v));
  return s;
}

// The variants side by side, in a <section> of its own
// (client/report_screenshot.sh --section variants-compared).
std::string VariantsCompared(const std::vector<VariantView>& variants, const v1::GetSweepAnalysisResponse& analysis) {
  return absl::StrCat(
      "<section id=\"variants-compared\">\n<h2>Variants compared</h2>\n<p>Each placement's variants side by side "
      "(the <code>variant_comparison</code> view): the mean over warm-ups of the LR sensitivity, l* (the best "
      "line's l*) with its lr and warm-up, the failure rate (see the summary) and, for a boundary search, the "
      "median line's max trainable lr. \u0394 is the variant's figure minus the baseline's (the sweep's first "
      "variant), \u00d7 the ratio of the lrs; lower is better for all but the lrs. The figures draw a line per "
      "variant (its colour) and, for the loss, per warm-up (its dash), a placement's variants on one scale; "
      "\u00d7 and l0 as in the figures of each variant below.</p>\n",
      VariantsComparedSection(variants, analysis), "</section>\n");
}

}  // namespace
}  // namespace normsweep::client::report

namespace normsweep::client {

std::string RenderReportHtml(const ReportData& data) {
  std::string s = report::PageHead(data);
  if (data.trials.empty()) {
    return s + "<p class=\"note\">This sweep has no trials: there is nothing to show.</p>\n</body>\n</html>\n";
  }
  int finished = 0;
  for (const v1::GetTrialResponse& t : data.trials) finished += schema::IsFinal(t.trial().state());
  if (finished == 0) {
    s += "<p class=\"note\">No trial has finished yet: the heatmaps show pending cells and the curves what has "
         "been reported so far.</p>\n";
  }
  const std::vector<PlacementSummary> summary = SummariesFromAnalysis(data.analysis);
  const std::vector<report::VariantView> variants = report::Variants(data);
  const bool show_variant = variants.size() > 1 || !variants.front().variant.empty();
  absl::StrAppend(&s, "<h2>Summary per placement</h2>\n<p>Final validation loss of the trials that succeeded. "
                  "A grid cell is a (warm-up, peak lr) pair, its value the mean over seeds; it is <em>near the "
                  "best</em> when within ",
                  absl::StrFormat("%g%%", kNearBestTolerance * 100),
                  " of the best cell of either placement (the <code>placement_sensitivity</code> view). A trial "
                  "<em>failed to train</em> when it diverged or, having succeeded, ended without a finite loss, "
                  "within ",
                  absl::StrFormat("%g", schema::kPlateauMargin),
                  " nats of the data's unigram loss while no longer improving there (the plateau: it learnt no "
                  "more than which tokens are common) or above a boundary search's max_val_loss "
                  "(<code>proto/schema/failure.h</code>); <em>plateaued</em> counts the succeeded ones that "
                  "failed, the failure rate is (diverged + plateaued) / (succeeded + diverged). A run that ends "
                  "that close to the unigram loss while its validation loss still fell by ",
                  absl::StrFormat("%g", schema::kProgressMargin),
                  " nats or more over its last quarter is <em>not converged</em>: still learning when it "
                  "stopped, no failure, counted apart.</p>\n",
                  report::SummaryTable(summary, show_variant));
  if (variants.size() > 1) s += report::VariantsCompared(variants, data.analysis);
  for (const report::VariantView& v : variants) s += report::VariantSections(v);
  s += BoundaryReportSection(data.analysis);  // boundary_search sweeps only
  s += report::DepthTable(data);
  absl::StrAppend(&s, "<p class=\"meta\">Written by <code>normsweep report ", data.sweep.id(),
                  "</code>. Trials ", data.trials.size(), ", finished ", finished, ".</p>\n</body>\n</html>\n");
  return s;
}

absl::Status WriteReport(const std::string& dir, const std::string& html) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create the directory ", dir, ": ", ec.message()));
  if (!std::filesystem::is_directory(dir, ec)) {
    return absl::FailedPreconditionError(absl::StrCat("--out ", dir, " exists and is not a directory"));
  }
  const std::string path = (std::filesystem::path(dir) / "index.html").string();
  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  const bool written = std::fwrite(html.data(), 1, html.size(), f) == html.size();
  const int saved = errno;
  if (std::fclose(f) != 0 || !written) {
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(written ? errno : saved)));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int e = errno;
    std::remove(tmp.c_str());
    return absl::PermissionDeniedError(absl::StrCat("cannot write ", path, ": ", std::strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace normsweep::client
