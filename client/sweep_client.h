// The CLI's connection to SweepService: one channel, a deadline on every
// unary call, and errors that say what the user can do about them.
// Not thread-safe; the CLI uses it from its main thread.
#ifndef NORMSWEEP_CLIENT_SWEEP_CLIENT_H_
#define NORMSWEEP_CLIENT_SWEEP_CLIENT_H_

#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"

namespace normsweep::client {

class SweepClient {
 public:
  // api_token: sent with every call when not empty (common/api_token.h).
  // credentials: the channel's (common/tls.h); null: plaintext.
  explicit SweepClient(std::string address, absl::Duration deadline = absl::Seconds(15), std::string api_token = "",
                       std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // Every unary call is made again a few times while the scheduler is
  // unreachable or stopping (UNAVAILABLE, or CANCELLED: a scheduler cuts the
  // calls in flight when it stops; this client never cancels one). Each is
  // safe to repeat: reads, CancelSweep, and SubmitSweep with its request_id,
  // which the scheduler deduplicates, so a retried submit never creates two
  // sweeps.
  // allow_warnings: store the sweep despite the scheduler's warnings
  // (without it, a sweep with warnings is FAILED_PRECONDITION naming them).
  absl::StatusOr<v1::SubmitSweepResponse> Submit(const v1::SweepSpec& spec, const std::string& request_id,
                                                 bool validate_only, bool allow_warnings = false);
  absl::StatusOr<v1::Sweep> GetSweep(int64_t sweep_id);
  absl::StatusOr<std::vector<v1::Sweep>> ListSweeps(v1::SweepState state);
  absl::StatusOr<v1::Sweep> CancelSweep(int64_t sweep_id);
  absl::StatusOr<std::vector<v1::Trial>> ListTrials(int64_t sweep_id);  // every page
  absl::StatusOr<v1::GetTrialResponse> GetTrial(int64_t trial_id);
  // By id; superseded registrations (earlier runs of a restarted worker)
  // only when include_superseded.
  absl::StatusOr<std::vector<v1::Worker>> ListWorkers(bool live_only, bool include_superseded = false);
  // The analysis views' rows (tolerance 0: the view's default).
  absl::StatusOr<v1::GetSweepAnalysisResponse> GetSweepAnalysis(int64_t sweep_id, double near_best_tolerance = 0);
  // Streams WatchSweep events to on_event until the sweep ends. A broken
  // stream (UNAVAILABLE, or CANCELLED by a stopping scheduler) is reopened
  // (the first event of a new stream carries every trial).
  absl::Status Watch(int64_t sweep_id, const std::function<void(const v1::WatchSweepEvent&)>& on_event);
  // Streams ExportSweep's chunks to on_chunk, the last one (chunk.last())
  // included; on_chunk returning false stops the export (the call is
  // cancelled) and Export returns CANCELLED. A stream broken mid-way
  // (UNAVAILABLE, or CANCELLED by a stopping scheduler) is reopened from the
  // last chunk's cursor, so that on_chunk gets no row twice and none
  // missing; the reopened stream's first chunk repeats the columns with no
  // rows, or with the rows that follow.
  absl::Status Export(const v1::ExportSweepRequest& request,
                      const std::function<bool(const v1::ExportChunk&)>& on_chunk);

  const std::string& address() const { return address_; }

 private:
  // The call's status for the user; ctx is the call's (its trailing
  // metadata tells a scheduler whose database is down from one not reached).
  absl::Status ToStatus(const grpc::Status& status, const grpc::ClientContext& ctx) const;
  std::unique_ptr<grpc::ClientContext> Context() const;
  // One unary call with the retries above; its status for the user.
  template <typename Request, typename Response>
  absl::Status Call(grpc::Status (v1::SweepService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
                    const Request& request, Response* response);
  // Before a retry: until the channel is connected again, at most pause
  // (a plain pause when it is connected).
  void PauseBeforeRetry(absl::Duration pause) const;

  std::string address_;
  absl::Duration deadline_;
  std::string api_token_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> stub_;
};

// A fresh idempotency key for SubmitSweep.
std::string NewRequestId();

}  // namespace normsweep::client

#endif  // NORMSWEEP_CLIENT_SWEEP_CLIENT_H_
