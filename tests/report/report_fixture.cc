#include "tests/report/report_fixture.h"

#include <cmath>
#include <limits>

#include "gtest/gtest.h"

namespace normsweep::testing {
namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}  // namespace

v1::GetTrialResponse MakeTrial(const std::string& placement, int warmup, double lr, int seed, v1::TrialState state,
                               std::optional<double> loss, const std::string& variant, int layers,
                               double norm_scale) {
  static int next_id = 1;
  v1::GetTrialResponse r;
  v1::Trial& t = *r.mutable_trial();
  t.set_id(next_id);
  t.set_index(next_id++);
  t.set_variant(variant);
  t.set_state(state);
  v1::TrainConfig& c = *t.mutable_config();
  c.set_placement(placement);
  c.set_warmup_steps(warmup);
  c.set_lr(lr);
  c.set_seed(seed);
  c.set_layers(layers);
  if (loss) t.mutable_result()->set_final_val_loss(*loss);
  for (int step : {50, 100, 150}) {
    v1::MetricPoint& m = *r.add_metrics();
    m.set_step(step);
    m.set_train_loss(3.0);
    if (state == v1::TRIAL_DIVERGED && step == 150) {
      m.set_val_loss(kNaN);
    } else {
      m.set_val_loss(loss && std::isfinite(*loss) ? *loss + (150 - step) / 100.0 : 4.0);
    }
  }
  v1::LayerGradNorms& g = *r.add_layer_grad_norms();
  g.set_step(0);
  for (int l = 0; l < layers; ++l) {
    v1::LayerGradNorm* n = g.add_norms();
    n->set_layer(l);
    n->set_matrix("ffn.fc1");
    n->set_norm(norm_scale * (l + 1));
    n = g.add_norms();
    n->set_layer(l);
    n->set_matrix("ffn.fc2");
    n->set_norm(norm_scale * (l + 1) * 1.5);
  }
  return r;
}

v1::GridCell Cell(const std::string& placement, int warmup, double lr, int trials, int diverged,
                  std::optional<double> mean, int n_seeds) {
  v1::GridCell c;
  c.set_placement(placement);
  c.set_warmup_steps(warmup);
  c.set_peak_lr(lr);
  c.set_trials(trials);
  c.set_diverged(diverged);
  c.set_succeeded(trials - diverged);
  c.set_n_seeds(n_seeds);
  if (mean) c.set_mean_val_loss(*mean);
  return c;
}

v1::LrSensitivity Lrs(const std::string& placement, int warmup, int lrs, int at_l0, double best_lr, double best,
                      double l0, std::optional<double> lrs_value, int pending) {
  v1::LrSensitivity r;
  r.set_placement(placement);
  r.set_warmup_steps(warmup);
  r.set_lrs(lrs);
  r.set_points_at_l0(at_l0);
  r.set_best_lr(best_lr);
  r.set_best_val_loss(best);
  r.set_init_val_loss(l0);
  if (lrs_value) r.set_lr_sensitivity(*lrs_value);
  r.set_lrs_pending(pending);
  return r;
}

// Per-layer diagnostics at steps 0, 50, 100: layer l's max attention logit
// logit(l, step), its update ratios ratio(l, matrix, step) (none at step 0).
void AddDiagnostics(v1::GetTrialResponse& t, int layers, const std::function<double(int, int)>& logit,
                    const std::function<double(int, int, int)>& ratio) {
  for (int step : {0, 50, 100}) {
    v1::StepDiagnostics& d = *t.add_diagnostics();
    d.set_step(step);
    for (int l = 0; l < layers; ++l) {
      v1::LayerDiagnostics& ld = *d.add_layers();
      ld.set_layer(l);
      ld.set_max_attn_logit(logit(l, step));
      if (step == 0) continue;
      ld.set_update_ratio_qkv(ratio(l, 0, step));
      ld.set_update_ratio_proj(ratio(l, 1, step));
      ld.set_update_ratio_fc1(ratio(l, 2, step));
      ld.set_update_ratio_fc2(ratio(l, 3, step));
    }
  }
}

