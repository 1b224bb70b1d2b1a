// Streaming exchanges over a generic stub, as grpcurl makes them: one
// grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo exchange, or
// any other streaming method's with raw bytes.
#ifndef NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_
#define NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_

#include <grpcpp/generic/generic_stub.h>

#include <memory>
#include <string>
#include <vector>

namespace normsweep::testing {

// One request's bytes out on a streaming method ("/package.Service/Method"),
// the first reply's bytes back (empty when none came), then half-close; the
// call's status. Raw bytes, so that tests can also send what no stub would.
inline grpc::Status CallRawStream(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                                  const std::string& request_bytes, std::string* reply_bytes) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  void* tag = nullptr;
  bool ok = false;
  auto call = stub.PrepareCall(&ctx, method, &cq);
  auto step = [&](void* t) { return cq.Next(&tag, &ok) && ok && tag == t; };
  reply_bytes->clear();
  grpc::Status status(grpc::StatusCode::UNKNOWN, "reflection exchange failed before its status");
  call->StartCall(reinterpret_cast<void*>(1));
  if (step(reinterpret_cast<void*>(1))) {
    grpc::Slice request_slice(request_bytes);
    grpc::ByteBuffer request(&request_slice, 1);
    call->Write(request, reinterpret_cast<void*>(2));
    grpc::ByteBuffer response;
    if (step(reinterpret_cast<void*>(2))) {
      call->Read(&response, reinterpret_cast<void*>(3));
      std::vector<grpc::Slice> slices;
      if (step(reinterpret_cast<void*>(3)) && response.Dump(&slices).ok()) {
        for (const auto& s : slices) reply_bytes->append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    call->WritesDone(reinterpret_cast<void*>(4));
    cq.Next(&tag, &ok);
    call->Finish(&status, reinterpret_cast<void*>(5));
    cq.Next(&tag, &ok);
  }
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return status;
}

inline grpc::Status CallReflection(const std::shared_ptr<grpc::Channel>& channel, const std::string& request_bytes,
                                   std::string* reply_bytes) {
  return CallRawStream(channel, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", request_bytes,
                       reply_bytes);
}

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_
