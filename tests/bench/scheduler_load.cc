// Scheduler load generator (a benchmark program, not a test).
//
// N simulated workers (default 64), each on its own gRPC channel, run trial
// lifecycles against normsweep-scheduler: LeaseTrial, 10 ReportProgress
// batches of 10 steps (lr, train_loss, grad_norm, tokens_per_s; val_loss
// every --val_every steps), FinishTrial. By default it starts a throwaway
// PostgreSQL and the normsweep-scheduler built beside it, as its own process
// on a loopback port (--in_process: a scheduler in this process instead);
// --scheduler points it at a running one (whose database must be reachable
// for the final row count only when started here).
//
// Prints trial lifecycles/s, metric points stored/s and the lease latency
// (client-observed round trip) p50/p99/max.
//
// --tls runs the same load over TLS: throwaway certificates (openssl, as the
// tests make them) for the scheduler started here, its CA for the simulated
// workers; with --scheduler, --tls_ca names the CA of that scheduler's
// certificate instead.
#include <grpcpp/alarm.h>
#include <grpcpp/completion_queue.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/clock.h"
#include "common/tls.h"
#include "db/memory_store.h"
#include "db/pg_connection.h"
#include "db/postgres_store.h"
#include "normsweep/v1/sweep_service.grpc.pb.h"
#include "normsweep/v1/worker_service.grpc.pb.h"
#include "scheduler/scheduler_server.h"
#include "tests/common/postgres_instance.h"
#include "tests/common/subprocess.h"
#include "tests/common/test_certificates.h"

ABSL_FLAG(int, workers, 64, "Simulated workers (one gRPC channel each)");
ABSL_FLAG(bool, lean_client, true,
          "Client channels without BDP probing, channelz, retries and the full filter stack");
ABSL_FLAG(int, client_threads, 1, "Threads driving the simulated workers' asynchronous calls");
ABSL_FLAG(int, trials, 10000, "Trials to run (one sweep per 10,000)");
ABSL_FLAG(int, batches, 10, "ReportProgress batches per trial");
ABSL_FLAG(int, steps_per_batch, 10, "Metric points per batch");
ABSL_FLAG(int, val_every, 0,
          "Also set val_loss on every step divisible by this, as an evaluation would (0: never; "
          "tests/bench/export_bench.py uses 10)");
ABSL_FLAG(std::string, scheduler, "", "host:port of a running scheduler (default: start one here)");
ABSL_FLAG(bool, durable, false, "Throwaway PostgreSQL with fsync and synchronous_commit on");
ABSL_FLAG(bool, pg_stats, false, "Print the costliest statements (pg_stat_statements) at the end");
ABSL_FLAG(std::string, scheduler_binary, NORMSWEEP_SCHEDULER_BINARY,
          "The normsweep-scheduler to start as a separate process (default: the one built with this program)");
ABSL_FLAG(bool, in_process, false,
          "Run the scheduler in this process instead (gRPC's client and server then share one poller pool, "
          "whose threads hand every network event to each other: slower than two processes)");
ABSL_FLAG(double, rate, 0,
          "Start at most this many lifecycles per second in total (0: as fast as the workers go); "
          "below saturation, lease latency is service time rather than queueing");
ABSL_FLAG(std::vector<std::string>, pg_settings, {},
          "Extra settings for the throwaway PostgreSQL, e.g. autovacuum=off,wal_level=minimal");
ABSL_FLAG(bool, memory_store, false,
          "Use the in-memory store (measures gRPC and scheduler overhead only; implies --in_process)");
ABSL_FLAG(int, db_pool_size, 16, "Database connections of the in-process scheduler");
ABSL_FLAG(double, timeline, 0,
          "Also print how many lifecycles ended in each interval of this many seconds (0: no timeline)");
ABSL_FLAG(bool, tls, false, "TLS between the simulated workers and the scheduler (throwaway certificates)");
ABSL_FLAG(std::string, tls_ca, "", "With --scheduler: the CA of its TLS certificate (implies --tls)");
ABSL_FLAG(bool, progress_stream, true,
          "Report progress over one StreamProgress stream per worker, as normsweep-worker does "
          "(false: a ReportProgress call per batch)");

