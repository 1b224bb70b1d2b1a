#include "client/sweep_tables.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/attempts_table.h"
#include "client/results.h"
#include "google/protobuf/util/time_util.h"
#include "proto/schema/state_names.h"

namespace normsweep::client {
namespace {

using google::protobuf::util::TimeUtil;

int Done(const v1::TrialCounts& c) { return c.succeeded() + c.diverged() + c.failed() + c.cancelled(); }

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
  std::string out = absl::StrFormat("%-6s %-28s %-10s %7s %6s %8s %7s  %s\n", "id", "name", "state", "trials", "done",
                                    "diverged", "failed", "created");
  for (const v1::Sweep& s : sweeps) {
    const v1::TrialCounts& c = s.counts();
    absl::StrAppendFormat(&out, "%-6d %-28s %-10s %7d %6d %8d %7d  %s\n", s.id(), s.name().substr(0, 28),
                          SweepStateLabel(s.state()), s.trial_count(), Done(c), c.diverged(), c.failed(),
                          TimeUtil::ToString(s.created_at()));
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
  absl::StrAppendFormat(&out, "\n%-8s %-5s %-6s %-8s %-9s %-5s %-20s %-10s %-8s %-6s %-10s %s\n", "trial", "idx",
                        "place", "warmup", "lr", "seed", "variant", "state", "attempts", "step", "val_loss", "note");
  for (const v1::Trial& t : trials) {
    const std::string val = t.result().has_final_val_loss() ? absl::StrFormat("%.4f", t.result().final_val_loss())
                            : t.has_last_val_loss()          ? absl::StrFormat("(%.4f)", t.last_val_loss())
                                                             : "";
    const std::string note = !t.result().error().empty() ? t.result().error().substr(0, 60)
                             : t.result().has_diverged_step()
                                 ? absl::StrCat("diverged at step ", t.result().diverged_step())
                                 : "";
    absl::StrAppendFormat(&out, "%-8d %-5d %-6s %-8d %-9s %-5d %-20s %-10s %-8d %-6d %-10s %s\n", t.id(), t.index(),
                          t.config().placement(), t.config().warmup_steps(), FormatLr(t.config().lr()),
                          t.config().seed(), t.variant().substr(0, 20), TrialStateLabel(t.state()), t.attempts(),
                          t.last_step(), val, note);
  }
  return out;
}

std::string RenderTrialDetail(const v1::GetTrialResponse& response) {
  const v1::Trial& trial = response.trial();
  const v1::TrainConfig& config = trial.config();
  std::string out = absl::StrFormat("trial %d of sweep %d: %s, placement %s, warmup %d, lr %s, seed %d%s\n",
                                    trial.id(), trial.sweep_id(), TrialStateLabel(trial.state()), config.placement(),
                                    config.warmup_steps(), FormatLr(config.lr()), config.seed(),
                                    trial.variant().empty() ? "" : ", " + trial.variant());
  constexpr char kRow[] = "%-7s %-10s %-11s %-11s %-10s %-10s\n";
  absl::StrAppendFormat(&out, kRow, "step", "lr", "train_loss", "val_loss", "grad_norm", "tokens/s");
  for (const v1::MetricPoint& m : response.metrics()) {
    absl::StrAppendFormat(&out, kRow, absl::StrCat(m.step()), Opt(m.has_lr(), m.lr(), "%.3e"),
                          Opt(m.has_train_loss(), m.train_loss(), "%.4f"), Opt(m.has_val_loss(), m.val_loss(), "%.4f"),
                          Opt(m.has_grad_norm(), m.grad_norm(), "%.4f"),
                          Opt(m.has_tokens_per_s(), m.tokens_per_s(), "%.0f"));
  }
  for (const v1::LayerGradNorms& g : response.layer_grad_norms()) {
    absl::StrAppendFormat(&out, "\nFFN gradient norms at step %d:", g.step());
    for (const v1::LayerGradNorm& n : g.norms()) {
      absl::StrAppendFormat(&out, " L%d.%s=%.4f", n.layer(), n.matrix(), n.norm());
    }
    out += "\n";
  }
  if (const std::string attempts = RenderAttemptsTable(response.attempts()); !attempts.empty()) {
    absl::StrAppend(&out, "\n", attempts);
  }
  return out;
}

}  // namespace normsweep::client
