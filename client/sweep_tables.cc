#include "client/sweep_tables.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/attempts_table.h"
#include "client/results.h"
#include "client/trial_failure.h"
#include "google/protobuf/util/time_util.h"
#include "proto/schema/state_names.h"
#include "trainer/settings/schemes.h"

namespace normsweep::client {
namespace {

using google::protobuf::util::TimeUtil;

// Trials that ran to an outcome of their own; cancelled ones are counted apart.
int Done(const v1::TrialCounts& c) { return c.succeeded() + c.diverged() + c.failed(); }

// The value formatted, or "" when absent.
std::string Opt(bool has, double v, const absl::FormatSpec<double>& format) {
  return has ? absl::StrFormat(format, v) : std::string();
}

}  // namespace

std::string SweepStateLabel(v1::SweepState state) {
  if (state == v1::SWEEP_STATE_UNSPECIFIED || !v1::SweepState_IsValid(state)) return "unknown";
  return absl::AsciiStrToLower(schema::SweepStateName(state));
}

std::string TrialStateLabel(v1::TrialState state) {
  if (state == v1::TRIAL_STATE_UNSPECIFIED || !v1::TrialState_IsValid(state)) return "unknown";
  return absl::AsciiStrToLower(schema::TrialStateName(state));
}

std::string RenderSweepList(const std::vector<v1::Sweep>& sweeps) {
  std::string out = absl::StrFormat("%-6s %-28s %-10s %7s %6s %8s %7s %9s  %s\n", "id", "name", "state", "trials",
                                    "done", "diverged", "failed", "cancelled", "created");
  for (const v1::Sweep& s : sweeps) {
    const v1::TrialCounts& c = s.counts();
    absl::StrAppendFormat(&out, "%-6d %-28s %-10s %7d %6d %8d %7d %9d  %s\n", s.id(), s.name().substr(0, 28),
                          SweepStateLabel(s.state()), s.trial_count(), Done(c), c.diverged(), c.failed(),
                          c.cancelled(), TimeUtil::ToString(s.created_at()));
  }
  return out;
}

std::string RenderSweepDetail(const v1::Sweep& sweep, const std::vector<v1::Trial>& trials) {
  const v1::TrialCounts& c = sweep.counts();
  std::string out = absl::StrFormat(
      "sweep %d \"%s\": %s, %d trials (%d pending, %d running, %d succeeded, %d diverged, %d failed, %d "
      "cancelled)\ncreated %s\n",
      sweep.id(), sweep.name(), SweepStateLabel(sweep.state()), sweep.trial_count(), c.pending(), c.running(),
      c.succeeded(), c.diverged(), c.failed(), c.cancelled(), TimeUtil::ToString(sweep.created_at()));
  // Who submitted and cancelled it: the names of token roles (empty without them).
  if (!sweep.submitted_by().empty()) absl::StrAppend(&out, "submitted by ", sweep.submitted_by(), "\n");
  if (!sweep.cancelled_by().empty()) absl::StrAppend(&out, "cancelled by ", sweep.cancelled_by(), "\n");
  // place: wide enough for every placement's name (the scheme table's
  // longest); failure: for the longest name in the table.
  const std::optional<double> max_val_loss = FailureMaxValLoss(sweep.spec());
  std::vector<std::string> failures;
  size_t failure_width = std::string("failure").size();
  for (const v1::Trial& t : trials) {
    failures.push_back(FailureColumn(t, max_val_loss));
    failure_width = std::max(failure_width, failures.back().size());
  }
  const int fw = static_cast<int>(failure_width);
  size_t place_width = std::string("place").size();
  for (const trainer::SchemeInfo& scheme : trainer::Schemes()) {
    place_width = std::max(place_width, std::string(scheme.name).size());
  }
  const int pw = static_cast<int>(place_width);
  absl::StrAppendFormat(&out, "\n%-8s %-5s %-*s %-8s %-9s %-5s %-20s %-10s %-8s %-6s %-6s %-10s %-8s %-*s %s\n",
                        "trial", "idx", pw, "place", "warmup", "peak_lr", "seed", "variant", "state", "attempts", "interr",
                        "step", "val_loss", "unigram", fw, "failure", "note");
  for (size_t i = 0; i < trials.size(); ++i) {
    const v1::Trial& t = trials[i];
    const std::string val = t.result().has_final_val_loss() ? absl::StrFormat("%.4f", t.result().final_val_loss())
                            : t.has_last_val_loss()          ? absl::StrFormat("(%.4f)", t.last_val_loss())
                                                             : "";
    const std::string note = !t.result().error().empty() ? t.result().error().substr(0, 60)
                             : t.result().has_diverged_step()
                                 ? absl::StrCat("diverged at step ", t.result().diverged_step())
                                 : "";
    // attempts: the trial's own (what max_attempts counts); interr: the
    // interruptions, counted apart.
    absl::StrAppendFormat(&out, "%-8d %-5d %-*s %-8d %-9s %-5d %-20s %-10s %-8d %-6d %-6d %-10s %-8s %-*s %s\n", t.id(),
                          t.index(), pw, t.config().placement(), t.config().warmup_steps(), FormatLr(t.config().lr()),
                          t.config().seed(), t.variant().substr(0, 20), TrialStateLabel(t.state()),
                          t.attempts() - t.interruptions(), t.interruptions(), t.last_step(), val,
                          Opt(t.result().has_unigram_loss(), t.result().unigram_loss(), "%.4f"), fw, failures[i], note);
  }
  return out;
}

namespace {

// "FFN gradient norms at step N: L0.ffn.fc1=... ...\n"
std::string GradNormsLine(const v1::LayerGradNorms& g) {
  std::string out = absl::StrFormat("FFN gradient norms at step %d:", g.step());
  for (const v1::LayerGradNorm& n : g.norms()) absl::StrAppendFormat(&out, " L%d.%s=%.4f", n.layer(), n.matrix(), n.norm());
  return out + "\n";
}

// A value in %.3g, or "" when absent.
std::string Short(bool has, double v) { return has ? absl::StrFormat("%.3g", v) : std::string(); }

// The per-block diagnostics at the first evaluation (step 0, at
// initialisation) and the last one: the largest attention logit at both,
// the update ratios at the last (there are none before the first update).
std::string DiagnosticsTable(const v1::StepDiagnostics& first, const v1::StepDiagnostics& last) {
  const bool two = first.step() != last.step();
  std::string out =
      two ? absl::StrFormat("\nper-block diagnostics at step %d and at step %d, the last evaluation:\n", first.step(),
                            last.step())
          : absl::StrFormat("\nper-block diagnostics at step %d, the last evaluation:\n", last.step());
  // block, [the first step's logit,] the last step's logit, its four update ratios
  auto add_row = [&](const std::string& block, const std::string& first_logit, const std::string& last_logit,
                     const std::string& qkv, const std::string& proj, const std::string& fc1, const std::string& fc2) {
    absl::StrAppendFormat(&out, "%-6s ", block);
    if (two) absl::StrAppendFormat(&out, "%-11s ", first_logit);
    absl::StrAppendFormat(&out, "%-11s %-10s %-10s %-10s %s\n", last_logit, qkv, proj, fc1, fc2);
  };
  add_row("block", absl::StrCat("logit@", first.step()), absl::StrCat("logit@", last.step()), "upd_qkv", "upd_proj",
          "upd_fc1", "upd_fc2");
  std::map<int, std::pair<const v1::LayerDiagnostics*, const v1::LayerDiagnostics*>> blocks;
  for (const v1::LayerDiagnostics& l : first.layers()) blocks[l.layer()].first = &l;
  for (const v1::LayerDiagnostics& l : last.layers()) blocks[l.layer()].second = &l;
  const v1::LayerDiagnostics none;
  for (const auto& [layer, at] : blocks) {
    const v1::LayerDiagnostics& f = at.first != nullptr ? *at.first : none;
    const v1::LayerDiagnostics& l = at.second != nullptr ? *at.second : none;
    add_row(absl::StrCat(layer), Short(f.has_max_attn_logit(), f.max_attn_logit()),
            Short(l.has_max_attn_logit(), l.max_attn_logit()), Short(l.has_update_ratio_qkv(), l.update_ratio_qkv()),
            Short(l.has_update_ratio_proj(), l.update_ratio_proj()),
            Short(l.has_update_ratio_fc1(), l.update_ratio_fc1()),
            Short(l.has_update_ratio_fc2(), l.update_ratio_fc2()));
  }
  return out;
}

// The normalisation settings that differ from the defaults (issue 24's
// switches; Mix-LN's fraction whenever the placement is mix, since it is
// part of the scheme), "" when none: ", rmsnorm, qk_norm, z_loss 0.0001".
// *shown gets the fields named.
std::string NormSettings(const v1::TrainConfig& config, std::set<std::string>* shown) {
  std::string out;
  if (config.has_mix_post_fraction()) {
    absl::StrAppendFormat(&out, ", mix_post_fraction %g", config.mix_post_fraction());
    shown->insert("mix_post_fraction");
  }
  if (!config.norm().empty() && config.norm() != "layernorm") {
    absl::StrAppend(&out, ", ", config.norm());
    shown->insert("norm");
  }
  if (config.qk_norm()) {
    out += ", qk_norm";
    shown->insert("qk_norm");
  }
  if (config.z_loss() != 0) {
    absl::StrAppendFormat(&out, ", z_loss %g", config.z_loss());
    shown->insert("z_loss");
  }
  return out;
}

// The variant ("layers=12,qk_norm=true") without the settings already shown,
// so that each is said once: ", layers=12", or "" when nothing is left. An
// item that does not start with a TrainConfig field and "=" belongs to the
// one before (a value with a comma in it).
std::string VariantRest(const std::string& variant, const std::set<std::string>& shown) {
  std::vector<std::pair<std::string, std::string>> items;  // field, "field=value"
  for (absl::string_view item : absl::StrSplit(variant, ',', absl::SkipEmpty())) {
    const size_t eq = item.find('=');
    const std::string field(item.substr(0, eq == absl::string_view::npos ? 0 : eq));
    if (!items.empty() && (field.empty() || v1::TrainConfig::descriptor()->FindFieldByName(field) == nullptr)) {
      absl::StrAppend(&items.back().second, ",", item);
      continue;
    }
    items.emplace_back(field, std::string(item));
  }
  std::string out;
  for (const auto& [field, item] : items) {
    if (!shown.contains(field)) absl::StrAppend(&out, ", ", item);
  }
  return out;
}

// The metric points to print: every Nth step and the last, then the last N
// of those.
std::vector<const v1::MetricPoint*> SelectedRows(const google::protobuf::RepeatedPtrField<v1::MetricPoint>& metrics,
                                                 const MetricRows& rows) {
  std::vector<const v1::MetricPoint*> out;
  for (int i = 0; i < metrics.size(); ++i) {
    const bool last = i + 1 == metrics.size();
    if (rows.every > 0 && metrics[i].step() % rows.every != 0 && !last) continue;
    out.push_back(&metrics[i]);
  }
  if (rows.tail > 0 && out.size() > static_cast<size_t>(rows.tail)) out.erase(out.begin(), out.end() - rows.tail);
  return out;
}

// The unigram loss, and once the trial ended whether it failed to train by
// the one rule and why.
std::string FailureLines(const v1::Trial& trial, std::optional<double> max_val_loss) {
  const v1::TrialResult& r = trial.result();
  std::string out;
  if (r.has_unigram_loss()) absl::StrAppendFormat(&out, "unigram loss (the plateau) %.4f\n", r.unigram_loss());
  if (r.has_val_loss_progress()) {
    absl::StrAppendFormat(&out, "val loss progress over the last quarter %.4f\n", r.val_loss_progress());
  }
  const std::optional<schema::TrainingFailure> f = TrialFailure(trial, max_val_loss);
  if (!f.has_value()) return out;
  std::string why;
  if (*f == schema::TrainingFailure::kPlateau) {
    why = absl::StrFormat(" (final validation loss %.4f > unigram loss %.4f - %g", r.final_val_loss(),
                          r.unigram_loss(), schema::kPlateauMargin);
    why += r.has_val_loss_progress()
               ? absl::StrFormat(", and it fell only %.4f < %g over the last quarter)", r.val_loss_progress(),
                                 schema::kProgressMargin)
               : ")";
  } else if (*f == schema::TrainingFailure::kAboveMaxValLoss) {
    why = absl::StrFormat(" (final validation loss %.4f > %.4f)", r.final_val_loss(), *max_val_loss);
  } else if (*f == schema::TrainingFailure::kNotConverged) {
    why = absl::StrFormat(": no failure, final validation loss %.4f > unigram loss %.4f - %g but still falling "
                          "%.4f >= %g over the last quarter; a longer run would tell",
                          r.final_val_loss(), r.unigram_loss(), schema::kPlateauMargin, r.val_loss_progress(),
                          schema::kProgressMargin);
  }
  const std::string cause = *f == schema::TrainingFailure::kNone ? "none, it trained" : FailureCause(trial, *f);
  absl::StrAppend(&out, "failure: ", cause, why, "\n");
  return out;
}

}  // namespace

std::string RenderTrialDetail(const v1::GetTrialResponse& response, std::optional<double> max_val_loss,
                              const MetricRows& rows) {
  const v1::Trial& trial = response.trial();
  const v1::TrainConfig& config = trial.config();
  std::set<std::string> shown;
  const std::string norm_settings = NormSettings(config, &shown);
  std::string out = absl::StrFormat("trial %d of sweep %d: %s, placement %s%s, warmup %d, peak_lr %s, seed %d%s\n",
                                    trial.id(), trial.sweep_id(), TrialStateLabel(trial.state()), config.placement(),
                                    norm_settings, config.warmup_steps(), FormatLr(config.lr()), config.seed(),
                                    VariantRest(trial.variant(), shown));
  if (trial.interruptions() > 0 || trial.attempts() > 1) {
    // Every interruption's cause, in the order of their first occurrence.
    std::vector<std::pair<std::string, int>> causes;
    for (const v1::TrialAttempt& a : response.attempts()) {
      if (a.interruption().empty()) continue;
      auto it = std::find_if(causes.begin(), causes.end(), [&](const auto& c) { return c.first == a.interruption(); });
      if (it == causes.end()) causes.emplace_back(a.interruption(), 1); else ++it->second;
    }
    absl::StrAppendFormat(&out, "attempts %d (the trial's own, counted against max_attempts), interruptions %d%s\n",
                          trial.attempts() - trial.interruptions(), trial.interruptions(),
                          causes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(causes, ", ", [](std::string* o, const auto& c) {
                            absl::StrAppend(o, c.first, " ", c.second);
                          }), ")"));
  }
  // l0: the trial's result, else its step-0 evaluation (while it runs).
  const v1::MetricPoint* step0 = nullptr;
  bool log_z = false, z_term = false;
  for (const v1::MetricPoint& m : response.metrics()) {
    if (m.step() == 0 && m.has_val_loss()) step0 = &m;
    log_z |= m.has_output_log_z();
    z_term |= m.has_z_term();
  }
  if (trial.result().has_init_val_loss()) {
    absl::StrAppendFormat(&out, "l0 (validation loss at initialisation) %.4f\n", trial.result().init_val_loss());
  } else if (step0 != nullptr) {
    absl::StrAppendFormat(&out, "l0 (validation loss at initialisation) %.4f\n", step0->val_loss());
  }
  out += FailureLines(trial, max_val_loss);
  // log Z and the z-loss term only for trials that have them, so that older
  // ones print as before.
  auto add_row = [&](std::vector<std::string> cells) {
    if (!z_term) cells.pop_back();
    if (!log_z) cells.erase(cells.begin() + 6);
    static constexpr int kWidths[] = {7, 10, 11, 11, 10, 10, 10};
    for (size_t i = 0; i + 1 < cells.size(); ++i) absl::StrAppendFormat(&out, "%-*s ", kWidths[i], cells[i]);
    // The last of the fixed columns (tokens/s) keeps its padding, as before.
    absl::StrAppendFormat(&out, "%-*s\n", log_z || z_term ? 0 : kWidths[cells.size() - 1], cells.back());
  };
  add_row({"step", "lr", "train_loss", "val_loss", "grad_norm", "tokens/s", "log_z", "z_term"});
  const std::vector<const v1::MetricPoint*> selected = SelectedRows(response.metrics(), rows);
  for (const v1::MetricPoint* point : selected) {
    const v1::MetricPoint& m = *point;
    add_row({absl::StrCat(m.step()), Opt(m.has_lr(), m.lr(), "%.3e"), Opt(m.has_train_loss(), m.train_loss(), "%.4f"),
             Opt(m.has_val_loss(), m.val_loss(), "%.4f"), Opt(m.has_grad_norm(), m.grad_norm(), "%.4f"),
             Opt(m.has_tokens_per_s(), m.tokens_per_s(), "%.0f"), Opt(m.has_output_log_z(), m.output_log_z(), "%.4f"),
             Opt(m.has_z_term(), m.z_term(), "%.3e")});
  }
  if (selected.size() < static_cast<size_t>(response.metrics_size())) {
    std::string how;
    if (rows.every > 0) absl::StrAppendFormat(&how, "the steps divisible by %d and the last", rows.every);
    if (rows.tail > 0) absl::StrAppendFormat(&how, "%sthe last %d", how.empty() ? "" : ", then ", rows.tail);
    absl::StrAppendFormat(&out, "(%d of %d metric rows: %s)\n", selected.size(), response.metrics_size(), how);
  }
  // Gradient norms come at step 0 and at every later evaluation: the first
  // and the last are printed.
  const auto& norms = response.layer_grad_norms();
  if (!norms.empty()) absl::StrAppend(&out, "\n", GradNormsLine(norms[0]));
  if (norms.size() > 2) absl::StrAppendFormat(&out, "\n(%d evaluation steps in between)\n", norms.size() - 2);
  if (norms.size() > 1) absl::StrAppend(&out, "\n", GradNormsLine(norms[norms.size() - 1]));
  if (!response.diagnostics().empty()) {
    absl::StrAppend(&out, DiagnosticsTable(response.diagnostics(0), response.diagnostics(response.diagnostics_size() - 1)));
  }
  if (const std::string attempts = RenderAttemptsTable(response.attempts()); !attempts.empty()) {
    absl::StrAppend(&out, "\n", attempts);
  }
  return out;
}

}  // namespace normsweep::client
