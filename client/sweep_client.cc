#include "client/sweep_client.h"

#include "common/api_token.h"
#include "common/grpc_status.h"
#include "common/scheduler_channel.h"
#include "common/status_macros.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace normsweep::client {
namespace {
constexpr int kRetries = 3;

// A scheduler that could not be reached, or that cut the call as it stopped.
bool WorthRetrying(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::UNAVAILABLE || s.error_code() == grpc::StatusCode::CANCELLED;
}

}  // namespace

SweepClient::SweepClient(std::string address, absl::Duration deadline, std::string api_token,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(std::move(address)),
      deadline_(deadline),
      api_token_(std::move(api_token)),
      channel_(SchedulerChannel(address_, std::move(credentials))),
      stub_(v1::SweepService::NewStub(channel_)) {}

void SweepClient::PauseBeforeRetry(absl::Duration pause) const {
  // Without a connection, wait for one (WaitForConnected polls the channel,
  // so its reconnection attempts finish; a sleep would leave them to gRPC's
  // backup poller, every 5 s) and retry as soon as it is there.
  if (channel_->GetState(/*try_to_connect=*/true) != GRPC_CHANNEL_READY) {
    channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + pause));
  } else {
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(pause));
  }
}

std::unique_ptr<grpc::ClientContext> SweepClient::Context() const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline_));
  AttachApiToken(ctx.get(), api_token_);
  return ctx;
}

absl::Status SweepClient::ToStatus(const grpc::Status& s, const grpc::ClientContext& ctx) const {
  if (s.ok()) return absl::OkStatus();
  const auto code = static_cast<absl::StatusCode>(s.error_code());
  // The scheduler answered, and says its database is down (scheduler/grpc_services.h).
  if (code == absl::StatusCode::kUnavailable && ctx.GetServerTrailingMetadata().count(kDatabaseUnavailableKey) > 0) {
    return absl::Status(code, absl::StrCat("the scheduler at ", address_,
                                           " is running, but its PostgreSQL database is unavailable (the "
                                           "scheduler keeps retrying; its log says why): ",
                                           s.error_message()));
  }
  if (code == absl::StatusCode::kCancelled) {
    return absl::Status(code, absl::StrCat("the scheduler at ", address_,
                                           " cut the call as it stopped, and did not answer again: ",
                                           s.error_message()));
  }
  if (code == absl::StatusCode::kUnavailable || code == absl::StatusCode::kDeadlineExceeded) {
    return absl::Status(code, absl::StrCat("cannot reach the scheduler at ", address_,
                                           " (is normsweep-scheduler running? set --scheduler or "
                                           "NORMSWEEP_SCHEDULER): ",
                                           s.error_message()));
  }
  if (s.error_message().empty()) {
    // e.g. UNIMPLEMENTED from an older scheduler that lacks the call.
    return absl::Status(code, absl::StrCat("the scheduler at ", address_, " answered ",
                                           absl::StatusCodeToString(code),
                                           code == absl::StatusCode::kUnimplemented ? " (an older normsweep-scheduler?)" : ""));
  }
  return absl::Status(code, s.error_message());
}

template <typename Request, typename Response>
absl::Status SweepClient::Call(grpc::Status (v1::SweepService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                                              Response*),
                               const Request& request, Response* response) {
  grpc::Status status;
  std::unique_ptr<grpc::ClientContext> ctx;
  for (int attempt = 0; attempt < kRetries; ++attempt) {
    if (attempt > 0) PauseBeforeRetry(absl::Milliseconds(300 << attempt));
    ctx = Context();
    status = (stub_.get()->*method)(ctx.get(), request, response);
    if (!WorthRetrying(status)) break;
  }
  return ToStatus(status, *ctx);
}

absl::StatusOr<v1::SubmitSweepResponse> SweepClient::Submit(const v1::SweepSpec& spec, const std::string& request_id,
                                                            bool validate_only, bool allow_warnings) {
  v1::SubmitSweepRequest req;
  req.set_request_id(request_id);
  *req.mutable_spec() = spec;
  req.set_validate_only(validate_only);
  req.set_allow_warnings(allow_warnings);
  v1::SubmitSweepResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::SubmitSweep, req, &resp));
  return resp;
}

absl::StatusOr<v1::Sweep> SweepClient::GetSweep(int64_t sweep_id) {
  v1::GetSweepRequest req;
  req.set_sweep_id(sweep_id);
  v1::GetSweepResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::GetSweep, req, &resp));
  return resp.sweep();
}

absl::StatusOr<std::vector<v1::Sweep>> SweepClient::ListSweeps(v1::SweepState state) {
  std::vector<v1::Sweep> out;
  v1::ListSweepsRequest req;
  req.set_state(state);
  do {
    v1::ListSweepsResponse resp;
    RETURN_IF_ERROR(Call(&v1::SweepService::Stub::ListSweeps, req, &resp));
    out.insert(out.end(), resp.sweeps().begin(), resp.sweeps().end());
    req.set_page_token(resp.next_page_token());
  } while (!req.page_token().empty());
  return out;
}

