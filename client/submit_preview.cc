#include "client/submit_preview.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/progress_view.h"
#include "common/quote.h"

namespace normsweep::client {
namespace {

// The warning for one data_file value (where: the spec's field that holds it).
void CheckDataFile(const std::string& where, const std::string& path, std::vector<std::string>* warnings) {
  std::error_code ec;
  if (path.empty() || std::filesystem::exists(path, ec)) return;
  warnings->push_back(absl::StrCat(where, " ", QuoteForError(path),
                                   " does not exist on this host; the workers read it on theirs, so it may still be "
                                   "right there"));
}

void AppendGrid(const v1::SubmitSweepResponse& r, std::string* out) {
  size_t name_width = 0;
  for (const v1::GridAxis& a : r.axes()) name_width = std::max(name_width, a.name().size());
  absl::StrAppend(out, "\ngrid (axes in expansion order):\n");
  for (const v1::GridAxis& a : r.axes()) {
    absl::StrAppendFormat(out, "  %-*s  %s\n", static_cast<int>(name_width), a.name(), absl::StrJoin(a.values(), ", "));
  }
  if (r.groups().empty()) return;
  size_t placement_width = std::string("placement").size();
  size_t variant_width = std::string("variant").size();
  for (const v1::GridGroup& g : r.groups()) {
    placement_width = std::max(placement_width, g.placement().size());
    variant_width = std::max(variant_width, g.variant().size());
  }
  const int pw = static_cast<int>(placement_width);
  const int vw = static_cast<int>(variant_width);
  absl::StrAppendFormat(out, "\ntrials per placement and variant:\n  %-*s  %-*s  %s\n", pw, "placement", vw, "variant",
                        "trials");
  for (const v1::GridGroup& g : r.groups()) {
    absl::StrAppendFormat(out, "  %-*s  %-*s  %6s\n", pw, g.placement(), vw, g.variant().empty() ? "-" : g.variant(),
                          Grouped(g.trials()));
  }
}

void AppendEstimate(const v1::CostEstimate& e, std::string* out) {
  absl::StrAppend(out, "\nestimate:\n");
  absl::StrAppendFormat(out, "  compute     %s over %s training tokens\n", SiPrefixed(e.flops(), "FLOP"),
                        Grouped(e.training_tokens()));
  absl::StrAppendFormat(out, "  throughput  %s per slot (%s)\n", SiPrefixed(e.flops_per_s_per_slot(), "FLOP/s"),
                        e.throughput_source().empty() ? (e.throughput_measured() ? "measured" : "assumed")
                                                      : e.throughput_source());
  absl::StrAppendFormat(out, "  time        %.3g slot-hours, %.3g core-hours\n", e.slot_hours(), e.core_hours());
  if (e.has_wall_seconds()) {
    absl::StrAppendFormat(out, "  wall time   %s on %d slot%s\n", FormatDuration(e.wall_seconds()), e.slots(),
                          e.slots() == 1 ? "" : "s");
  } else {
    absl::StrAppend(out, "  wall time   unknown: no live worker is registered\n");
  }
  if (!e.note().empty()) absl::StrAppend(out, "  note        ", e.note(), "\n");
}

}  // namespace

std::vector<std::string> HostWarnings(const v1::SweepSpec& spec) {
  std::vector<std::string> warnings;
  CheckDataFile("base.data_file", spec.base().data_file(), &warnings);
  for (int a = 0; a < spec.extra_axes_size(); ++a) {
    const v1::ExtraAxis& axis = spec.extra_axes(a);
    if (axis.field() != "data_file") continue;
    for (int i = 0; i < axis.values_size(); ++i) {
      CheckDataFile(absl::StrCat("extra_axes[", a, "].values[", i, "] (data_file)"), axis.values(i), &warnings);
    }
  }
  return warnings;
}

std::vector<std::string> AllWarnings(const v1::SubmitSweepResponse& response,
                                     const std::vector<std::string>& host_warnings) {
  std::vector<std::string> all(response.warnings().begin(), response.warnings().end());
  all.insert(all.end(), host_warnings.begin(), host_warnings.end());
  return all;
}

std::string RenderWarnings(const std::vector<std::string>& warnings) {
  std::string out;
  for (const std::string& w : warnings) absl::StrAppend(&out, "warning: ", w, "\n");
  return out;
}

std::string RenderSubmitPreview(const v1::SubmitSweepResponse& response,
                                const std::vector<std::string>& host_warnings) {
  std::string out = absl::StrFormat("valid: %s trials (a dry run: nothing was stored)\n",
                                    Grouped(response.sweep().trial_count()));
  if (response.axes().empty() && !response.has_estimate()) {
    absl::StrAppend(&out, "(the scheduler sent no grid and no estimate: an older normsweep-scheduler?)\n");
  } else {
    AppendGrid(response, &out);
    if (response.has_estimate()) AppendEstimate(response.estimate(), &out);
  }
  const std::vector<std::string> warnings = AllWarnings(response, host_warnings);
  if (!warnings.empty()) {
    absl::StrAppend(&out, "\nwarnings (a real submit stops on these unless --force):\n");
    for (const std::string& w : warnings) absl::StrAppend(&out, "  - ", w, "\n");
  }
  return out;
}

std::string SiPrefixed(double value, std::string_view unit) {
  static constexpr const char* kPrefixes[] = {"", "k", "M", "G", "T", "P", "E"};
  if (!std::isfinite(value)) return absl::StrFormat("%g %s", value, unit);
  int i = 0;
  double v = value;
  while (std::fabs(v) >= 999.5 && i < 6) {
    v /= 1000;
    ++i;
  }
  if (std::fabs(v) >= 999.5) return absl::StrFormat("%.3g %s", value, unit);  // beyond E: a power of ten
  return absl::StrFormat("%.3g %s%s", v, kPrefixes[i], unit);
}

}  // namespace normsweep::client