Figures LiteratureFigures() {
  Figures out;
  client::ReportData& d = out.data;
  d.sweep.set_id(7);
  d.sweep.set_name("wortsman");
  d.sweep.set_state(v1::SWEEP_COMPLETED);
  const v1::TrialState ok = v1::TRIAL_SUCCEEDED, div = v1::TRIAL_DIVERGED;
  for (const char* p : {"post", "pre"}) {
    const bool post = std::string(p) == "post";
    for (int warmup : {0, 100}) {
      for (double lr : {1e-4, 1e-3, 1e-2}) {
        for (int seed : {0, 1}) {
          bool diverges = post ? lr > 5e-3 || (warmup == 0 && lr > 5e-4 && seed == 1)
                               : lr > 5e-3 && seed == (warmup == 0 ? 0 : 1);
          const double loss = (post ? 3.0 : 2.2) - (lr > 5e-4 ? 0.1 : 0) - (warmup > 0 ? 0.05 : 0) + seed * 0.02;
          v1::GetTrialResponse t = MakeTrial(p, warmup, lr, seed, diverges ? div : ok,
                                             diverges ? std::nullopt : std::optional<double>(loss));
          if (diverges) t.mutable_trial()->mutable_result()->set_diverged_step(post ? 60 : warmup == 0 ? 50 : 20);
          t.mutable_trial()->mutable_result()->set_unigram_loss(kUnigramLoss);
          const int64_t id = t.trial().id();
          if (post && warmup == 100 && lr == 1e-3 && seed == 0) out.post_best = id;
          if (post && warmup == 0 && lr == 1e-2 && seed == 0) out.post_first_failure = id;
          if (!post && warmup == 0 && lr == 1e-3 && seed == 0) out.pre_best = id;
          if (!post && warmup == 100 && lr == 1e-2 && seed == 1) out.pre_first_failure = id;
          d.trials.push_back(std::move(t));
        }
      }
    }
  }
  v1::GetSweepAnalysisResponse& a = d.analysis;
  // The views' rows, as they would be for these trials (figures by hand).
  *a.add_cells() = Cell("post", 0, 1e-4, 2, 0, 3.01, 2);
  *a.add_cells() = Cell("post", 0, 1e-3, 2, 1, 2.90, 1);
  *a.add_cells() = Cell("post", 0, 1e-2, 2, 2, std::nullopt, 0);
  *a.add_cells() = Cell("post", 100, 1e-4, 2, 0, 2.96, 2);
  *a.add_cells() = Cell("post", 100, 1e-3, 2, 0, 2.86, 2);
  *a.add_cells() = Cell("post", 100, 1e-2, 2, 2, std::nullopt, 0);
  *a.add_cells() = Cell("pre", 0, 1e-4, 2, 0, 2.21, 2);
  *a.add_cells() = Cell("pre", 0, 1e-3, 2, 0, 2.11, 2);
  *a.add_cells() = Cell("pre", 0, 1e-2, 2, 1, 2.12, 1);
  *a.add_cells() = Cell("pre", 100, 1e-4, 2, 0, 2.16, 2);
  *a.add_cells() = Cell("pre", 100, 1e-3, 2, 0, 2.06 + 0.1, 2);
  *a.add_cells() = Cell("pre", 100, 1e-2, 2, 1, 2.05 + 0.1, 1);
  *a.add_lr_sensitivity() = Lrs("post", 0, 3, 3, 1e-3, 2.95, 5.8, 1.2);
  *a.add_lr_sensitivity() = Lrs("post", 100, 3, 2, 1e-3, 2.86, 5.8, 1.0);
  *a.add_lr_sensitivity() = Lrs("pre", 0, 3, 1, 1e-3, 2.11, 5.7, 0.4);
  *a.add_lr_sensitivity() = Lrs("pre", 100, 3, 1, 1e-4, 2.16, 5.7, 0.3);
  v1::PlacementLrSensitivity& sp = *a.add_lr_sensitivity_summary();
  sp.set_placement("post");
  sp.set_warmups(2);
  sp.set_mean_lr_sensitivity(1.1);
  sp.set_min_lr_sensitivity(1.0);
  sp.set_max_lr_sensitivity(1.2);
  sp.set_warmup_of_min(100);
  sp.set_best_val_loss(2.86);
  v1::VarianceShares& vp = *a.add_importance();
  vp.set_placement("post");
  vp.set_warmups(2);
  vp.set_lrs(3);
  vp.set_trials(12);
  vp.set_total_variance(1.5);
  vp.set_share_warmup(0.1);
  vp.set_share_lr(0.6);
  vp.set_share_interaction(0.25);
  vp.set_share_seed(0.05);
  v1::VarianceShares& vr = *a.add_importance();
  vr.set_placement("pre");
  vr.set_warmups(2);
  vr.set_lrs(3);
  vr.set_trials(12);
  vr.set_note("a cell with <one seed> & no spread");
  for (v1::GetTrialResponse& t : d.trials) {
    const int64_t id = t.trial().id();
    if (id == out.post_best) {
      // Layer 1's logits are the largest; layer 0's fc2 moves the most.
      AddDiagnostics(t, 2, [](int l, int step) { return 2.0 + l + step / 100.0; },
                     [](int l, int m, int step) { return (l == 0 && m == 3 ? 0.02 : 0.01) * 100.0 / step; });
    } else if (id == out.post_first_failure) {
      // The logits of layer 0 blow up (5 -> 50 -> 500): a log scale; one NaN ratio.
      AddDiagnostics(t, 2, [](int l, int step) { return (l == 0 ? 5.0 : 4.0) * std::pow(10, step / 50.0); },
                     [](int l, int m, int step) { return l == 1 && m == 0 && step == 100 ? kNaN : 0.01 * (m + 1); });
    } else if (id == out.pre_best) {
      AddDiagnostics(t, 2, [](int l, int step) { return 1.0 + 0.5 * l + step / 200.0; },
                     [](int, int m, int) { return 0.002 * (m + 1); });
    } else if (id == out.pre_first_failure) {
      AddDiagnostics(t, 2, [](int l, int step) { return 1.0 + 0.5 * l + step / 20.0; },
                     [](int, int m, int step) { return 0.003 * (m + 1) * step / 50.0; });
    } else {
      // Diagnostics of trials that are not drawn stay off the page.
      AddDiagnostics(t, 2, [](int, int) { return 777.0; }, [](int, int, int) { return 0.777; });
    }
    for (v1::MetricPoint& m : *t.mutable_metrics()) {
      m.set_output_log_z(id == out.post_first_failure ? 5.0 + m.step() / 10.0 : 5.5 - m.step() / 300.0);
    }
  }
  return out;
}

