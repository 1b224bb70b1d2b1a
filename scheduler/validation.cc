#include "scheduler/validation.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "db/store.h"
#include "proto/schema/api_limits.h"
#include "proto/schema/interruptions.h"
#include "trainer/settings/config.h"

namespace normsweep::scheduler {
namespace {

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

}  // namespace

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

absl::StatusOr<ValidSpec> ValidateSubmitSweep(const v1::SubmitSweepRequest& request) {
  RETURN_IF_ERROR(CheckStoredText("request_id", request.request_id(), schema::kMaxRequestIdLength));
  return ValidSpec::Parse(request.spec());
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

}  // namespace normsweep::scheduler
