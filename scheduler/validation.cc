#include "scheduler/validation.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "db/store.h"
#include "google/protobuf/reflection.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/boundary_search.h"
#include "proto/schema/interruptions.h"
#include "proto/schema/train_config.h"
#include "trainer/settings/config.h"
#include "trainer/settings/schemes.h"

namespace normsweep::scheduler {
namespace {

using google::protobuf::FieldDescriptor;

// ---- requests ----

// Tokens are what a previous page's next_page_token said: plain decimal
// digits, nothing else (SimpleAtoi would also take " 12" and "+5").
absl::StatusOr<int64_t> ParsePageToken(const std::string& token) {
  if (token.empty()) return 0;
  int64_t v = 0;
  if (token.size() > 18 || !std::all_of(token.begin(), token.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(token, &v)) {
    return Invalid("page_token", absl::StrCat("malformed: ", QuoteForError(token, 32),
                                              " (pass the next_page_token of the previous page)"));
  }
  return v;
}

absl::StatusOr<int> PageSize(int requested, int default_size, int max) {
  if (requested < 0 || requested > max) return Invalid("page_size", absl::StrCat("must be in [0, ", max, "]"));
  return requested == 0 ? default_size : requested;
}

// A value the API takes finite or absent (the diagnostics, l0).
absl::Status CheckFinite(const std::string& field, bool has, double value) {
  if (!has || std::isfinite(value)) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be finite or absent, not ", value));
}

// A block index of progress: in [0, kMaxLayers) (the trial's own layer
// count would cost a read of its row per batch).
absl::Status CheckLayer(const std::string& field, int32_t layer) {
  if (layer >= 0 && layer < trainer::kMaxLayers) return absl::OkStatus();
  return Invalid(field, absl::StrCat("must be in [0, ", trainer::kMaxLayers, "), not ", layer));
}

absl::Status ValidateDiagnostics(const v1::ReportProgressRequest& request) {
  if (request.diagnostics_size() > schema::kMaxDiagnosticStepsPerReport) {
    return Invalid("diagnostics", absl::StrCat("at most ", schema::kMaxDiagnosticStepsPerReport, " steps"));
  }
  int layers = 0;
  for (int i = 0; i < request.diagnostics_size(); ++i) {
    const v1::StepDiagnostics& d = request.diagnostics(i);
    if (d.step() < 0) return Invalid(absl::StrCat("diagnostics[", i, "].step"), "must be >= 0");
    for (int j = 0; j < d.layers_size(); ++j) {
      const v1::LayerDiagnostics& l = d.layers(j);
      const std::string where = absl::StrCat("diagnostics[", i, "].layers[", j, "]");
      if (!l.has_layer()) return Invalid(where + ".layer", "required");
      RETURN_IF_ERROR(CheckLayer(where + ".layer", l.layer()));
      RETURN_IF_ERROR(CheckFinite(where + ".max_attn_logit", l.has_max_attn_logit(), l.max_attn_logit()));
      RETURN_IF_ERROR(CheckFinite(where + ".update_ratio_qkv", l.has_update_ratio_qkv(), l.update_ratio_qkv()));
      RETURN_IF_ERROR(CheckFinite(where + ".update_ratio_proj", l.has_update_ratio_proj(), l.update_ratio_proj()));
      RETURN_IF_ERROR(CheckFinite(where + ".update_ratio_fc1", l.has_update_ratio_fc1(), l.update_ratio_fc1()));
      RETURN_IF_ERROR(CheckFinite(where + ".update_ratio_fc2", l.has_update_ratio_fc2(), l.update_ratio_fc2()));
      if (++layers > schema::kMaxDiagnosticLayersPerReport) {
        return Invalid("diagnostics",
                       absl::StrCat("at most ", schema::kMaxDiagnosticLayersPerReport, " layers in all"));
      }
    }
  }
  return absl::OkStatus();
}

// ---- the sweep spec ----

std::string AllowedAxisFields() {
  std::string out;
  const auto* d = v1::TrainConfig::descriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    if (IsAxisField(d->field(i))) absl::StrAppend(&out, out.empty() ? "" : ", ", d->field(i)->name());
  }
  return out;
}

// The trainer's placements by their canonical names, for errors.
std::string PlacementNames() {
  std::string aliases;
  for (const trainer::SchemeInfo& scheme : trainer::Schemes()) {
    if (scheme.alias != nullptr) absl::StrAppend(&aliases, "; ", scheme.alias, " is ", scheme.name);
  }
  return absl::StrCat("one of ", trainer::SchemeNames(", ", ", ", false), aliases);
}

// mix_post_fraction changes Mix-LN only: the resolved config of any other
// placement drops it, so its values would be the same trials twice there.
// Its values are checked on a Mix-LN probe, and every placement must be mix.
absl::Status CheckMixFractionAxis(const v1::SweepSpec& spec, const std::string& where) {
  for (int i = 0; i < spec.placements_size(); ++i) {
    trainer::StatusOr<trainer::Placement> p = trainer::ParsePlacement(spec.placements(i));
    if (p.ok() && trainer::SchemeOf(*p).per_block) continue;
    return Invalid(where, absl::StrCat("an axis over mix_post_fraction needs every placement to be mix (it sets "
                                       "Mix-LN's share of Post-LN blocks); spec.placements[",
                                       i, "] is ", QuoteForError(spec.placements(i))));
  }
  return absl::OkStatus();
}

absl::Status CheckBaseStrings(const v1::TrainConfig& base) {
  const auto* d = base.GetDescriptor();
  const auto* r = base.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING || f->is_repeated()) continue;
    RETURN_IF_ERROR(
        CheckStoredText(absl::StrCat("spec.base.", f->name()), r->GetString(base, f), schema::kMaxStringFieldLength));
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status CheckAxisSize(const std::string& field, const T& values) {
  if (values.empty()) return Invalid(field, "must not be empty");
  if (values.size() > schema::kMaxAxisValues) {
    return Invalid(field, absl::StrCat("at most ", schema::kMaxAxisValues, " values"));
  }
  return absl::OkStatus();
}

absl::Status CheckRandomSearch(const v1::RandomSearch& rs) {
  if (rs.samples() < 1 || rs.samples() > schema::kMaxTrialsPerSweep) {
    return Invalid("spec.random_search.samples", absl::StrCat("must be in [1, ", schema::kMaxTrialsPerSweep, "]"));
  }
  if (!std::isfinite(rs.lr_min()) || rs.lr_min() <= 0) return Invalid("spec.random_search.lr_min", "must be finite and > 0");
  if (!std::isfinite(rs.lr_max()) || rs.lr_max() < rs.lr_min()) {
    return Invalid("spec.random_search.lr_max", "must be finite and >= lr_min");
  }
  if (rs.warmup_min() < 0) return Invalid("spec.random_search.warmup_min", "must be >= 0");
  if (rs.warmup_max() < rs.warmup_min()) return Invalid("spec.random_search.warmup_max", "must be >= warmup_min");
  return absl::OkStatus();
}

absl::Status CheckPlacements(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.placements");
  for (int i = 0; i < spec.placements_size(); ++i) {
    const std::string& placement = spec.placements(i);
    const std::string where = absl::StrCat("spec.placements[", i, "]");
    RETURN_IF_ERROR(CheckStoredText(where, placement, schema::kMaxPlacementLength));
    // An empty placement would resolve to the default (post).
    if (placement.empty()) return Invalid(where, absl::StrCat("must not be empty (", PlacementNames(), ")"));
    v1::TrainConfig c = probe;
    c.set_placement(placement);
    RETURN_IF_ERROR(seen.Add(i, placement, c));
  }
  return absl::OkStatus();
}

absl::Status CheckSeeds(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.seeds");
  for (int i = 0; i < spec.seeds_size(); ++i) {
    v1::TrainConfig c = probe;
    c.set_seed(spec.seeds(i));
    RETURN_IF_ERROR(seen.Add(i, absl::StrCat(spec.seeds(i)), c));
  }
  return absl::OkStatus();
}

absl::Status CheckWarmupSteps(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.warmup_steps");
  for (int i = 0; i < spec.warmup_steps_size(); ++i) {
    const std::string where = absl::StrCat("spec.warmup_steps[", i, "]");
    if (spec.warmup_steps(i) < 0) return Invalid(where, "warmup_steps: must be >= 0");
    v1::TrainConfig c = probe;
    c.set_warmup_steps(spec.warmup_steps(i));
    RETURN_IF_ERROR(seen.Add(i, absl::StrCat(spec.warmup_steps(i)), c));
  }
  return absl::OkStatus();
}

absl::Status CheckPeakLrs(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  AxisValues seen("spec.peak_lrs");
  for (int i = 0; i < spec.peak_lrs_size(); ++i) {
    const std::string where = absl::StrCat("spec.peak_lrs[", i, "]");
    const double lr = spec.peak_lrs(i);
    if (!std::isfinite(lr) || lr <= 0) return Invalid(where, "lr: must be finite and > 0");
    v1::TrainConfig c = probe;
    c.set_lr(lr);
    RETURN_IF_ERROR(seen.Add(i, ShortestDouble(lr), c));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<AxisValue>> ParseExtraAxis(const v1::ExtraAxis& axis, const FieldDescriptor* f,
                                                      const std::string& where, const v1::TrainConfig& probe) {
  RETURN_IF_ERROR(CheckAxisSize(where + ".values", axis.values()));
  std::vector<AxisValue> values;
  AxisValues seen(where + ".values");
  for (int i = 0; i < axis.values_size(); ++i) {
    ASSIGN_OR_RETURN(AxisValue v, ParseAxisValue(f, axis.values(i), absl::StrCat(where, ".values[", i, "]")));
    v1::TrainConfig c = probe;
    Apply(v, &c);
    RETURN_IF_ERROR(seen.Add(i, axis.values(i), c));
    values.push_back(v);
  }
  return values;
}

}  // namespace

absl::Status Invalid(const std::string& field, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", what));
}

absl::Status Within(const std::string& where, const absl::Status& status) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(where, ": ", std::string(status.message())));
}

absl::Status CheckStoredText(const std::string& field, const std::string& value, size_t max_length) {
  if (value.size() > max_length) return Invalid(field, absl::StrCat("at most ", max_length, " characters"));
  if (value.find('\0') != std::string::npos) return Invalid(field, "must not contain NUL characters");
  return absl::OkStatus();
}

// ---- requests ----

absl::Status CheckId(const std::string& field, int64_t id) {
  return id > 0 ? absl::OkStatus() : Invalid(field, "required (a positive id)");
}

absl::StatusOr<Page> ValidateListSweeps(const v1::ListSweepsRequest& request) {
  if (!v1::SweepState_IsValid(request.state())) return Invalid("state", "unknown sweep state");
  Page page;
  ASSIGN_OR_RETURN(page.size, PageSize(request.page_size(), 100, schema::kMaxPageSizeSweeps));
  ASSIGN_OR_RETURN(page.token, ParsePageToken(request.page_token()));
  return page;
}

absl::StatusOr<Page> ValidateListTrials(const v1::ListTrialsRequest& request) {
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id()));
  if (!v1::TrialState_IsValid(request.state())) return Invalid("state", "unknown trial state");
  Page page;
  ASSIGN_OR_RETURN(page.size, PageSize(request.page_size(), 1000, schema::kMaxPageSizeTrials));
  ASSIGN_OR_RETURN(page.token, ParsePageToken(request.page_token()));
  if (page.token > INT32_MAX) return Invalid("page_token", "malformed");
  return page;
}