int64_t AddPlateau(Figures& fig) {
  v1::GetTrialResponse t = MakeTrial("post", 0, 3e-3, 0, v1::TRIAL_SUCCEEDED, 3.43);
  t.mutable_trial()->mutable_result()->set_unigram_loss(kUnigramLoss);
  // Stalled: the logits and updates stay small, log Z flat.
  AddDiagnostics(t, 2, [](int l, int) { return 1.5 + 0.1 * l; }, [](int, int m, int) { return 0.001 * (m + 1); });
  for (v1::MetricPoint& m : *t.mutable_metrics()) m.set_output_log_z(5.55);
  const int64_t id = t.trial().id();
  fig.data.trials.push_back(std::move(t));
  v1::GridCell c = Cell("post", 0, 3e-3, 1, 0, 3.43, 1);
  c.set_plateaued(1);
  c.set_divergence_rate(0);
  c.set_failure_rate(1);
  *fig.data.analysis.add_cells() = c;
  return id;
}

int64_t AddNotConverged(Figures& fig) {
  const int64_t id = AddPlateau(fig);
  fig.data.trials.back().mutable_trial()->mutable_result()->set_val_loss_progress(0.2);
  v1::GridCell& c = *fig.data.analysis.mutable_cells(fig.data.analysis.cells_size() - 1);
  c.set_plateaued(0);
  c.set_not_converged(1);
  c.set_failure_rate(0);
  return id;
}

void SetCloseLStar(Figures& fig) {
  for (v1::LrSensitivity& r : *fig.data.analysis.mutable_lr_sensitivity()) {
    if (r.warmup_steps() != 100) continue;
    const bool post = r.placement() == "post";
    r.set_best_val_loss(post ? 2.312 : 2.238);
    r.set_lr_sensitivity(post ? 1.0 : 1.1);
  }
}