namespace normsweep {
namespace {

struct WorkerResult {
  std::vector<double> lease_ms;
  std::vector<absl::Time> lease_at;
  std::vector<absl::Time> finished_at;  // each lifecycle's end (FinishTrial answered)
  absl::Time drained_at = absl::InfiniteFuture();  // a lease first found the queue empty
  int lifecycles = 0;
  int64_t points = 0;
  std::string error;
};

// Paces lifecycle starts across all workers: the n-th start is not before
// start + n / rate.
class Pacer {
 public:
  Pacer(double rate, absl::Time start) : rate_(rate), start_(start) {}
  // When the next lifecycle may start (the past when unpaced).
  absl::Time Next() {
    if (rate_ <= 0) return absl::InfinitePast();
    const int64_t n = next_.fetch_add(1);
    return start_ + absl::Seconds(n / rate_);
  }

 private:
  const double rate_;
  const absl::Time start_;
  std::atomic<int64_t> next_{0};
};

// One simulated worker: a state machine over asynchronous unary calls on its
// own channel. All workers share one completion queue, driven by
// --client_threads threads, so the load generator spends its CPU on gRPC
// calls rather than on switching between 64 blocked threads (the box it
// measures has 2 cores). A worker has at most one call in flight, so its
// state is only touched by the thread that took its completion.
class SimWorker {
 public:
  SimWorker(const std::string& target, const std::shared_ptr<grpc::ChannelCredentials>& credentials, int index,
            int batches, int steps_per_batch, Pacer* pacer, grpc::CompletionQueue* cq, WorkerResult* out,
            std::atomic<int>* running)
      : index_(index), batches_(batches), steps_per_batch_(steps_per_batch), pacer_(pacer), cq_(cq), out_(out),
        running_(running) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own, like a real worker
    if (absl::GetFlag(FLAGS_lean_client)) {
      // The simulated workers share the box they measure: spend as little
      // as gRPC allows on the client side (the calls are the same).
      args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
      args.SetInt(GRPC_ARG_ENABLE_CHANNELZ, 0);
      args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
      args.SetInt(GRPC_ARG_MINIMAL_STACK, 1);
    }
    stub_ = v1::WorkerService::NewStub(grpc::CreateCustomChannel(target, credentials, args));
  }

  void Start() {
    v1::RegisterWorkerRequest reg;
    reg.set_name(absl::StrCat("load-", index_));
    reg.add_devices("cpu");
    state_ = State::kRegister;
    NewContext();
    auto rpc = stub_->AsyncRegisterWorker(ctx_.get(), reg, cq_);
    rpc->Finish(&registered_, &status_, this);
  }

