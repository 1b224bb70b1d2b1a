#include "client/results.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/export_writer.h"
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

// An optional proto field: its value, or what stands for none.
template <typename T>
std::optional<double> Opt(bool has, T v) {
  return has ? std::optional<double>(static_cast<double>(v)) : std::nullopt;
}
std::optional<int64_t> OptInt(bool has, int64_t v) { return has ? std::optional<int64_t>(v) : std::nullopt; }
std::string Fixed(std::optional<double> v, const char* none = "-") {
  return v ? absl::StrFormat("%.3f", *v) : none;
}
std::string Percent(std::optional<double> v) { return v ? absl::StrFormat("%.1f%%", 100 * *v) : "-"; }

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
                  Percent(v.share_interaction()), ", seeds ",
                  HasSeedShare(v) ? Percent(v.share_seed()) : "n/a (one seed per cell)",
                  absl::StrFormat(" (total variance %.4g, %d trials)", v.total_variance(), v.trials()));
  if (!v.note().empty()) absl::StrAppend(&out, "; ", v.note());
  return out + "\n";
}

// The analysis rows of each (placement, variant), looked up by group.
struct GroupRows {
  std::vector<const v1::LrSensitivity*> lines;  // by warm-up
  const v1::PlacementLrSensitivity* summary = nullptr;
  const v1::VarianceShares* shares = nullptr;
  const v1::VariantComparison* comparison = nullptr;
};

std::map<Group, GroupRows> RowsByGroup(const v1::GetSweepAnalysisResponse& a) {
  std::map<Group, GroupRows> out;
  for (const auto& l : a.lr_sensitivity()) out[{l.placement(), l.variant()}].lines.push_back(&l);
  for (const auto& p : a.lr_sensitivity_summary()) out[{p.placement(), p.variant()}].summary = &p;
  for (const auto& v : a.importance()) out[{v.placement(), v.variant()}].shares = &v;
  for (const auto& v : a.variants()) out[{v.placement(), v.variant()}].comparison = &v;
  return out;
}

// A difference from the baseline ("+0.125", "+12.5 pp" for a rate) or a
// ratio to it ("×0.1"); "-" without one.
std::string Delta(std::optional<double> v) { return v ? absl::StrFormat("%+.3f", *v) : "-"; }
std::string DeltaPoints(std::optional<double> v) { return v ? absl::StrFormat("%+.1f pp", 100 * *v) : "-"; }
std::string Ratio(std::optional<double> v) { return v ? absl::StrFormat("×%.3g", *v) : "-"; }
std::string LrText(std::optional<double> lr) { return lr ? FormatLr(*lr) : "-"; }

std::vector<std::string> ComparisonRow(const v1::VariantComparison& v, bool boundary) {
  std::vector<std::string> row = {
      v.variant(), std::to_string(v.trials()), Fixed(Opt(v.has_mean_lr_sensitivity(), v.mean_lr_sensitivity())),
      Delta(Opt(v.has_delta_mean_lr_sensitivity(), v.delta_mean_lr_sensitivity())),
      Fixed(Opt(v.has_best_val_loss(), v.best_val_loss())),
      Delta(Opt(v.has_delta_best_val_loss(), v.delta_best_val_loss())), LrText(Opt(v.has_best_lr(), v.best_lr())),
      Ratio(Opt(v.has_best_lr_ratio(), v.best_lr_ratio())),
      v.has_best_warmup_steps() ? std::to_string(v.best_warmup_steps()) : "-",
      Percent(Opt(v.has_failure_rate(), v.failure_rate())),
      DeltaPoints(Opt(v.has_delta_failure_rate(), v.delta_failure_rate()))};
  if (boundary) {
    row.push_back(LrText(Opt(v.has_max_trainable_lr(), v.max_trainable_lr())));
    row.push_back(Ratio(Opt(v.has_max_trainable_lr_ratio(), v.max_trainable_lr_ratio())));
    row.push_back(std::to_string(v.boundary_lines()));
  }
  return row;
}