void SetCrowdedLrSensitivity(Figures& fig) {
  auto& rows = *fig.data.analysis.mutable_lr_sensitivity();
  rows.Clear();
  for (const char* p : {"post", "pre"}) {
    const bool post = std::string(p) == "post";
    for (int i = 0; i < 12; ++i) {
      double lrs = 0.8 + (post ? 0.05 : -0.05) * (i % 2 == 0 ? 1 : -1);
      if (post && i == 0) lrs = 1.2;
      if (!post && i == 11) lrs = 0;
      *rows.Add() = Lrs(p, 50 * i, 3, 1, 1e-3, (post ? 2.9 : 2.2) + 0.011 * i, 5.8, lrs);
    }
  }
}

void ShrinkAxisValues(Figures& fig) {
  for (v1::GetTrialResponse& t : fig.data.trials) {
    for (v1::LayerGradNorms& g : *t.mutable_layer_grad_norms()) {
      for (v1::LayerGradNorm& n : *g.mutable_norms()) n.set_norm(n.norm() * 1e-4);
    }
    for (v1::StepDiagnostics& d : *t.mutable_diagnostics()) {
      if (d.step() == 0) continue;  // no update yet
      const double ratio = 1e-6 * std::pow(100, d.step() / 50.0);  // 1e-4, 1e-2: a log scale
      for (v1::LayerDiagnostics& l : *d.mutable_layers()) {
        l.set_update_ratio_qkv(ratio);
        l.set_update_ratio_proj(ratio);
        l.set_update_ratio_fc1(ratio);
        l.set_update_ratio_fc2(1.2 * ratio);
      }
    }
  }
  for (v1::LrSensitivity& r : *fig.data.analysis.mutable_lr_sensitivity()) {
    r.set_lr_sensitivity(r.lr_sensitivity() * 0.001);
  }
}

void LengthenTexts(Figures& fig) {
  v1::GetSweepAnalysisResponse& a = fig.data.analysis;
  for (v1::VarianceShares& r : *a.mutable_importance()) {
    if (r.placement() == "pre") {
      r.set_note("incomplete grid: 5 of 6 cells counted (the others have unfinished trials, only failed or "
                 "cancelled ones, or a diverged seed without l0)");
    }
  }
  for (v1::GridCell& c : *a.mutable_cells()) {
    if (c.placement() == "pre" && c.warmup_steps() == 100 && c.peak_lr() > 5e-4) {
      c = Cell("pre", 100, c.peak_lr(), 12, 3, c.mean_val_loss(), 7);
      c.set_std_val_loss(0.123);
      c.set_plateaued(2);
    }
  }
}

void AddBoundaryLines(Figures& fig) {
  int line = 0;
  for (const char* variant : {"qk_norm=a", "qk_norm=b", "qk_norm=c"}) {
    for (const char* placement : {"post", "pre", "peri", "deepnorm", "mix"}) {
      for (int warmup : {0, 100, 400}) {
        v1::BoundaryLine& l = *fig.data.analysis.add_boundary();
        l.set_line(++line);
        l.set_variant(variant);
        l.set_placement(placement);
        l.set_warmup_steps(warmup);
        l.set_state("FOUND");
        l.set_max_trainable_lr(1e-3 * (1 + line % 7) * (1 + warmup / 100.0));
        l.set_min_untrainable_lr(1.3 * l.max_trainable_lr());
        l.set_trials(6);
        l.set_finished(6);
      }
    }
  }
}