  // A completion (call finished, stream operation done, or the pacing alarm
  // fired); ok is the completion queue's verdict on stream operations.
  void Proceed(bool ok) {
    switch (state_) {
      case State::kRegister:
        if (!status_.ok()) return Fail("RegisterWorker: ");
        return Lease();
      case State::kPacing:
        return SendLease();
      case State::kLease:
        out_->lease_ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - lease_start_));
        out_->lease_at.push_back(lease_start_);
        if (!status_.ok()) return Fail("LeaseTrial: ");
        if (!leased_.leased()) {
          out_->drained_at = absl::Now();
          return CloseStreamThenDone();
        }
        batch_ = 0;
        return SendProgress();
      case State::kProgress:
        if (!status_.ok()) return Fail("ReportProgress: ");
        return Reported();
      case State::kStreamOpen:
        if (!ok) return StreamBroken();
        return WriteProgress();
      case State::kStreamWrite:
        if (!ok) return StreamBroken();
        state_ = State::kStreamRead;
        stream_->Read(&progress_response_, this);
        return;
      case State::kStreamRead:
        if (!ok) return StreamBroken();
        return Reported();
      case State::kStreamBroken:
        stream_.reset();
        return Fail("StreamProgress: ");
      case State::kStreamClosing:
        state_ = State::kStreamClosed;
        stream_->Finish(&status_, this);
        return;
      case State::kStreamClosed:
        stream_.reset();
        return Done();
      case State::kFinish:
        if (!status_.ok()) return Fail("FinishTrial: ");
        ++out_->lifecycles;
        out_->finished_at.push_back(absl::Now());
        return Lease();
      case State::kDone:
        return;
    }
  }

 private:
  enum class State {
    kRegister, kPacing, kLease, kProgress, kFinish, kDone,
    // StreamProgress: opening, a request written, its answer read, broken
    // (collecting the status), half-closed, finished.
    kStreamOpen, kStreamWrite, kStreamRead, kStreamBroken, kStreamClosing, kStreamClosed
  };

  void NewContext() { ctx_ = std::make_unique<grpc::ClientContext>(); }

  void Lease() {
    if (absl::Time at = pacer_->Next(); at > absl::Now()) {
      state_ = State::kPacing;
      alarm_ = std::make_unique<grpc::Alarm>();  // the last one has fired
      alarm_->Set(cq_, absl::ToChronoTime(at), this);
      return;
    }
    SendLease();
  }

  void SendLease() {
    state_ = State::kLease;
    v1::LeaseTrialRequest lease;
    lease.set_worker_id(registered_.worker_id());
    leased_.Clear();
    NewContext();
    lease_start_ = absl::Now();
    stub_->AsyncLeaseTrial(ctx_.get(), lease, cq_)->Finish(&leased_, &status_, this);
  }

  void SendProgress() {
    const v1::Trial& trial = leased_.trial();
    v1::ReportProgressRequest& progress = progress_;
    progress.Clear();
    progress.set_worker_id(registered_.worker_id());
    progress.set_trial_id(trial.id());
    progress.set_attempt(trial.attempts());
    for (int s = 0; s < steps_per_batch_; ++s) {
      const int step = batch_ * steps_per_batch_ + s + 1;
      v1::MetricPoint* p = progress.add_points();
      p->set_step(step);
      p->set_lr(1e-3 * std::min(1.0, step / 50.0));
      p->set_train_loss(5.5 / (1 + 0.01 * step));
      p->set_grad_norm(1.0 + 0.001 * step);
      p->set_tokens_per_s(25000);
      if (val_every_ > 0 && step % val_every_ == 0) p->set_val_loss(5.6 / (1 + 0.01 * step));
    }
    if (!absl::GetFlag(FLAGS_progress_stream)) {
      state_ = State::kProgress;
      NewContext();
      stub_->AsyncReportProgress(ctx_.get(), progress, cq_)->Finish(&progress_response_, &status_, this);
      return;
    }
    if (stream_ == nullptr) {  // the worker's stream, kept open across its trials
      state_ = State::kStreamOpen;
      stream_ctx_ = std::make_unique<grpc::ClientContext>();
      // Prepared, then started: with several --client_threads, the opening's
      // completion can be taken by another thread before an Async...() call
      // would have returned the stream to assign.
      stream_ = stub_->PrepareAsyncStreamProgress(stream_ctx_.get(), cq_);
      stream_->StartCall(this);
      return;
    }
    WriteProgress();
  }

  void WriteProgress() {
    state_ = State::kStreamWrite;
    stream_->Write(progress_, this);
  }

  void Reported() {
    out_->points += steps_per_batch_;
    if (++batch_ < batches_) return SendProgress();
    SendFinish();
  }

  // A stream operation failed: the server ended the stream; its status says why.
  void StreamBroken() {
    state_ = State::kStreamBroken;
    stream_->Finish(&status_, this);
  }

  void CloseStreamThenDone() {
    if (stream_ == nullptr) return Done();
    state_ = State::kStreamClosing;
    stream_->WritesDone(this);
  }

  void SendFinish() {
    state_ = State::kFinish;
    const v1::Trial& trial = leased_.trial();
    v1::FinishTrialRequest finish;
    finish.set_worker_id(registered_.worker_id());
    finish.set_trial_id(trial.id());
    finish.set_attempt(trial.attempts());
    finish.set_outcome(v1::TRIAL_SUCCEEDED);
    finish.mutable_result()->set_final_val_loss(2.0);
    finish.mutable_result()->set_final_train_loss(1.9);
    finish.mutable_result()->set_init_val_loss(5.55);  // l0, as normsweep-worker sends it from the step-0 evaluation
    finish.mutable_result()->set_tokens_per_s(25000);
    NewContext();
    stub_->AsyncFinishTrial(ctx_.get(), finish, cq_)->Finish(&finish_response_, &status_, this);
  }

  void Fail(const std::string& what) {
    out_->error = what + status_.error_message();
    Done();
  }

  void Done() {
    state_ = State::kDone;
    running_->fetch_sub(1);
  }

  const int index_, batches_, steps_per_batch_;
  const int val_every_ = absl::GetFlag(FLAGS_val_every);
  Pacer* const pacer_;
  grpc::CompletionQueue* const cq_;
  WorkerResult* const out_;
  std::atomic<int>* const running_;
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientContext> stream_ctx_;
  std::unique_ptr<grpc::ClientAsyncReaderWriter<v1::ReportProgressRequest, v1::ReportProgressResponse>> stream_;
  std::unique_ptr<grpc::Alarm> alarm_;
  grpc::Status status_;
  State state_ = State::kRegister;
  int batch_ = 0;
  absl::Time lease_start_;
  v1::RegisterWorkerResponse registered_;
  v1::LeaseTrialResponse leased_;
  v1::ReportProgressRequest progress_;
  v1::ReportProgressResponse progress_response_;
  v1::FinishTrialResponse finish_response_;
};

