// The channel the worker and the CLI open to the scheduler, with one
// reconnect back-off for both. gRPC's default back-off grows to 2 minutes;
// here attempts are 100 ms apart at first, growing to 500 ms (x1.6, +-20%
// jitter), so a scheduler that is listening again is tried within about
// 0.6 s. GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is not a back-off but the connect
// timeout of each attempt (the attempt's deadline is the larger of it and
// the next back-off): 2 s, so that a TLS handshake with a scheduler that
// hundreds of workers reconnect to at once is not cut off. Attempts also
// need something polling the channel (worker/scheduler_client.cc,
// AwaitConnection).
#ifndef NORMSWEEP_COMMON_SCHEDULER_CHANNEL_H_
#define NORMSWEEP_COMMON_SCHEDULER_CHANNEL_H_

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <memory>
#include <string>

namespace normsweep {

// credentials null: plaintext.
inline std::shared_ptr<grpc::Channel> SchedulerChannel(const std::string& target,
                                                       std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  return grpc::CreateCustomChannel(target, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(),
                                   args);
}

}  // namespace normsweep

#endif  // NORMSWEEP_COMMON_SCHEDULER_CHANNEL_H_