// Per placement with more than one variant: its variants in the sweep's
// order (GetSweepAnalysis's), each beside the first, the baseline; the
// largest trainable lr only in a boundary search.
std::string VariantComparisonTables(const v1::GetSweepAnalysisResponse& a) {
  std::map<std::string, std::vector<const v1::VariantComparison*>> by_placement;
  bool boundary = false;
  for (const v1::VariantComparison& v : a.variants()) {
    by_placement[v.placement()].push_back(&v);
    boundary |= v.boundary_lines() > 0;
  }
  std::vector<std::string> placements;
  for (const auto& [placement, rows] : by_placement) {
    if (rows.size() > 1) placements.push_back(placement);
  }
  if (placements.empty()) return "";
  std::string out = absl::StrCat(
      "\nVariants compared, each beside the placement's first variant (its baseline; Δ: the variant minus the "
      "baseline, ×: the variant's lr over the baseline's). LRS: the mean over warm-ups; l*: the best line's, at that "
      "line's best lr and warm-up; failed: (diverged + plateaued) / finished seeds",
      boundary ? "; max trainable lr: the median over the variant's lines that found one" : "", "\n");
  for (const std::string& placement : PlacementOrder(placements)) {
    const std::vector<const v1::VariantComparison*>& rows = by_placement[placement];
    absl::StrAppend(&out, "\n", PlacementTitle(placement), ", baseline ", rows.front()->baseline_variant(), "\n");
    std::vector<std::vector<std::string>> table = {{"variant", "trials", "LRS", "ΔLRS", "l*", "Δl*", "best lr",
                                                    "×best lr", "warm-up", "failed", "Δfailed"}};
    if (boundary) {
      for (const char* h : {"max trainable lr", "×max lr", "lines"}) table[0].push_back(h);
    }
    for (const v1::VariantComparison* v : rows) table.push_back(ComparisonRow(*v, boundary));
    out += Columns(table);
  }
  return out;
}

// Columns of an export chunk (the `normsweep export` writer's input), one
// per call, each from a function of a row's message. A row whose message is
// null (a cell without its line's row, say) has every such column absent,
// and so has a value that the function gives as nullopt.
template <typename M>
class ChunkColumns {
 public:
  ChunkColumns(std::vector<const M*> rows, v1::ExportChunk& chunk) : rows_(std::move(rows)), chunk_(chunk) {
    chunk_.set_rows(static_cast<int32_t>(rows_.size()));
  }

  template <typename F>  // F(const M&) -> double or std::optional<double>
  ChunkColumns& Real(const std::string& name, F value) {
    v1::ExportColumn& c = Add(name, v1::EXPORT_COLUMN_DOUBLE);
    for (const M* m : rows_) {
      std::optional<double> v;
      if (m != nullptr) v = value(*m);
      c.add_doubles(v.value_or(0));
      c.add_absent(!v.has_value());
    }
    return *this;
  }
  template <typename F>  // F(const M&) -> an integer or std::optional<int64_t>
  ChunkColumns& Int(const std::string& name, F value) {
    v1::ExportColumn& c = Add(name, v1::EXPORT_COLUMN_INT64);
    for (const M* m : rows_) {
      std::optional<int64_t> v;
      if (m != nullptr) v = value(*m);
      c.add_ints(v.value_or(0));
      c.add_absent(!v.has_value());
    }
    return *this;
  }
  template <typename F>  // F(const M&) -> std::string
  ChunkColumns& Text(const std::string& name, F value) {
    v1::ExportColumn& c = Add(name, v1::EXPORT_COLUMN_STRING);
    for (const M* m : rows_) {
      c.add_strings(m != nullptr ? value(*m) : "");
      c.add_absent(m == nullptr);
    }
    return *this;
  }
  template <typename F>  // F(const M&) -> bool
  ChunkColumns& Flag(const std::string& name, F value) {
    v1::ExportColumn& c = Add(name, v1::EXPORT_COLUMN_BOOL);
    for (const M* m : rows_) {
      c.add_ints(m != nullptr && value(*m) ? 1 : 0);
      c.add_absent(m == nullptr);
    }
    return *this;
  }

 private:
  v1::ExportColumn& Add(const std::string& name, v1::ExportColumnType type) {
    v1::ExportColumn& c = *chunk_.add_columns();
    c.set_name(name);
    c.set_type(type);
    return c;
  }

  const std::vector<const M*> rows_;
  v1::ExportChunk& chunk_;
};

template <typename M>
std::vector<const M*> Pointers(const google::protobuf::RepeatedPtrField<M>& rows) {
  std::vector<const M*> out;
  for (const M& m : rows) out.push_back(&m);
  return out;
}
std::vector<const ResultCell*> Pointers(const std::vector<ResultCell>& cells) {
  std::vector<const ResultCell*> out;
  for (const ResultCell& c : cells) out.push_back(&c);
  return out;
}

