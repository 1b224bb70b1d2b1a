// The scheduler's gRPC server in this process, on a free loopback port, over
// a store the fixture owns: the base of the tests that talk to the real
// services over real gRPC without starting a process (the API token, TLS,
// health checking, every validation rule).
#ifndef NORMSWEEP_TESTS_COMMON_IN_PROCESS_SCHEDULER_H_
#define NORMSWEEP_TESTS_COMMON_IN_PROCESS_SCHEDULER_H_

#include <grpcpp/channel.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "db/store.h"
#include "gtest/gtest.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"

namespace normsweep::testing {

// 127.0.0.1, a port the system picks, no /metrics.
scheduler::SchedulerServerOptions LoopbackServerOptions();

// A sweep of one small trial: Pre-LN, d_model 32, 2 heads, 10 steps,
// warm-up 0, lr 1e-3, seed 0.
v1::SweepSpec OneTrialSpec(const std::string& name);

// Registers worker "w1" (one cpu) through `client` (the worker's
// GrpcSchedulerClient, or any with its RegisterWorker and LeaseTrial) and
// leases a trial with it; *worker_id is the registered id.
template <typename WorkerClient>
absl::StatusOr<v1::LeaseTrialResponse> RegisterAndLease(WorkerClient& client, int64_t* worker_id) {
  v1::RegisterWorkerRequest reg;
  reg.set_name("w1");
  reg.add_devices("cpu");
  auto registered = client.RegisterWorker(reg);
  if (!registered.ok()) return registered.status();
  *worker_id = registered->worker_id();
  v1::LeaseTrialRequest lease;
  lease.set_worker_id(*worker_id);
  return client.LeaseTrial(lease);
}

class InProcessSchedulerTest : public ::testing::Test {
 protected:
  void TearDown() override;  // shuts the server down

  // Starts the server on store_ (a MemoryStore unless the test put another
  // there first); address_, channel_ (plaintext) and the stubs lead to it.
  // Fails fatally: call it through ASSERT_NO_FATAL_FAILURE outside SetUp.
  void StartServer(const scheduler::SchedulerServerOptions& options = LoopbackServerOptions());

  // Declared before server_: the server goes first.
  std::unique_ptr<db::Store> store_;
  std::unique_ptr<scheduler::SchedulerServer> server_;
  std::string address_;  // 127.0.0.1:PORT
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::SweepService::Stub> sweeps_;
  std::unique_ptr<v1::WorkerService::Stub> workers_;
};

}  // namespace normsweep::testing

#endif  // NORMSWEEP_TESTS_COMMON_IN_PROCESS_SCHEDULER_H_