absl::Status ValidateSubmitSweep(const v1::SubmitSweepRequest& request) {
  RETURN_IF_ERROR(CheckStoredText("request_id", request.request_id(), schema::kMaxRequestIdLength));
  return CheckBaseSetsNoAxis(request.spec());
}

absl::Status CheckBaseSetsNoAxis(const v1::SweepSpec& spec) {
  const v1::TrainConfig& base = spec.base();
  const auto* r = base.GetReflection();
  // The axis that sets each main-axis field of every trial.
  const std::string lr_axis = spec.has_boundary_search()  ? "spec.boundary_search (lr_min, lr_max)"
                              : spec.has_random_search() ? "spec.random_search (lr_min, lr_max)"
                                                         : "spec.peak_lrs";
  const std::string warmup_axis =
      spec.has_random_search() ? "spec.random_search (warmup_min, warmup_max)" : "spec.warmup_steps";
  const std::pair<const char*, std::string> main_axes[] = {
      {"placement", "spec.placements"}, {"lr", lr_axis}, {"warmup_steps", warmup_axis}, {"seed", "spec.seeds"}};
  const auto* d = base.GetDescriptor();
  for (const auto& [field, axis] : main_axes) {
    // Without presence, HasField is "not the default": lr 0, seed 0 and an
    // empty placement are what an axis overwrites anyway.
    if (r->HasField(base, d->FindFieldByName(field))) {
      return Invalid(absl::StrCat("spec.base.", field),
                     absl::StrCat("set by an axis, so a value here would be ignored; use ", axis, " instead"));
    }
  }
  for (int a = 0; a < spec.extra_axes_size(); ++a) {
    const FieldDescriptor* f = d->FindFieldByName(spec.extra_axes(a).field());
    if (f == nullptr || f->is_repeated() || !r->HasField(base, f)) continue;  // a bad axis is ValidateSweepSpec's
    return Invalid(absl::StrCat("spec.base.", f->name()),
                   absl::StrCat("set by spec.extra_axes[", a, "], so a value here would be ignored; put the values "
                                "in the axis instead"));
  }
  return absl::OkStatus();
}