// Takes completions until every worker is done.
void DriveCompletions(grpc::CompletionQueue* cq, std::atomic<int>* running) {
  void* tag = nullptr;
  bool ok = false;
  while (running->load() > 0) {
    const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(100);
    switch (cq->AsyncNext(&tag, &ok, deadline)) {
      case grpc::CompletionQueue::GOT_EVENT:
        static_cast<SimWorker*>(tag)->Proceed(ok);
        break;
      case grpc::CompletionQueue::TIMEOUT:
        break;
      case grpc::CompletionQueue::SHUTDOWN:
        return;
    }
  }
}

// CPU seconds (user + system) a process has used so far, from /proc.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  std::getline(in, line);
  size_t close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
  if (f.size() < 13) return 0;  // fields after the name: state(0) ... utime(11) stime(12)
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

// The PostgreSQL server's processes: the postmaster and its children (those
// still running: an autovacuum worker that has exited is not counted). With
// by_process, adds each one's CPU seconds under its title ("postgres:
// walwriter", "postgres: postgres load [local] idle", ...).
double PostgresCpuSeconds(const std::string& data_dir, std::map<pid_t, std::pair<std::string, double>>* by_process = nullptr) {
  std::ifstream pidfile(data_dir + "/postmaster.pid");
  pid_t postmaster = 0;
  pidfile >> postmaster;
  if (postmaster <= 0) return 0;
  double total = ProcessCpuSeconds(postmaster);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    pid_t pid = std::atoi(entry.path().filename().c_str());
    if (pid <= 0) continue;
    std::ifstream in(entry.path() / "stat");
    std::string line;
    std::getline(in, line);
    size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::vector<std::string> f = absl::StrSplit(line.substr(close + 2), ' ');
    if (f.size() > 1 && std::atoi(f[1].c_str()) == postmaster) {
      const double cpu = ProcessCpuSeconds(pid);
      total += cpu;
      if (by_process != nullptr) {
        std::ifstream cmdline(entry.path() / "cmdline");
        std::string title;
        std::getline(cmdline, title, '\0');
        (*by_process)[pid] = {title, cpu};
      }
    }
  }
  return total;
}

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = static_cast<size_t>(p * (v.size() - 1));
  std::nth_element(v.begin(), v.begin() + k, v.end());
  return v[k];
}

