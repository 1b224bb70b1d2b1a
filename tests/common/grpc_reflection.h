// One grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo exchange
// over a generic stub, as grpcurl makes it: the request's serialized bytes
// out, the first reply's bytes back, then half-close; the call's status.
#ifndef NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_
#define NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_

#include <grpcpp/generic/generic_stub.h>

#include <memory>
#include <string>
#include <vector>

namespace normsweep::testing {

inline grpc::Status CallReflection(const std::shared_ptr<grpc::Channel>& channel, const std::string& request_bytes,
                                   std::string* reply_bytes) {
  grpc::GenericStub stub(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  void* tag = nullptr;
  bool ok = false;
  auto call = stub.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
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

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_GRPC_REFLECTION_H_