// The chunk as `normsweep export` writes it: CSV with its header, or a JSON
// array of the rows' objects. Every column has a value per row by
// construction (ChunkColumns), which is all the writer checks.
std::string Written(const v1::ExportChunk& chunk, ExportFormat format) {
  std::string text;
  ExportWriter writer(format);
  if (absl::Status s = writer.Append(chunk, &text); !s.ok()) return absl::StrCat("results: ", s.message(), "\n");
  if (format == ExportFormat::kCsv) return text;
  return absl::StrCat("[", absl::StrJoin(absl::StrSplit(text, '\n', absl::SkipEmpty()), ","), "]");
}

// A cell's loss figures: the mean and minimum over its seeds with a loss,
// the std over two or more (one seed has none).
std::optional<double> MeanLoss(const ResultCell& c) {
  return Opt(c.seeds_with_loss > 0, c.mean_final_val_loss);
}
std::optional<double> StdLoss(const ResultCell& c) { return Opt(c.seeds_with_loss > 1, c.std_final_val_loss); }
std::optional<double> MinLoss(const ResultCell& c) { return Opt(c.seeds_with_loss > 0, c.best_final_val_loss); }

// The names of a cell's loss columns before issue 37, kept at the end of
// the row (CSV) or object (JSON) for one release, deprecated.
void DeprecatedLossColumns(ChunkColumns<ResultCell>& cells) {
  cells.Real("mean_final_val_loss", MeanLoss).Real("std_final_val_loss", StdLoss).Real("best_final_val_loss", MinLoss);
}

// placement and variant, the key of every row of the analysis.
template <typename M>
ChunkColumns<M>& GroupColumns(ChunkColumns<M>& rows) {
  return rows.Text("placement", [](const M& m) { return m.placement(); })
      .Text("variant", [](const M& m) { return m.variant(); });
}

// The columns that CSV and JSON share, named after the fields of the
// analysis' messages (CSV prefixes those repeated on each cell's row).

// A cell's figures; its loss columns as the views name them.
void CellColumns(ChunkColumns<ResultCell>& cells) {
  cells.Text("placement", [](const ResultCell& c) { return c.placement; })
      .Text("variant", [](const ResultCell& c) { return c.variant; })
      .Int("warmup_steps", [](const ResultCell& c) { return c.warmup_steps; })
      .Real("peak_lr", [](const ResultCell& c) { return c.peak_lr; })
      .Int("trials", [](const ResultCell& c) { return c.trials; })
      .Int("succeeded", [](const ResultCell& c) { return c.succeeded; })
      .Int("diverged", [](const ResultCell& c) { return c.diverged; })
      .Int("plateaued", [](const ResultCell& c) { return c.plateaued; })
      .Int("failed", [](const ResultCell& c) { return c.failed; })
      .Int("cancelled", [](const ResultCell& c) { return c.cancelled; })
      .Int("unfinished", [](const ResultCell& c) { return c.unfinished; })
      .Real("divergence_rate", [](const ResultCell& c) { return c.divergence_rate; })
      .Real("failure_rate", [](const ResultCell& c) { return c.failure_rate; })
      .Real("mean_val_loss", MeanLoss)
      .Real("std_val_loss", StdLoss)
      .Real("min_val_loss", MinLoss);
}

void LineColumns(ChunkColumns<v1::LrSensitivity>& lines, const std::string& prefix) {
  lines.Int(prefix + "lrs", [](const auto& l) { return l.lrs(); })
      .Real(prefix + "init_val_loss", [](const auto& l) { return Opt(l.has_init_val_loss(), l.init_val_loss()); })
      .Real(prefix + "best_val_loss", [](const auto& l) { return Opt(l.has_best_val_loss(), l.best_val_loss()); })
      .Real(prefix + "best_lr", [](const auto& l) { return Opt(l.has_best_lr(), l.best_lr()); })
      .Real(prefix + "lr_sensitivity", [](const auto& l) { return Opt(l.has_lr_sensitivity(), l.lr_sensitivity()); })
      .Int(prefix + "points_at_l0", [](const auto& l) { return l.points_at_l0(); })
      .Int(prefix + "lrs_pending", [](const auto& l) { return l.lrs_pending(); });
}

void SummaryColumns(ChunkColumns<v1::PlacementLrSensitivity>& summaries, const std::string& prefix) {
  summaries.Int(prefix + "warmups", [](const auto& p) { return p.warmups(); })
      .Real(prefix + "mean_lr_sensitivity",
            [](const auto& p) { return Opt(p.has_mean_lr_sensitivity(), p.mean_lr_sensitivity()); })
      .Real(prefix + "min_lr_sensitivity",
            [](const auto& p) { return Opt(p.has_min_lr_sensitivity(), p.min_lr_sensitivity()); })
      .Real(prefix + "max_lr_sensitivity",
            [](const auto& p) { return Opt(p.has_max_lr_sensitivity(), p.max_lr_sensitivity()); })
      .Int(prefix + "warmup_of_min", [](const auto& p) { return OptInt(p.has_warmup_of_min(), p.warmup_of_min()); })
      .Real(prefix + "best_val_loss", [](const auto& p) { return Opt(p.has_best_val_loss(), p.best_val_loss()); });
}