absl::StatusOr<v1::Sweep> SweepClient::CancelSweep(int64_t sweep_id) {
  v1::CancelSweepRequest req;
  req.set_sweep_id(sweep_id);
  v1::CancelSweepResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::CancelSweep, req, &resp));
  return resp.sweep();
}

absl::StatusOr<std::vector<v1::Trial>> SweepClient::ListTrials(int64_t sweep_id) {
  std::vector<v1::Trial> out;
  v1::ListTrialsRequest req;
  req.set_sweep_id(sweep_id);
  do {
    v1::ListTrialsResponse resp;
    RETURN_IF_ERROR(Call(&v1::SweepService::Stub::ListTrials, req, &resp));
    out.insert(out.end(), resp.trials().begin(), resp.trials().end());
    req.set_page_token(resp.next_page_token());
  } while (!req.page_token().empty());
  return out;
}

absl::StatusOr<v1::GetTrialResponse> SweepClient::GetTrial(int64_t trial_id) {
  v1::GetTrialRequest req;
  req.set_trial_id(trial_id);
  v1::GetTrialResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::GetTrial, req, &resp));
  return resp;
}

absl::StatusOr<std::vector<v1::Worker>> SweepClient::ListWorkers(bool live_only, bool include_superseded) {
  v1::ListWorkersRequest req;
  req.set_live_only(live_only);
  req.set_include_superseded(include_superseded);
  v1::ListWorkersResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::ListWorkers, req, &resp));
  return std::vector<v1::Worker>(resp.workers().begin(), resp.workers().end());
}

absl::StatusOr<v1::GetSweepAnalysisResponse> SweepClient::GetSweepAnalysis(int64_t sweep_id,
                                                                           double near_best_tolerance) {
  v1::GetSweepAnalysisRequest req;
  req.set_sweep_id(sweep_id);
  req.set_near_best_tolerance(near_best_tolerance);
  v1::GetSweepAnalysisResponse resp;
  RETURN_IF_ERROR(Call(&v1::SweepService::Stub::GetSweepAnalysis, req, &resp));
  return resp;
}

absl::Status SweepClient::Watch(int64_t sweep_id,
                                const std::function<void(const v1::WatchSweepEvent&)>& on_event) {
  v1::WatchSweepRequest req;
  req.set_sweep_id(sweep_id);
  int failures = 0;
  while (true) {
    grpc::ClientContext ctx;  // no deadline: a sweep may run for days
    AttachApiToken(&ctx, api_token_);
    std::unique_ptr<grpc::ClientReader<v1::WatchSweepEvent>> reader = stub_->WatchSweep(&ctx, req);
    v1::WatchSweepEvent event;
    bool got_any = false;
    while (reader->Read(&event)) {
      got_any = true;
      failures = 0;
      on_event(event);
    }
    grpc::Status s = reader->Finish();
    if (s.ok()) return absl::OkStatus();
    // Reconnect after a scheduler restart; give up when it stays away.
    if (!WorthRetrying(s) || (!got_any && ++failures > 5)) return ToStatus(s, ctx);
    PauseBeforeRetry(absl::Milliseconds(500 * std::min(failures + 1, 6)));
  }
}

absl::Status SweepClient::Export(const v1::ExportSweepRequest& request,
                                 const std::function<bool(const v1::ExportChunk&)>& on_chunk) {
  v1::ExportSweepRequest req = request;
  int failures = 0;
  while (true) {
    grpc::ClientContext ctx;  // no deadline: an export of a large sweep, or one that follows, may be long
    AttachApiToken(&ctx, api_token_);
    std::unique_ptr<grpc::ClientReader<v1::ExportChunk>> reader = stub_->ExportSweep(&ctx, req);
    v1::ExportChunk chunk;
    bool got_any = false;
    bool last = false;
    bool stopped = false;
    while (reader->Read(&chunk)) {
      got_any = true;
      failures = 0;
      if (!on_chunk(chunk)) {
        stopped = true;
        ctx.TryCancel();
        break;
      }
      req.set_since(chunk.cursor());  // a reopened stream continues after this chunk
      if (chunk.last()) last = true;
    }
    grpc::Status s = reader->Finish();
    if (stopped) return absl::CancelledError("export stopped");
    if (s.ok()) {
      if (last) return absl::OkStatus();
      return absl::InternalError(absl::StrCat("the scheduler at ", address_,
                                              " ended the export without its last chunk"));
    }
    if (!WorthRetrying(s) || (!got_any && ++failures > 5)) return ToStatus(s, ctx);
    PauseBeforeRetry(absl::Milliseconds(500 * std::min(failures + 1, 6)));
  }
}

std::string NewRequestId() {
  std::random_device rd;
  return absl::StrFormat("cli-%08x%08x%08x", rd(), rd(), rd());
}

}  // namespace normsweep::client
