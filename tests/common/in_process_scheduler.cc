#include "tests/common/in_process_scheduler.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "db/memory_store.h"

namespace normsweep::testing {

scheduler::SchedulerServerOptions LoopbackServerOptions() {
  scheduler::SchedulerServerOptions options;
  options.grpc_address = "127.0.0.1:0";
  options.metrics_address = "";
  return options;
}

v1::SweepSpec OneTrialSpec(const std::string& name) {
  v1::SweepSpec s;
  s.set_name(name);
  s.mutable_base()->set_d_model(32);
  s.mutable_base()->set_heads(2);
  s.mutable_base()->set_steps(10);
  s.add_placements("pre");
  s.add_warmup_steps(0);
  s.add_peak_lrs(1e-3);
  s.add_seeds(0);
  return s;
}

void InProcessSchedulerTest::TearDown() {
  if (server_) server_->Shutdown();
}

void InProcessSchedulerTest::StartServer(const scheduler::SchedulerServerOptions& options) {
  if (store_ == nullptr) store_ = std::make_unique<db::MemoryStore>();
  auto server = scheduler::SchedulerServer::Start(*store_, RealClock::Get(), options);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
  address_ = absl::StrCat("127.0.0.1:", server_->grpc_port());
  channel_ = grpc::CreateChannel(address_, grpc::InsecureChannelCredentials());
  sweeps_ = v1::SweepService::NewStub(channel_);
  workers_ = v1::WorkerService::NewStub(channel_);
}

}  // namespace normsweep::testing