// The seeds' share is absent where it says nothing (HasSeedShare).
void ShareColumns(ChunkColumns<v1::VarianceShares>& shares) {
  shares.Real("share_warmup", [](const auto& v) { return Opt(v.has_share_warmup(), v.share_warmup()); })
      .Real("share_lr", [](const auto& v) { return Opt(v.has_share_lr(), v.share_lr()); })
      .Real("share_interaction", [](const auto& v) { return Opt(v.has_share_interaction(), v.share_interaction()); })
      .Real("share_seed", [](const auto& v) { return Opt(v.has_share_seed() && HasSeedShare(v), v.share_seed()); });
}

// A variant beside its placement's baseline: VariantComparison's fields
// after placement and variant.
void ComparisonColumns(ChunkColumns<v1::VariantComparison>& variants, const std::string& prefix) {
  variants.Text(prefix + "baseline_variant", [](const auto& v) { return v.baseline_variant(); })
      .Int(prefix + "trials", [](const auto& v) { return v.trials(); })
      .Real(prefix + "mean_lr_sensitivity",
            [](const auto& v) { return Opt(v.has_mean_lr_sensitivity(), v.mean_lr_sensitivity()); })
      .Real(prefix + "best_val_loss", [](const auto& v) { return Opt(v.has_best_val_loss(), v.best_val_loss()); })
      .Real(prefix + "best_lr", [](const auto& v) { return Opt(v.has_best_lr(), v.best_lr()); })
      .Int(prefix + "best_warmup_steps",
           [](const auto& v) { return OptInt(v.has_best_warmup_steps(), v.best_warmup_steps()); })
      .Real(prefix + "failure_rate", [](const auto& v) { return Opt(v.has_failure_rate(), v.failure_rate()); })
      .Real(prefix + "max_trainable_lr",
            [](const auto& v) { return Opt(v.has_max_trainable_lr(), v.max_trainable_lr()); })
      .Int(prefix + "boundary_lines", [](const auto& v) { return v.boundary_lines(); })
      .Real(prefix + "delta_mean_lr_sensitivity",
            [](const auto& v) { return Opt(v.has_delta_mean_lr_sensitivity(), v.delta_mean_lr_sensitivity()); })
      .Real(prefix + "delta_best_val_loss",
            [](const auto& v) { return Opt(v.has_delta_best_val_loss(), v.delta_best_val_loss()); })
      .Real(prefix + "best_lr_ratio", [](const auto& v) { return Opt(v.has_best_lr_ratio(), v.best_lr_ratio()); })
      .Real(prefix + "delta_failure_rate",
            [](const auto& v) { return Opt(v.has_delta_failure_rate(), v.delta_failure_rate()); })
      .Real(prefix + "max_trainable_lr_ratio",
            [](const auto& v) { return Opt(v.has_max_trainable_lr_ratio(), v.max_trainable_lr_ratio()); });
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

bool HasSeedShare(const v1::VarianceShares& shares) {
  // The shares are set only on a complete grid (every one of its warmups x
  // lrs cells counted), so trials (the seeds counted) exceed the cells
  // exactly when some cell has a second seed.
  return shares.trials() > shares.warmups() * shares.lrs();
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
      absl::StrAppend(&out, "\n", LrSensitivityTable(g.lines));
    }
    if (g.summary != nullptr) out += SummaryLine(*g.summary);
    if (g.shares != nullptr) out += SharesLine(*g.shares);
  }
  return out + VariantComparisonTables(analysis);
}

