#include "client/report/variant_view.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <utility>

#include "client/trial_failure.h"

namespace normsweep::client::report {

std::vector<VariantView> Variants(const ReportData& data) {
  std::map<std::string, VariantView> by_variant;
  std::map<std::string, int32_t> first_index;  // by variant: its lowest trial index
  for (const v1::GetTrialResponse& t : data.trials) {
    VariantView& v = by_variant[t.trial().variant()];
    v.variant = t.trial().variant();
    v.trials[t.trial().config().placement()].push_back(&t);
    auto [it, added] = first_index.try_emplace(v.variant, t.trial().index());
    if (!added) it->second = std::min(it->second, t.trial().index());
  }
  for (const ResultCell& c : CellsFromAnalysis(data.analysis)) {
    auto it = by_variant.find(c.variant);
    if (it != by_variant.end()) it->second.cells.push_back(c);
  }
  for (const v1::LrSensitivity& r : data.analysis.lr_sensitivity()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.lr_sensitivity.push_back(&r);
  }
  for (const v1::PlacementLrSensitivity& r : data.analysis.lr_sensitivity_summary()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.lr_summary.push_back(&r);
  }
  for (const v1::VarianceShares& r : data.analysis.importance()) {
    auto it = by_variant.find(r.variant());
    if (it != by_variant.end()) it->second.importance.push_back(&r);
  }
  std::vector<VariantView> out;
  for (auto& [name, v] : by_variant) out.push_back(std::move(v));
  std::stable_sort(out.begin(), out.end(), [&](const VariantView& a, const VariantView& b) {
    return first_index.at(a.variant) < first_index.at(b.variant);
  });
  double lo = INFINITY, hi = -INFINITY;  // the colour scale over every variant's cells
  for (VariantView& v : out) {
    v.index = static_cast<int>(&v - out.data());
    v.max_val_loss = FailureMaxValLoss(data.sweep.spec());
    for (const auto& [placement, unused] : v.trials) v.placements.push_back(placement);
    v.placements = PlacementOrder(std::move(v.placements));
    std::set<int> warmups;
    std::set<double> lrs;
    for (const ResultCell& c : v.cells) {
      warmups.insert(c.warmup_steps);
      lrs.insert(c.peak_lr);
      if (c.seeds_with_loss == 0) continue;
      v.best_cell = std::min(v.best_cell.value_or(INFINITY), c.mean_final_val_loss);
      lo = std::min(lo, c.mean_final_val_loss);
      hi = std::max(hi, c.mean_final_val_loss);
    }
    v.warmups.assign(warmups.begin(), warmups.end());
    v.lrs.assign(lrs.begin(), lrs.end());
  }
  if (std::isfinite(lo)) {
    for (VariantView& v : out) v.scale = {lo, hi};
  }
  return out;
}

LayerNorms Step0Norms(const std::vector<const v1::GetTrialResponse*>& trials) {
  std::map<int, std::map<int, std::array<Mean, 2>>> per_seed;  // seed -> layer -> {w1, w2}
  for (const v1::GetTrialResponse* t : trials) {
    for (const v1::LayerGradNorms& g : t->layer_grad_norms()) {
      if (g.step() != 0) continue;
      for (const v1::LayerGradNorm& n : g.norms()) {
        if (!std::isfinite(n.norm())) continue;
        const int m = n.matrix() == "ffn.fc1" ? 0 : n.matrix() == "ffn.fc2" ? 1 : -1;
        if (m >= 0) per_seed[t->trial().config().seed()][n.layer()][m].Add(n.norm());
      }
    }
  }
  std::map<int, std::array<Mean, 2>> over_seeds;
  for (const auto& [seed, layers] : per_seed) {
    for (const auto& [layer, m] : layers) {
      for (int k = 0; k < 2; ++k) {
        if (m[k].n > 0) over_seeds[layer][k].Add(m[k].value());
      }
    }
  }
  LayerNorms out;
  out.seeds = static_cast<int>(per_seed.size());
  for (const auto& [layer, m] : over_seeds) {
    if (m[0].n > 0) out.w1[layer] = m[0].value();
    if (m[1].n > 0) out.w2[layer] = m[1].value();
  }
  return out;
}

const v1::LrSensitivity* LrsRow(const VariantView& v, const std::string& placement, int warmup) {
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (r->placement() == placement && r->warmup_steps() == warmup) return r;
  }
  return nullptr;
}

int PlateauedWithLoss(const ResultCell& c) {
  return std::max(0, c.plateaued - std::max(0, c.succeeded - c.seeds_with_loss));
}

std::optional<double> PlacementL0(const VariantView& v, const std::string& placement) {
  Mean m;
  for (const v1::LrSensitivity* r : v.lr_sensitivity) {
    if (r->placement() == placement && Finite(r->has_init_val_loss(), r->init_val_loss())) m.Add(r->init_val_loss());
  }
  return m.n > 0 ? std::optional<double>(m.value()) : std::nullopt;
}

}  // namespace normsweep::client::report
