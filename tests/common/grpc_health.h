// grpc.health.v1.Health/Check over a generic stub (no generated health
// code needed): the call's status and the reply's bytes. An empty request
// asks about the whole server; SERVING is the reply {status: 1}, bytes 08 01.
#ifndef NORMSWEEP_TESTS_COMMON_GRPC_HEALTH_H_
#define NORMSWEEP_TESTS_COMMON_GRPC_HEALTH_H_

#include <grpcpp/generic/generic_stub.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace normsweep::testing {

inline grpc::Status CallHealthCheck(const std::shared_ptr<grpc::Channel>& channel, std::string* reply_bytes) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  stub.UnaryCall(&ctx, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   std::lock_guard<std::mutex> lock(mu);
                   status = s;
                   done = true;
                   cv.notify_one();
                 });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  reply_bytes->clear();
  std::vector<grpc::Slice> slices;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const auto& s : slices) reply_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return status;
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_GRPC_HEALTH_H_