namespace {

v1::VariantComparison Comparison(const std::string& placement, const std::string& variant, int trials, double lrs,
                                 double best, double best_lr, int best_warmup, double failure_rate,
                                 const v1::VariantComparison* baseline) {
  v1::VariantComparison r;
  r.set_placement(placement);
  r.set_variant(variant);
  r.set_baseline_variant(baseline != nullptr ? baseline->variant() : variant);
  r.set_trials(trials);
  r.set_mean_lr_sensitivity(lrs);
  r.set_best_val_loss(best);
  r.set_best_lr(best_lr);
  r.set_best_warmup_steps(best_warmup);
  r.set_failure_rate(failure_rate);
  const v1::VariantComparison& b = baseline != nullptr ? *baseline : r;
  r.set_delta_mean_lr_sensitivity(lrs - b.mean_lr_sensitivity());
  r.set_delta_best_val_loss(best - b.best_val_loss());
  r.set_best_lr_ratio(best_lr / b.best_lr());
  r.set_delta_failure_rate(failure_rate - b.failure_rate());
  return r;
}

}  // namespace

Figures VariantsFigures() {
  Figures off = LiteratureFigures();
  Figures on = LiteratureFigures();  // later trial indices (MakeTrial counts): the second variant
  auto name = [](Figures& fig, const std::string& variant) {
    client::ReportData& d = fig.data;
    for (v1::GetTrialResponse& t : d.trials) t.mutable_trial()->set_variant(variant);
    for (v1::GridCell& c : *d.analysis.mutable_cells()) c.set_variant(variant);
    for (v1::LrSensitivity& r : *d.analysis.mutable_lr_sensitivity()) r.set_variant(variant);
    for (v1::PlacementLrSensitivity& r : *d.analysis.mutable_lr_sensitivity_summary()) r.set_variant(variant);
    for (v1::VarianceShares& r : *d.analysis.mutable_importance()) r.set_variant(variant);
  };
  name(off, "qk_norm=false");
  name(on, "qk_norm=true");
  v1::GetSweepAnalysisResponse& a = on.data.analysis;
  for (v1::GridCell& c : *a.mutable_cells()) {
    if (c.placement() == "pre" && c.peak_lr() > 5e-3) {
      c = Cell("pre", c.warmup_steps(), c.peak_lr(), 2, 0, c.warmup_steps() == 0 ? 2.06 : 2.10, 2);
      c.set_variant("qk_norm=true");
    }
    if (c.has_mean_val_loss()) c.set_mean_val_loss(c.mean_val_loss() - 0.05);
  }
  for (v1::LrSensitivity& r : *a.mutable_lr_sensitivity()) {
    const bool post = r.placement() == "post", warm = r.warmup_steps() > 0;
    r.set_lr_sensitivity(post ? (warm ? 0.7 : 0.9) : (warm ? 0.2 : 0.3));
    r.set_best_val_loss(post ? (warm ? 2.81 : 2.85) : (warm ? 2.05 : 2.01));
    r.set_best_lr(post ? 1e-3 : 1e-2);
  }
  Figures out = std::move(off);
  client::ReportData& d = out.data;
  for (v1::GetTrialResponse& t : on.data.trials) d.trials.push_back(std::move(t));
  d.analysis.mutable_cells()->MergeFrom(a.cells());
  d.analysis.mutable_lr_sensitivity()->MergeFrom(a.lr_sensitivity());
  d.analysis.mutable_lr_sensitivity_summary()->MergeFrom(a.lr_sensitivity_summary());
  d.analysis.mutable_importance()->MergeFrom(a.importance());
  const v1::VariantComparison post = Comparison("post", "qk_norm=false", 12, 1.1, 2.86, 1e-3, 100, 0.5, nullptr);
  const v1::VariantComparison pre = Comparison("pre", "qk_norm=false", 12, 0.35, 2.11, 1e-3, 0, 1.0 / 6, nullptr);
  *d.analysis.add_variants() = post;
  *d.analysis.add_variants() = Comparison("post", "qk_norm=true", 12, 0.8, 2.81, 1e-3, 100, 1.0 / 3, &post);
  *d.analysis.add_variants() = pre;
  *d.analysis.add_variants() = Comparison("pre", "qk_norm=true", 12, 0.25, 2.01, 1e-2, 0, 0, &pre);
  return out;
}

std::string Section(const std::string& html, const std::string& heading) {
  const size_t start = html.find("<h2>" + heading);
  EXPECT_NE(start, std::string::npos) << heading;
  if (start == std::string::npos) return "";
  const size_t end = html.find("<h2>", start + 1);
  return html.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace normsweep::testing