std::string RenderResultsCsv(const v1::GetSweepAnalysisResponse& analysis) {
  // Each cell's row carries its line's LR sensitivity (line_*), its
  // placement's summary over warm-ups (summary_*), variance shares
  // (share_*, importance_note) and its variant beside the baseline
  // (comparison_*), repeated on the rows they belong to. New columns go
  // last: readers may read by position.
  const std::vector<ResultCell> cells = CellsFromAnalysis(analysis);
  const std::map<Group, GroupRows> rows_by_group = RowsByGroup(analysis);
  std::vector<const v1::LrSensitivity*> lines;
  std::vector<const v1::PlacementLrSensitivity*> summaries;
  std::vector<const v1::VarianceShares*> shares;
  std::vector<const v1::VariantComparison*> comparisons;
  for (const ResultCell& c : cells) {
    auto it = rows_by_group.find({c.placement, c.variant});
    const GroupRows* g = it == rows_by_group.end() ? nullptr : &it->second;
    const v1::LrSensitivity* line = nullptr;
    for (const v1::LrSensitivity* l : g ? g->lines : std::vector<const v1::LrSensitivity*>()) {
      if (l->warmup_steps() == c.warmup_steps) line = l;
    }
    lines.push_back(line);
    summaries.push_back(g ? g->summary : nullptr);
    shares.push_back(g ? g->shares : nullptr);
    comparisons.push_back(g ? g->comparison : nullptr);
  }
  v1::ExportChunk chunk;
  ChunkColumns<ResultCell> cell(Pointers(cells), chunk);
  CellColumns(cell);
  ChunkColumns<v1::LrSensitivity> line(lines, chunk);
  LineColumns(line, "line_");
  ChunkColumns<v1::PlacementLrSensitivity> summary(summaries, chunk);
  SummaryColumns(summary, "summary_");
  ChunkColumns<v1::VarianceShares> share(shares, chunk);
  ShareColumns(share);
  share.Text("importance_note", [](const auto& v) { return v.note(); });
  cell.Int("not_converged", [](const ResultCell& c) { return c.not_converged; })
      .Int("n_seeds", [](const ResultCell& c) { return c.seeds_with_loss; });
  ChunkColumns<v1::VariantComparison> comparison(comparisons, chunk);
  ComparisonColumns(comparison, "comparison_");
  DeprecatedLossColumns(cell);
  return Written(chunk, ExportFormat::kCsv);
}

std::string RenderResultsJson(const v1::Sweep& sweep, const v1::GetSweepAnalysisResponse& analysis) {
  const std::vector<ResultCell> cells = CellsFromAnalysis(analysis);
  v1::ExportChunk cell_chunk;
  ChunkColumns<ResultCell> cell(Pointers(cells), cell_chunk);
  CellColumns(cell);
  cell.Int("not_converged", [](const ResultCell& c) { return c.not_converged; })
      .Int("n_seeds", [](const ResultCell& c) { return c.seeds_with_loss; });
  DeprecatedLossColumns(cell);

  // The other arrays: one object per row of the analysis, keyed by its
  // message's fields.
  v1::ExportChunk line_chunk;
  ChunkColumns<v1::LrSensitivity> line(Pointers(analysis.lr_sensitivity()), line_chunk);
  GroupColumns(line).Int("warmup_steps", [](const auto& l) { return l.warmup_steps(); });
  LineColumns(line, "");
  line.Flag("one_lr", [](const auto& l) { return l.lrs() == 1; });

  v1::ExportChunk summary_chunk;
  ChunkColumns<v1::PlacementLrSensitivity> summary(Pointers(analysis.lr_sensitivity_summary()), summary_chunk);
  SummaryColumns(GroupColumns(summary), "");

  v1::ExportChunk shares_chunk;
  ChunkColumns<v1::VarianceShares> share(Pointers(analysis.importance()), shares_chunk);
  GroupColumns(share)
      .Int("warmups", [](const auto& v) { return v.warmups(); })
      .Int("lrs", [](const auto& v) { return v.lrs(); })
      .Int("trials", [](const auto& v) { return v.trials(); })
      .Real("total_variance", [](const auto& v) { return Opt(v.has_total_variance(), v.total_variance()); });
  ShareColumns(share);
  share.Text("note", [](const auto& v) { return v.note(); });

  v1::ExportChunk variants_chunk;
  ChunkColumns<v1::VariantComparison> variant(Pointers(analysis.variants()), variants_chunk);
  ComparisonColumns(GroupColumns(variant), "");

  return absl::StrCat("{\"sweep_id\":", sweep.id(), ",\"name\":", JsonQuote(sweep.name()),
                      ",\"cells\":", Written(cell_chunk, ExportFormat::kJsonl),
                      ",\"lr_sensitivity\":", Written(line_chunk, ExportFormat::kJsonl),
                      ",\"lr_sensitivity_summary\":", Written(summary_chunk, ExportFormat::kJsonl),
                      ",\"importance\":", Written(shares_chunk, ExportFormat::kJsonl),
                      ",\"variants\":", Written(variants_chunk, ExportFormat::kJsonl), "}\n");
}
}  // namespace normsweep::client