int Main() {
  const int workers = absl::GetFlag(FLAGS_workers);
  absl::Time start;
  const int trials = absl::GetFlag(FLAGS_trials);
  const int batches = absl::GetFlag(FLAGS_batches);
  const int steps = absl::GetFlag(FLAGS_steps_per_batch);
  std::string target = absl::GetFlag(FLAGS_scheduler);
  const bool tls = absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_tls_ca).empty();
  if (tls && !target.empty() && absl::GetFlag(FLAGS_tls_ca).empty()) {
    std::fprintf(stderr, "--tls with --scheduler needs --tls_ca (the CA of that scheduler's certificate)\n");
    return 2;
  }

  std::unique_ptr<testing::PostgresInstance> pg;
  std::unique_ptr<db::Store> store;
  std::unique_ptr<scheduler::SchedulerServer> server;
  std::string conninfo;
  if (target.empty() && absl::GetFlag(FLAGS_memory_store)) {
    store = std::make_unique<db::MemoryStore>();
  } else if (target.empty()) {
    testing::PostgresInstanceOptions pg_options;
    pg_options.fast_unsafe = !absl::GetFlag(FLAGS_durable);
    pg_options.extra_settings = {"max_connections=200", "shared_buffers=256MB"};
    for (const std::string& setting : absl::GetFlag(FLAGS_pg_settings)) pg_options.extra_settings.push_back(setting);
    if (absl::GetFlag(FLAGS_pg_stats)) {
      pg_options.extra_settings.push_back("shared_preload_libraries=pg_stat_statements");
      pg_options.extra_settings.push_back("pg_stat_statements.track_planning=on");
    }
    auto started = testing::PostgresInstance::Start(pg_options);
    if (!started.ok()) {
      std::fprintf(stderr, "PostgreSQL: %s\n", started.status().ToString().c_str());
      return 1;
    }
    pg = *std::move(started);
    auto db = pg->CreateDatabase("load");
    if (!db.ok()) return 1;
    conninfo = *db;
    if (absl::GetFlag(FLAGS_in_process)) {  // a scheduler process opens its own
      db::PostgresStoreOptions options;
      options.connect.conninfo = conninfo;
      options.pool_size = absl::GetFlag(FLAGS_db_pool_size);
      auto opened = db::OpenPostgresStore(options);
      if (!opened.ok()) {
        std::fprintf(stderr, "store: %s\n", opened.status().ToString().c_str());
        return 1;
      }
      store = std::move(opened->store);
    }
  }
  // TLS: the scheduler's credentials (as flags for a child process) and the workers'.
  TlsServerOptions server_tls;
  TlsClientOptions client_tls;
  std::string certs_dir;
  if (tls && target.empty()) {
    certs_dir = pg ? pg->dir() + "/certs" : "";
    if (certs_dir.empty()) {
      char dir[] = "/tmp/normsweep-load-certs-XXXXXX";
      if (mkdtemp(dir) == nullptr) return 1;
      certs_dir = dir;
    }
    std::filesystem::create_directories(certs_dir);
    auto certs = testing::MakeTestCertificates(certs_dir);
    if (!certs.ok()) {
      std::fprintf(stderr, "certificates: %s\n", certs.status().ToString().c_str());
      return 1;
    }
    server_tls.cert = {certs->server_cert, "--tls"};
    server_tls.key = {certs->server_key, "--tls"};
    client_tls.ca = {certs->ca, "--tls"};
  } else if (tls) {
    client_tls.ca = {absl::GetFlag(FLAGS_tls_ca), "--tls_ca"};
  }
  auto client_credentials = MakeChannelCredentials(client_tls);
  if (!client_credentials.ok()) {
    std::fprintf(stderr, "%s\n", client_credentials.status().ToString().c_str());
    return 2;
  }
  std::optional<testing::Subprocess> child;
  if (target.empty() && !absl::GetFlag(FLAGS_in_process) && pg) {
    const std::string port_file = pg->dir() + "/scheduler.ports";
    std::vector<std::string> argv = {absl::GetFlag(FLAGS_scheduler_binary), "--host=127.0.0.1", "--port=0",
                                     "--metrics_port=-1", "--port_file=" + port_file,
                                     absl::StrCat("--db_pool_size=", absl::GetFlag(FLAGS_db_pool_size))};
    if (server_tls.enabled()) {
      argv.push_back("--tls_cert=" + server_tls.cert.path);
      argv.push_back("--tls_key=" + server_tls.key.path);
    }
    auto started = testing::Subprocess::Start(argv, {{"NORMSWEEP_DATABASE_URL", conninfo}}, pg->dir() + "/scheduler.log");
    if (!started.ok()) return 1;
    child.emplace(*std::move(started));
    auto ports = testing::WaitForFile(port_file, 30);
    if (!ports.ok()) {
      std::fprintf(stderr, "scheduler did not start: %s\n", ports.status().ToString().c_str());
      return 1;
    }
    target = absl::StrCat("127.0.0.1:", std::atoi(ports->c_str()));
  }
  if (target.empty()) {
    scheduler::SchedulerServerOptions server_options;
    server_options.grpc_address = "127.0.0.1:0";
    server_options.metrics_address = "";
    auto credentials = MakeServerCredentials(server_tls);
    if (!credentials.ok()) {
      std::fprintf(stderr, "%s\n", credentials.status().ToString().c_str());
      return 1;
    }
    server_options.credentials = *credentials;
    auto s = scheduler::SchedulerServer::Start(*store, RealClock::Get(), server_options);
    if (!s.ok()) {
      std::fprintf(stderr, "scheduler: %s\n", s.status().ToString().c_str());
      return 1;
    }
    server = *std::move(s);
    target = absl::StrCat("127.0.0.1:", server->grpc_port());
  }

  // Sweeps of up to 10,000 trials: 2 placements x 5 warm-ups x seeds.
  auto sweeps = v1::SweepService::NewStub(grpc::CreateChannel(target, *client_credentials));
  for (int done = 0, n = 0; done < trials; ++n) {
    const int size = std::min(10000, trials - done) / 10 * 10;
    if (size == 0) break;
    v1::SubmitSweepRequest req;
    v1::SweepSpec* spec = req.mutable_spec();
    spec->set_name(absl::StrCat("load-", n));
    spec->add_placements("post");
    spec->add_placements("pre");
    for (int w : {0, 1000, 2000, 4000, 8000}) spec->add_warmup_steps(w);
    spec->add_peak_lrs(5e-4);
    for (int s = 0; s < size / 10; ++s) spec->add_seeds(s);
    v1::SubmitSweepResponse resp;
    grpc::ClientContext ctx;
    grpc::Status st = sweeps->SubmitSweep(&ctx, req, &resp);
    if (!st.ok()) {
      std::fprintf(stderr, "SubmitSweep: %s\n", st.error_message().c_str());
      return 1;
    }
    done += size;
  }

  std::vector<WorkerResult> results(workers);
  std::vector<std::thread> threads;
  std::map<pid_t, std::pair<std::string, double>> pg_processes0, pg_processes;
  const double pg_cpu0 = pg ? PostgresCpuSeconds(pg->dir() + "/data", &pg_processes0) : 0;
  const double self_cpu0 = ProcessCpuSeconds(getpid());
  const double child_cpu0 = child ? ProcessCpuSeconds(child->pid()) : 0;
  start = absl::Now();
  Pacer pacer(absl::GetFlag(FLAGS_rate), start);
  grpc::CompletionQueue cq;
  std::atomic<int> running{workers};
  std::vector<std::unique_ptr<SimWorker>> sim;
  for (int i = 0; i < workers; ++i) {
    sim.push_back(
        std::make_unique<SimWorker>(target, *client_credentials, i, batches, steps, &pacer, &cq, &results[i], &running));
  }
  for (auto& w : sim) w->Start();
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_client_threads)); ++i) {
    threads.emplace_back(DriveCompletions, &cq, &running);
  }
  for (auto& t : threads) t.join();
  cq.Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq.Next(&tag, &ok)) {
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  const double pg_cpu = pg ? PostgresCpuSeconds(pg->dir() + "/data", &pg_processes) - pg_cpu0 : 0;
  const double self_cpu = ProcessCpuSeconds(getpid()) - self_cpu0;
  const double child_cpu = child ? ProcessCpuSeconds(child->pid()) - child_cpu0 : 0;
  double load[1] = {0};
  getloadavg(load, 1);

  int lifecycles = 0;
  int64_t points = 0;
  absl::Time drained = absl::InfiniteFuture();
  std::vector<absl::Time> finished;
  std::vector<double> lease_ms;
  std::vector<double> lease_at_s;  // when each lease started, seconds into the run
  for (const auto& r : results) {
    if (!r.error.empty()) std::fprintf(stderr, "worker error: %s\n", r.error.c_str());
    lifecycles += r.lifecycles;
    drained = std::min(drained, r.drained_at);
    finished.insert(finished.end(), r.finished_at.begin(), r.finished_at.end());
    points += r.points;
    lease_ms.insert(lease_ms.end(), r.lease_ms.begin(), r.lease_ms.end());
    for (absl::Time t : r.lease_at) lease_at_s.push_back(absl::ToDoubleSeconds(t - start));
  }
  int64_t stored = -1;
  if (!conninfo.empty()) {
    db::PgConnectOptions options;
    options.conninfo = conninfo;
    auto conn = db::PgConnection::Connect(options);
    if (conn.ok()) {
      auto r = (*conn)->Exec("SELECT count(*) FROM trial_metrics");
      if (r.ok()) stored = r->GetInt64(0, 0);
      if (absl::GetFlag(FLAGS_pg_stats)) {
        auto ext = (*conn)->Exec("CREATE EXTENSION IF NOT EXISTS pg_stat_statements");
        if (!ext.ok()) std::fprintf(stderr, "pg_stat_statements: %s\n", ext.status().ToString().c_str());
        auto top = (*conn)->Exec(
            "SELECT calls, round((total_exec_time + total_plan_time)::numeric, 0),"
            " round(((total_exec_time + total_plan_time) / greatest(calls, 1))::numeric, 3),"
            " plans || ' plans ' || round(total_plan_time::numeric, 0) || ' ms  ' || left(query, 70)"
            " FROM pg_stat_statements ORDER BY total_exec_time + total_plan_time DESC LIMIT 10");
        if (!top.ok()) std::fprintf(stderr, "pg_stat_statements: %s\n", top.status().ToString().c_str());
        if (top.ok()) {
          for (int i = 0; i < top->rows(); ++i) {
            std::printf("  pg: %8s calls %8s ms total %8s ms/call  %s\n", top->GetString(i, 0).c_str(),
                        top->GetString(i, 1).c_str(), top->GetString(i, 2).c_str(), top->GetString(i, 3).c_str());
          }
        }
      }
    }
  }
  if (absl::GetFlag(FLAGS_pg_stats)) {
    for (const auto& [pid, process] : pg_processes) {
      auto before = pg_processes0.find(pid);
      const double cpu = process.second - (before == pg_processes0.end() ? 0 : before->second.second);
      if (cpu >= 0.05) std::printf("  pg process %6d %7.2f s CPU  %s\n", pid, cpu, process.first.c_str());
    }
  }
  if (std::getenv("NORMSWEEP_LOAD_DEBUG") != nullptr) {
    std::vector<std::pair<double, double>> slow;
    for (size_t i = 0; i < lease_ms.size(); ++i) slow.emplace_back(lease_ms[i], lease_at_s[i]);
    std::sort(slow.rbegin(), slow.rend());
    for (size_t i = 0; i < std::min<size_t>(30, slow.size()); ++i) {
      std::printf("  slow lease %.1f ms at %.2f s\n", slow[i].first, slow[i].second);
    }
  }
  std::vector<double> sorted = lease_ms;
  const double p50 = Percentile(sorted, 0.50), p99 = Percentile(sorted, 0.99);
  const double max = sorted.empty() ? 0 : *std::max_element(sorted.begin(), sorted.end());
  std::printf("scheduler load: %d workers, %d trials x %d batches x %d steps, %s, PostgreSQL %s, %s\n", workers,
              lifecycles, batches, steps, tls ? "TLS" : "plaintext",
              absl::GetFlag(FLAGS_durable) ? "durable (fsync on)" : "fsync off",
              absl::GetFlag(FLAGS_rate) > 0 ? absl::StrCat("paced at ", absl::GetFlag(FLAGS_rate), " lifecycles/s").c_str()
                                            : "unpaced (saturation)");
  std::printf("  wall time            %.2f s\n", seconds);
  std::printf("  trial lifecycles/s   %.0f   (target >= 1000)\n", lifecycles / seconds);
  // The whole run includes its start (64 channels connecting, workers
  // registering, database backends preparing their statements) and its
  // drain (fewer than --workers busy once the queue is empty); the steady
  // rate counts the lifecycles that ended between 1 s in and the first
  // empty lease.
  const absl::Time steady_from = start + absl::Seconds(1);
  const absl::Time steady_to = std::min(drained, start + absl::Seconds(seconds));
  if (steady_to - steady_from >= absl::Seconds(1)) {
    const auto in_window = std::count_if(finished.begin(), finished.end(), [&](absl::Time t) {
      return t >= steady_from && t < steady_to;
    });
    std::printf("  steady lifecycles/s  %.0f   (from 1 s to the queue's end at %.2f s: %ld lifecycles)\n",
                in_window / absl::ToDoubleSeconds(steady_to - steady_from),
                absl::ToDoubleSeconds(steady_to - start), static_cast<long>(in_window));
  }
  std::printf("  metric points/s      %.0f   (target >= 50000)%s\n", points / seconds,
              stored >= 0 ? absl::StrCat("; rows stored: ", stored, " of ", points).c_str() : "");
  std::printf("  RPCs/s               %.0f\n", (lifecycles * (batches + 2.0) + lease_ms.size() - lifecycles) / seconds);
  std::printf("  lease latency        p50 %.2f ms, p99 %.2f ms, max %.2f ms   (target p99 < 20 ms)\n", p50, p99, max);
  // The first second includes connecting 64 channels, starting database
  // backends and preparing statements on them.
  std::vector<double> steady;
  for (size_t i = 0; i < lease_ms.size(); ++i) {
    if (lease_at_s[i] >= 1.0) steady.push_back(lease_ms[i]);
  }
  if (!steady.empty()) {
    const double s50 = Percentile(steady, 0.50), s99 = Percentile(steady, 0.99);
    std::printf("  after the first 1 s  p50 %.2f ms, p99 %.2f ms (%zu leases)\n", s50, s99, steady.size());
  }
  if (const double step = absl::GetFlag(FLAGS_timeline); step > 0) {
    std::map<int64_t, int> ended;  // interval index -> lifecycles that ended in it
    for (absl::Time t : finished) ++ended[static_cast<int64_t>(absl::ToDoubleSeconds(t - start) / step)];
    for (const auto& [i, n] : ended) {
      std::printf("  timeline %6.2f-%6.2f s  %5d lifecycles  %6.0f/s\n", i * step, (i + 1) * step, n, n / step);
    }
  }
  if (child) {
    std::printf("  CPU per lifecycle    %.0f us normsweep-scheduler, %.0f us PostgreSQL, %.0f us simulated workers\n",
                1e6 * child_cpu / std::max(1, lifecycles), 1e6 * pg_cpu / std::max(1, lifecycles),
                1e6 * self_cpu / std::max(1, lifecycles));
  } else {
    std::printf("  CPU per lifecycle    %.0f us in this process (scheduler + simulated workers), %.0f us in PostgreSQL\n",
                1e6 * self_cpu / std::max(1, lifecycles), 1e6 * pg_cpu / std::max(1, lifecycles));
  }
  std::printf("  machine              %ld cores, load average %.1f at the end (other work on the box inflates latency)\n",
              sysconf(_SC_NPROCESSORS_ONLN), load[0]);
  if (server) server->Shutdown();
  if (child) child->Stop(SIGTERM);
  return lifecycles > 0 ? 0 : 1;
}

}  // namespace
}  // namespace normsweep

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // Debian's Abseil checks every Mutex for lock-order cycles; measurable on hot paths.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return normsweep::Main();
}