absl::StatusOr<double> ValidateGetSweepAnalysis(const v1::GetSweepAnalysisRequest& request) {
  RETURN_IF_ERROR(CheckId("sweep_id", request.sweep_id()));
  const double tolerance = request.near_best_tolerance();
  if (!(std::isfinite(tolerance) && tolerance >= 0 && tolerance <= 10)) {
    return Invalid("near_best_tolerance", absl::StrCat("must be a finite number in [0, 10] (0: the default ",
                                                       schema::kDefaultNearBestTolerance, ")"));
  }
  return tolerance == 0 ? schema::kDefaultNearBestTolerance : tolerance;
}

absl::Status ValidateRegisterWorker(const v1::RegisterWorkerRequest& request) {
  if (request.name().empty()) return Invalid("name", "required");
  RETURN_IF_ERROR(CheckStoredText("name", request.name(), schema::kMaxNameLength));
  RETURN_IF_ERROR(CheckStoredText("hostname", request.hostname(), schema::kMaxHostnameLength));
  if (request.devices_size() > schema::kMaxDevicesPerWorker) {
    return Invalid("devices", absl::StrCat("at most ", schema::kMaxDevicesPerWorker));
  }
  for (int i = 0; i < request.devices_size(); ++i) {
    const std::string field = absl::StrCat("devices[", i, "]");
    if (request.devices(i).empty()) return Invalid(field, "must not be empty");
    RETURN_IF_ERROR(CheckStoredText(field, request.devices(i), schema::kMaxDeviceLength));
  }
  return absl::OkStatus();
}

absl::Status ValidateLeaseTrial(const v1::LeaseTrialRequest& request) {
  RETURN_IF_ERROR(CheckId("worker_id", request.worker_id()));
  if (request.max_trials() < 0 || request.max_trials() > schema::kMaxFusedTrials) {
    return Invalid("max_trials",
                   absl::StrCat("must be in [0, ", schema::kMaxFusedTrials, "], not ", request.max_trials()));
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeat(const v1::HeartbeatRequest& request) {
  RETURN_IF_ERROR(CheckId("worker_id", request.worker_id()));
  if (request.leases_size() > schema::kMaxLeasesPerHeartbeat) {
    return Invalid("leases", absl::StrCat("at most ", schema::kMaxLeasesPerHeartbeat));
  }
  for (int i = 0; i < request.leases_size(); ++i) {
    RETURN_IF_ERROR(CheckId(absl::StrCat("leases[", i, "].trial_id"), request.leases(i).trial_id()));
    if (request.leases(i).attempt() <= 0) return Invalid(absl::StrCat("leases[", i, "].attempt"), "must be positive");
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ValidateProgress(const v1::ReportProgressRequest& request) {
  RETURN_IF_ERROR(CheckId("worker_id", request.worker_id()));
  RETURN_IF_ERROR(CheckId("trial_id", request.trial_id()));
  if (request.attempt() <= 0) return Invalid("attempt", "must be positive (the lease's attempt)");
  if (request.points_size() > schema::kMaxPointsPerReport) {
    return Invalid("points", absl::StrCat("at most ", schema::kMaxPointsPerReport));
  }
  for (int i = 0; i < request.points_size(); ++i) {
    const v1::MetricPoint& p = request.points(i);
    if (p.step() < 0) return Invalid(absl::StrCat("points[", i, "].step"), "must be >= 0");
    RETURN_IF_ERROR(CheckFinite(absl::StrCat("points[", i, "].output_log_z"), p.has_output_log_z(), p.output_log_z()));
    RETURN_IF_ERROR(CheckFinite(absl::StrCat("points[", i, "].z_term"), p.has_z_term(), p.z_term()));
  }
  int norms = 0;
  for (int i = 0; i < request.layer_grad_norms_size(); ++i) {
    const v1::LayerGradNorms& g = request.layer_grad_norms(i);
    if (g.step() < 0) return Invalid(absl::StrCat("layer_grad_norms[", i, "].step"), "must be >= 0");
    for (int j = 0; j < g.norms_size(); ++j) {
      const std::string where = absl::StrCat("layer_grad_norms[", i, "].norms[", j, "]");
      RETURN_IF_ERROR(CheckLayer(where + ".layer", g.norms(j).layer()));
      if (g.norms(j).matrix().empty()) return Invalid(where + ".matrix", "required");
      RETURN_IF_ERROR(CheckStoredText(where + ".matrix", g.norms(j).matrix(), schema::kMaxMatrixNameLength));
      if (++norms > schema::kMaxPointsPerReport) {
        return Invalid("layer_grad_norms", absl::StrCat("at most ", schema::kMaxPointsPerReport, " norms"));
      }
    }
  }
  RETURN_IF_ERROR(ValidateDiagnostics(request));
  return norms;
}

absl::Status ValidateFinish(const v1::FinishTrialRequest& request) {
  RETURN_IF_ERROR(CheckId("worker_id", request.worker_id()));
  RETURN_IF_ERROR(CheckId("trial_id", request.trial_id()));
  if (request.attempt() <= 0) return Invalid("attempt", "must be positive (the lease's attempt)");
  if (!db::IsFinal(request.outcome())) {
    return Invalid("outcome", "must be TRIAL_SUCCEEDED, TRIAL_DIVERGED, TRIAL_FAILED or TRIAL_CANCELLED");
  }
  if (request.retry()) {
    if (request.outcome() != v1::TRIAL_FAILED) return Invalid("retry", "only with outcome TRIAL_FAILED");
    if (request.result().error().empty()) return Invalid("result.error", "required with retry: say what happened");
  }
  if (!request.interruption().empty()) {
    if (!request.retry()) return Invalid("interruption", "only with retry");
    if (!schema::IsInterruptionCause(request.interruption())) {
      return Invalid("interruption", absl::StrCat("unknown cause ", QuoteForError(request.interruption()), "; one of ",
                                                  absl::StrJoin(schema::kInterruptionCauses, ", ")));
    }
  }
  RETURN_IF_ERROR(CheckStoredText("result.error", request.result().error(), schema::kMaxErrorLength));
  if (request.result().has_diverged_step() && request.result().diverged_step() < 0) {
    return Invalid("result.diverged_step", "must be >= 0");
  }
  RETURN_IF_ERROR(
      CheckFinite("result.init_val_loss", request.result().has_init_val_loss(), request.result().init_val_loss()));
  RETURN_IF_ERROR(
      CheckFinite("result.unigram_loss", request.result().has_unigram_loss(), request.result().unigram_loss()));
  RETURN_IF_ERROR(CheckFinite("result.val_loss_progress", request.result().has_val_loss_progress(),
                              request.result().val_loss_progress()));
  return absl::OkStatus();
}

// ---- the sweep spec ----

absl::StatusOr<ValidSpec> ValidateSweepSpec(const v1::SweepSpec& spec) {
  RETURN_IF_ERROR(CheckScalarFields(spec));
  RETURN_IF_ERROR(CheckBase(spec.base()));
  RETURN_IF_ERROR(CheckAxisSizes(spec));
  const v1::TrainConfig probe = Probe(spec.base());
  RETURN_IF_ERROR(CheckMainAxisValues(spec, probe));
  ValidSpec valid;
  ASSIGN_OR_RETURN(valid.extra, ParseExtraAxes(spec, probe));
  ASSIGN_OR_RETURN(valid.trial_count, CheckGridSize(spec, valid.extra));
  return valid;
}

absl::Status CheckScalarFields(const v1::SweepSpec& spec) {
  if (spec.name().empty()) return Invalid("spec.name", "required");
  if (spec.name().size() > schema::kMaxNameLength) {
    return Invalid("spec.name", absl::StrCat("at most ", schema::kMaxNameLength, " characters"));
  }
  // PostgreSQL's text and jsonb cannot hold NUL characters.
  RETURN_IF_ERROR(CheckStoredText("spec.name", spec.name(), schema::kMaxNameLength));
  if (spec.max_attempts() < 0 || spec.max_attempts() > schema::kMaxMaxAttempts) {
    return Invalid("spec.max_attempts", absl::StrCat("must be in [1, ", schema::kMaxMaxAttempts, "] (0: default ",
                                                     schema::kDefaultMaxAttempts, ")"));
  }
  if (spec.max_interruptions() < 0 || spec.max_interruptions() > schema::kMaxMaxInterruptions) {
    return Invalid("spec.max_interruptions", absl::StrCat("must be in [1, ", schema::kMaxMaxInterruptions,
                                                          "] (0: default ", schema::kDefaultMaxInterruptions, ")"));
  }
  if (spec.priority() < -schema::kMaxPriority || spec.priority() > schema::kMaxPriority) {
    return Invalid("spec.priority", absl::StrCat("must be in [", -schema::kMaxPriority, ", ", schema::kMaxPriority, "]"));
  }
  if (spec.max_concurrent_trials() < 0) return Invalid("spec.max_concurrent_trials", "must be >= 0 (0: unlimited)");
  return absl::OkStatus();
}

v1::TrainConfig Probe(const v1::TrainConfig& base) {
  v1::TrainConfig c = base;
  c.set_placement(trainer::Schemes().front().name);
  c.set_lr(1e-3);
  c.set_warmup_steps(0);
  c.set_seed(0);
  return c;
}

absl::Status CheckBase(const v1::TrainConfig& base) {
  RETURN_IF_ERROR(CheckBaseStrings(base));
  return Within("spec.base", schema::ValidateTrainConfig(Probe(base)));
}

absl::Status CheckAxisSizes(const v1::SweepSpec& spec) {
  RETURN_IF_ERROR(CheckAxisSize("spec.placements", spec.placements()));
  RETURN_IF_ERROR(CheckAxisSize("spec.seeds", spec.seeds()));
  if (spec.has_boundary_search()) {
    if (spec.has_random_search()) return Invalid("spec.random_search", "must be unset when boundary_search is set");
    if (!spec.peak_lrs().empty()) {
      return Invalid("spec.peak_lrs", "must be empty when boundary_search is set (the search picks the lrs)");
    }
    RETURN_IF_ERROR(CheckAxisSize("spec.warmup_steps", spec.warmup_steps()));
    return CheckBoundarySearch(spec.boundary_search());
  }
  if (spec.has_random_search()) {
    if (!spec.warmup_steps().empty()) return Invalid("spec.warmup_steps", "must be empty when random_search is set");
    if (!spec.peak_lrs().empty()) return Invalid("spec.peak_lrs", "must be empty when random_search is set");
    return CheckRandomSearch(spec.random_search());
  }
  RETURN_IF_ERROR(CheckAxisSize("spec.warmup_steps", spec.warmup_steps()));
  return CheckAxisSize("spec.peak_lrs", spec.peak_lrs());
}

absl::Status CheckBoundarySearch(const v1::BoundarySearch& b) {
  const std::string where = "spec.boundary_search.";
  if (!std::isfinite(b.lr_min()) || b.lr_min() <= 0) {
    return Invalid(where + "lr_min", absl::StrCat("must be finite and > 0 (got ", ShortestDouble(b.lr_min()), ")"));
  }
  if (!std::isfinite(b.lr_max()) || b.lr_max() <= b.lr_min()) {
    return Invalid(where + "lr_max", absl::StrCat("must be finite and > lr_min (got ", ShortestDouble(b.lr_max()),
                                                  ", lr_min ", ShortestDouble(b.lr_min()), ")"));
  }
  if (b.resolution() != 0 && !(std::isfinite(b.resolution()) && b.resolution() > 1)) {
    return Invalid(where + "resolution", absl::StrCat("must be finite and > 1 (got ", ShortestDouble(b.resolution()),
                                                      "; 0: default ", schema::kDefaultBoundaryResolution, ")"));
  }
  if (b.initial_points() != 0 && (b.initial_points() < 2 || b.initial_points() > schema::kMaxBoundaryInitialPoints)) {
    return Invalid(where + "initial_points",
                   absl::StrCat("must be in [2, ", schema::kMaxBoundaryInitialPoints, "] (got ", b.initial_points(),
                                "; 0: one per decade plus one)"));
  }
  if (!std::isfinite(b.min_improvement()) || b.min_improvement() < 0) {
    return Invalid(where + "min_improvement",
                   absl::StrCat("must be finite and >= 0 (got ", ShortestDouble(b.min_improvement()), "; 0: default ",
                                schema::kDefaultMinImprovement, ")"));
  }
  if (b.has_max_val_loss() && !(std::isfinite(b.max_val_loss()) && b.max_val_loss() > 0)) {
    return Invalid(where + "max_val_loss",
                   absl::StrCat("must be finite and > 0 when set (got ", ShortestDouble(b.max_val_loss()), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckMainAxisValues(const v1::SweepSpec& spec, const v1::TrainConfig& probe) {
  RETURN_IF_ERROR(CheckPlacements(spec, probe));
  RETURN_IF_ERROR(CheckSeeds(spec, probe));
  if (spec.has_random_search()) return absl::OkStatus();
  RETURN_IF_ERROR(CheckWarmupSteps(spec, probe));
  return CheckPeakLrs(spec, probe);
}

void Apply(const AxisValue& v, v1::TrainConfig* config) {
  const auto* r = config->GetReflection();
  switch (v.field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: r->SetInt32(config, v.field, v.i); break;
    case FieldDescriptor::CPPTYPE_DOUBLE: r->SetDouble(config, v.field, v.d); break;
    case FieldDescriptor::CPPTYPE_BOOL: r->SetBool(config, v.field, v.i != 0); break;  // i: 0 or 1
    default: r->SetString(config, v.field, v.text); break;
  }
}

bool IsAxisField(const FieldDescriptor* f) {
  static const std::set<std::string> kExcluded = {"placement", "warmup_steps", "lr", "seed",
                                                  "threads", "device", "checkpoint_every"};
  if (f == nullptr || f->is_repeated() || kExcluded.contains(f->name())) return false;
  return f->cpp_type() == FieldDescriptor::CPPTYPE_INT32 ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL ||
         f->cpp_type() == FieldDescriptor::CPPTYPE_STRING;
}

absl::StatusOr<AxisValue> ParseAxisValue(const FieldDescriptor* f, const std::string& text, const std::string& where) {
  AxisValue v{f, text};
  RETURN_IF_ERROR(CheckStoredText(where, text, schema::kMaxStringFieldLength));
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_INT32) {
    if (!absl::SimpleAtoi(text, &v.i)) {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not an integer (", f->name(), ")"));
    }
    v.text = absl::StrCat(v.i);  // "02" and " 2" are 2
  } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_DOUBLE) {
    if (!absl::SimpleAtod(text, &v.d) || !std::isfinite(v.d)) {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not a finite number (", f->name(), ")"));
    }
    v.text = ShortestDouble(v.d);  // "0.50" is 0.5
  } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_BOOL) {
    if (text != "true" && text != "false") {
      return Invalid(where, absl::StrCat(QuoteForError(text), " is not true or false (", f->name(), ")"));
    }
    v.i = text == "true";  // a bool axis keeps its value in i
  } else if (text.empty()) {
    return Invalid(where, "must not be empty");
  }
  return v;
}

absl::StatusOr<std::vector<std::vector<AxisValue>>> ParseExtraAxes(const v1::SweepSpec& spec,
                                                                   const v1::TrainConfig& probe) {
  std::vector<std::vector<AxisValue>> extra;
  std::set<std::string> fields;
  for (int a = 0; a < spec.extra_axes_size(); ++a) {
    const v1::ExtraAxis& axis = spec.extra_axes(a);
    const std::string where = absl::StrCat("spec.extra_axes[", a, "]");
    const FieldDescriptor* f = v1::TrainConfig::descriptor()->FindFieldByName(axis.field());
    if (!IsAxisField(f)) {
      return Invalid(where + ".field",
                     absl::StrCat(QuoteForError(axis.field()), " cannot be an axis; allowed: ", AllowedAxisFields()));
    }
    if (!fields.insert(axis.field()).second) return Invalid(where + ".field", "duplicate axis " + axis.field());
    v1::TrainConfig axis_probe = probe;
    if (axis.field() == "mix_post_fraction") {
      RETURN_IF_ERROR(CheckMixFractionAxis(spec, where + ".field"));
      axis_probe.set_placement(trainer::PlacementName(trainer::Placement::kMix));
    }
    ASSIGN_OR_RETURN(std::vector<AxisValue> values, ParseExtraAxis(axis, f, where, axis_probe));
    extra.push_back(std::move(values));
  }
  return extra;
}

absl::Status AxisValues::Add(int index, const std::string& shown, const v1::TrainConfig& config) {
  const std::string where = absl::StrCat(axis_, "[", index, "]");
  absl::StatusOr<v1::TrainConfig> resolved = schema::ResolvedTrainConfig(config);  // also validates it
  if (!resolved.ok()) return Within(where, resolved.status());
  auto [it, inserted] = first_.emplace(resolved->SerializeAsString(), index);
  if (!inserted) {
    return Invalid(where, absl::StrCat("duplicate value: ", QuoteForError(shown), " is the same setting as ", axis_,
                                       "[", it->second, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> CheckGridSize(const v1::SweepSpec& spec, const std::vector<std::vector<AxisValue>>& extra) {
  constexpr int64_t kMax = schema::kMaxTrialsPerSweep;
  const bool random = spec.has_random_search();
  if (spec.has_boundary_search()) {
    // Limited by the most the lines can take; the coarse start is created now.
    int64_t lines = int64_t{spec.warmup_steps_size()} * spec.placements_size() * spec.seeds_size();
    for (const auto& values : extra) lines = std::min<int64_t>(lines * static_cast<int64_t>(values.size()), kMax + 1);
    const int64_t per_line = MaxBoundaryTrialsPerLine(spec.boundary_search());
    if (lines * per_line > kMax) {
      return Invalid("spec", absl::StrCat("the boundary search (placements x warmup_steps x seeds x extra_axes = ",
                                          lines > kMax ? absl::StrCat(kMax, "+") : absl::StrCat(lines),
                                          " lines, up to ", per_line, " trials each) may take ", lines * per_line,
                                          " trials; the limit is ", kMax));
    }
    return lines * schema::BoundarySettingsOf(spec.boundary_search()).initial_points;
  }
  const int64_t settings =
      random ? spec.random_search().samples() : int64_t{spec.warmup_steps_size()} * spec.peak_lrs_size();
  const int64_t total = settings * spec.placements_size() * spec.seeds_size();
  int64_t variants = 1;
  for (const auto& values : extra) {
    variants *= static_cast<int64_t>(values.size());
    if (variants > kMax) break;  // no overflow however many axes
  }
  if (variants > kMax || total * variants > kMax) {
    return Invalid("spec", absl::StrCat("the grid (placements x ",
                                        random ? "random_search.samples" : "warmup_steps x peak_lrs",
                                        " x seeds x extra_axes) has ", total * std::min<int64_t>(variants, kMax + 1),
                                        "+ trials; the limit is ", kMax));
  }
  return total * variants;
}

int64_t MaxBoundaryTrialsPerLine(const v1::BoundarySearch& search) {
  const schema::BoundarySettings s = schema::BoundarySettingsOf(search);
  const double widest = std::log(s.lr_max / s.lr_min) / (s.initial_points - 1);  // log-width of a coarse interval
  int64_t bisections = 0;
  for (double w = widest; w > std::log(s.resolution) * (1 + 1e-12) && bisections < 64; w /= 2) ++bisections;
  return s.initial_points + bisections;
}

absl::Status DistinctTrialConfigs::Add(int32_t index, const v1::TrainConfig& resolved, const std::string& described) {
  auto [seen, inserted] = first_.emplace(resolved.SerializeAsString(), index);
  if (inserted) return absl::OkStatus();
  return Invalid(field_, absl::StrCat("trials ", seen->second, " and ", index,
                                      " would have the same resolved config (placement=", resolved.placement(), ", ",
                                      described, ")"));
}

std::string ShortestDouble(double d) {
  for (int precision = 1; precision <= 17; ++precision) {
    std::string text = absl::StrFormat("%.*g", precision, d);
    double back = 0;
    if (absl::SimpleAtod(text, &back) && back == d) return text;
  }
  return absl::StrFormat("%.17g", d);
}

}  // namespace normsweep::scheduler
